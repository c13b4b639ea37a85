// Package volumes is the e2e suite of the attach path on a local cluster:
// PVCs provisioned by the real csi-provisioner, VolumeAttachments attached by
// the real csi-attacher through the real attach/detach controller, and the
// simulated kubelet mounting only what node status says is attached.
package volumes

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/e2eprovider"
	"github.com/strandlab/strandlab/internal/cluster/local"
	"github.com/strandlab/strandlab/internal/upstream"
)

var (
	testenv  env.Environment
	provider *e2eprovider.Provider
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	wd, _ := os.Getwd()
	root, err := upstream.RepoRoot(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bins, err := upstream.Ensure(context.Background(), root, os.Stderr)
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
	// A 1 s node status pace keeps the suite quick; the order of events it
	// checks does not depend on the pace.
	provider = e2eprovider.New(&local.Provider{Binaries: bins},
		cluster.Spec{Nodes: 3, OutputDir: logs, NodeStatusUpdateFrequency: time.Second})
	testenv.Setup(envfuncs.CreateCluster(provider, "e2e-volumes"))
	finish := []env.Func{envfuncs.DestroyCluster("e2e-volumes")}
	if d := os.Getenv("STRANDLAB_E2E_LOGS"); d != "" {
		finish = append([]env.Func{envfuncs.ExportClusterLogs("e2e-volumes", d)}, finish...)
	}
	testenv.Finish(finish...)
	return testenv.Run(m)
}
