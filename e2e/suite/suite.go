// Package suite starts the one local cluster an e2e test package shares,
// through sigs.k8s.io/e2e-framework, so every suite's TestMain is one call.
package suite

import (
	"context"
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/e2eprovider"
	"github.com/strandlab/strandlab/internal/cluster/local"
	"github.com/strandlab/strandlab/internal/upstream"
)

// Suite is a test package's environment and its cluster.
type Suite struct {
	Env      env.Environment
	Provider *e2eprovider.Provider
	Binaries upstream.Binaries
}

// Run builds the binaries, creates a local cluster named name from spec
// before the package's tests and destroys it after them; s is filled in
// before the tests run. With STRANDLAB_E2E_LOGS set, the components' logs
// are copied there first (CI artifacts). It returns the exit code.
func Run(m *testing.M, name string, spec cluster.Spec, s *Suite) int {
	wd, _ := os.Getwd()
	root, err := upstream.RepoRoot(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if s.Binaries, err = upstream.Ensure(context.Background(), root, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if spec.OutputDir == "" {
		logs, err := os.MkdirTemp("", "strandlab-e2e-logs-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(logs)
		spec.OutputDir = logs
	}
	s.Env = env.NewWithConfig(envconf.New())
	s.Provider = e2eprovider.New(&local.Provider{Binaries: s.Binaries}, spec)
	s.Env.Setup(envfuncs.CreateCluster(s.Provider, name))
	finish := []env.Func{envfuncs.DestroyCluster(name)}
	if d := os.Getenv("STRANDLAB_E2E_LOGS"); d != "" {
		finish = append([]env.Func{envfuncs.ExportClusterLogs(name, d+"/"+name)}, finish...)
	}
	s.Env.Finish(finish...)
	return s.Env.Run(m)
}
