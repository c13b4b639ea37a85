// Package fourthprovider shows the provider seam from outside it: a
// provider strandlab does not ship, defined and registered here and
// nowhere else, runs a scenario through the runner. The provider is a
// test double — local clusters lent out under another name, with fewer
// capabilities than local's (no controller builds, no proxy, no extender:
// the cluster's own controller, like a cloud cluster's) — so that the test
// needs nothing but this machine.
package fourthprovider

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/local"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/runner"
)

// lent is the fourth provider: a local cluster under its own name and with
// its own capabilities. Prepare (and the clusters it starts), Available
// and CheckSpec are local's.
type lent struct{ *local.Provider }

func (lent) Name() string { return "lent" }

func (p lent) Capabilities() cluster.Capabilities {
	return cluster.Capabilities{OwnKubelets: true, OwnCSIDriver: true, SimulatedKubelets: true}
}

const scenarioFile = `name: lent-control
seed: 3
cluster: {provider: lent, nodes: 2, nodeStatusUpdateFrequency: 1s}
workload:
  statefulSets:
  - {name: web, replicas: 2, volumesPerPod: 1}
churn: {cycles: 4, cycleTimeout: 60s, strandingThreshold: 10s}
builds: [stock]
`

func TestAFourthProviderRunsAScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a local cluster")
	}
	root := suite.RepoRoot(t)
	path := filepath.Join(t.TempDir(), "lent-control.yaml")
	if err := os.WriteFile(path, []byte(scenarioFile), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := runner.Options{ScenarioPath: path, Cycles: -1, OutputDir: t.TempDir(), RepoRoot: root, Progress: os.Stderr,
		// The one registration line.
		Providers: cluster.NewRegistry(&local.Provider{RepoRoot: root}, lent{&local.Provider{RepoRoot: root, Progress: os.Stderr}}),
	}
	ctx := context.Background()

	// What it cannot do is refused up front, from its capabilities.
	refused := opts
	refused.Builds = []string{"stock", "fix"}
	if _, err := runner.Prepare(ctx, refused); err == nil {
		t.Errorf("Prepare accepted builds stock and fix on a provider without controller builds")
	}

	sc, err := runner.Prepare(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := runner.Run(ctx, opts, sc)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	rep, err := report.Read(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Provider != "lent" || !rep.Complete || len(rep.Builds) != 1 {
		t.Fatalf("report: provider %q complete %v builds %d", rep.Provider, rep.Complete, len(rep.Builds))
	}
	b := rep.Builds[0]
	t.Logf("build %s: %d cycles, %d stranded, %d not running, provenance %+v", b.Name, b.Cycles, b.Stranded, b.CyclesNotRunning, b.Provenance)
	if b.Cycles != 4 || b.CyclesNotRunning != 0 || b.SafetyViolations != 0 {
		t.Errorf("build %s: %d cycles, %d not running, %d safety violations; want 4, 0, 0", b.Name, b.Cycles, b.CyclesNotRunning, b.SafetyViolations)
	}
	// Without controller builds the runner builds no controller: the
	// cluster's own runs, and the report says so.
	if b.Provenance.Module != runner.ClusterOwnController {
		t.Errorf("provenance %+v, want the cluster's own controller", b.Provenance)
	}
}
