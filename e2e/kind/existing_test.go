package kind

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	e2eexisting "github.com/strandlab/strandlab/e2e/existing"
	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/existing"
	"github.com/strandlab/strandlab/internal/runner"
)

// existingScenario is a short churn for the suite's kind cluster treated
// as a cluster strandlab did not create: its two workers, its real
// kubelets (their own 10 s status pace), strandlab's StorageClass the kind
// provider deployed.
const existingScenario = `name: kind-existing
seed: 3
cluster: {provider: existing, nodes: 2}
workload: {statefulSets: [{name: web, replicas: 2, volumesPerPod: 1, service: false}]}
churn: {cycles: 6, order: roundRobin, cycleTimeout: 90s, strandingThreshold: 30s}
expect:
  '*': {stranded: {max: 0}, safetyViolations: {max: 0}, cyclesNotRunning: {max: 0}}
`

// TestExistingProvider runs the existing provider on the kind cluster
// through its kubeconfig (kind's is self-contained) and checks the run
// leaves nothing behind.
func TestExistingProvider(t *testing.T) {
	ctx := context.Background()
	client := suite.Clientset(t, s.Env.EnvConf())
	path := filepath.Join(t.TempDir(), "kind-existing.yaml")
	if err := os.WriteFile(path, []byte(existingScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	kubeconfig := s.Provider.Cluster().Kubeconfig()
	opts := runner.Options{ScenarioPath: path, Cycles: -1, OutputDir: t.TempDir(), RepoRoot: suite.RepoRoot(t), Progress: os.Stderr,
		Providers: cluster.NewRegistry(&existing.Provider{Kubeconfig: kubeconfig, Consent: true, Progress: os.Stderr})}
	witness := e2eexisting.Watch(t, client, runner.Namespace)
	rep, took := e2eexisting.RunAndRead(ctx, t, opts)
	if rep.Provider != existing.Name || !rep.Complete || len(rep.Builds) != 1 {
		t.Fatalf("report: provider %q complete %v builds %d", rep.Provider, rep.Complete, len(rep.Builds))
	}
	b := rep.Builds[0]
	t.Logf("existing on kind: %d cycles, %d stranded, %d not running, %.2f cycles/s, run and cleanup %s",
		b.Cycles, b.Stranded, b.CyclesNotRunning, b.CyclesPerSecond, took.Round(time.Second))
	if b.Cycles != 6 || b.Stranded != 0 || b.SafetyViolations != 0 || b.CyclesNotRunning != 0 {
		t.Errorf("build %s: %d cycles, %d stranded, %d safety, %d not running; want 6, 0, 0, 0", b.Name, b.Cycles, b.Stranded, b.SafetyViolations, b.CyclesNotRunning)
	}
	if got := rep.Components["kubelet"].Version; got != s.Provider.Cluster().KubernetesVersion() {
		t.Errorf("components: kubelet %q, want the kind nodes' %q", got, s.Provider.Cluster().KubernetesVersion())
	}
	if labels := witness.Labels(); labels[existing.LabelManagedBy] != existing.ManagedBy {
		t.Errorf("the run's namespace had labels %v", labels)
	}
	if pvs := witness.PVs(); len(pvs) != 2 {
		t.Errorf("PVs claimed from the namespace during the run: %v, want 2", pvs)
	}
	witness.AssertNothingLeft(ctx, t, client)
}
