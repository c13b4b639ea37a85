// Package cluster is the e2e suite of the local cluster provider: one real
// local cluster (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, simulated kubelets) is started for the whole package
// through e2e-framework, and the features below check it as a user would.
package cluster

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

const (
	clusterName = "e2e-cluster"
	nodeCount   = 3
)

var (
	testenv  env.Environment
	provider *e2eprovider.Provider
	bins     upstream.Binaries
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, _ := os.Getwd()
	root, err := upstream.RepoRoot(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bins, err = upstream.Ensure(context.Background(), root, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logs, err := os.MkdirTemp("", "strandlab-e2e-logs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(logs)

	testenv = env.NewWithConfig(envconf.New())
	provider = e2eprovider.New(&local.Provider{Binaries: bins}, cluster.Spec{Nodes: nodeCount, OutputDir: logs})
	testenv.Setup(envfuncs.CreateCluster(provider, clusterName))
	finish := []env.Func{envfuncs.DestroyCluster(clusterName)}
	if d := os.Getenv("STRANDLAB_E2E_LOGS"); d != "" {
		// Keep the component logs (CI artifacts) before the cluster goes.
		finish = append([]env.Func{envfuncs.ExportClusterLogs(clusterName, d)}, finish...)
	}
	testenv.Finish(finish...)
	return testenv.Run(m)
}
