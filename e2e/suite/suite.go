// Package suite starts the one local cluster an e2e test package shares,
// through sigs.k8s.io/e2e-framework, so every suite's TestMain is one call.
package suite

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/e2eprovider"
	"github.com/strandlab/strandlab/internal/cluster/kind"
	"github.com/strandlab/strandlab/internal/cluster/local"
	"github.com/strandlab/strandlab/internal/upstream"
)

// Suite is a test package's environment and its cluster.
type Suite struct {
	Env      env.Environment
	Provider *e2eprovider.Provider
	// ClusterProvider is the provider of the shared cluster, and Starter
	// what its Prepare returned: a test may start more clusters with it.
	ClusterProvider cluster.Provider
	Starter         cluster.Starter
}

// Run builds the binaries, creates a local cluster named name from spec
// before the package's tests and destroys it after them; s is filled in
// before the tests run. With STRANDLAB_E2E_LOGS set, the components' logs
// are copied there first (CI artifacts). It returns the exit code. With
// -short (make unit) it runs nothing and returns 0: the suite needs a cluster.
func Run(m *testing.M, name string, spec cluster.Spec, s *Suite) int {
	return RunOn(m, "local", name, spec, s)
}

// RunOn is Run on the named provider: "local", or "kind" (real kubelets in
// Docker). A kind suite on a machine where Docker does not answer is
// skipped with one line saying so; a local provider that is not available
// is an error.
func RunOn(m *testing.M, providerName, name string, spec cluster.Spec, s *Suite) int {
	wd, _ := os.Getwd()
	// testing.Short reads the -short flag, which m.Run would parse only later.
	flag.Parse()
	if testing.Short() {
		fmt.Printf("e2e/%s: skipped in -short mode (starts a cluster)\n", filepath.Base(wd))
		return 0
	}
	root, err := upstream.RepoRoot(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var provider cluster.Provider
	switch providerName {
	case "local":
		provider = &local.Provider{RepoRoot: root, Progress: os.Stderr}
	case "kind":
		provider = &kind.Provider{RepoRoot: root, Progress: os.Stderr, NodeImage: os.Getenv(kind.NodeImageEnv)}
	default:
		fmt.Fprintf(os.Stderr, "suite: unknown provider %q\n", providerName)
		return 1
	}
	if err := provider.Available(context.Background()); err != nil {
		if providerName == "kind" {
			fmt.Printf("e2e/%s: skipped: the kind provider is not available here: %v\n", filepath.Base(wd), err)
			return 0
		}
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	starter, err := provider.Prepare(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s.ClusterProvider, s.Starter = provider, starter
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
	s.Env.BeforeEachFeature(boundFeature)
	s.Provider = e2eprovider.New(provider.Name(), starter, spec)
	s.Env.Setup(envfuncs.CreateCluster(s.Provider, name))
	finish := []env.Func{envfuncs.DestroyCluster(name)}
	if d := os.Getenv("STRANDLAB_E2E_LOGS"); d != "" {
		finish = append([]env.Func{envfuncs.ExportClusterLogs(name, d+"/"+name)}, finish...)
	}
	s.Env.Finish(finish...)
	return s.Env.Run(m)
}

// teardownMargin is the time a suite keeps, before the test binary's
// -timeout, to stop its cluster and say which step was stuck.
const teardownMargin = 3 * time.Minute

// boundFeature gives a feature's context a deadline teardownMargin before
// the test binary's own: a request that never returns (its context is the
// environment's, which has none) then fails the step that made it, and the
// cluster is still torn down, instead of the binary panicking at its
// timeout with the cluster's processes left to the next run's sweep.
func boundFeature(ctx context.Context, _ *envconf.Config, t *testing.T, _ features.Feature) (context.Context, error) {
	deadline, ok := t.Deadline()
	if !ok {
		return ctx, nil
	}
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(-teardownMargin))
	t.Cleanup(cancel)
	return ctx, nil
}

// RepoRoot is the strandlab checkout a test runs in (for tests that run the
// repository's scripts or CLI).
func RepoRoot(t *testing.T) string {
	t.Helper()
	wd, _ := os.Getwd()
	root, err := upstream.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// Clientset is a client of the suite's cluster as the framework's
// environment knows it: cfg.Client(), from the kubeconfig that
// envfuncs.CreateCluster put into cfg, with the harness's client limits
// (client-go's default 5 QPS would pace the tests' own polls). A test
// outside a feature passes the environment's own, s.Env.EnvConf().
func Clientset(t *testing.T, cfg *envconf.Config) kubernetes.Interface {
	t.Helper()
	rc := rest.CopyConfig(cfg.Client().RESTConfig())
	cluster.HarnessRateLimits(rc)
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatalf("a client of the suite's cluster: %v", err)
	}
	return c
}
