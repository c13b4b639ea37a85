package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/clustertest"
	"github.com/strandlab/strandlab/internal/cluster/existing"
	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/pinning"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/scenario"
)

func writeScenario(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const minimal = `name: t
seed: 5
cluster: {provider: local, nodes: 1}
workload: {statefulSets: [{name: web, replicas: 1, volumesPerPod: 1}]}
churn: {cycles: 3}
`

func TestPrepare(t *testing.T) {
	registry := cluster.NewRegistry(
		clustertest.Provider{ProviderName: "local", Abilities: clustertest.Everything},
		clustertest.Provider{ProviderName: "kind", Missing: errors.New("docker: cannot connect to the daemon"), Abilities: clustertest.Everything},
		clustertest.Provider{ProviderName: "existing"},
	)
	seven := int64(7)
	tests := []struct {
		name     string
		scenario string
		opts     Options
		registry *cluster.Registry // default: registry
		want     string            // substring of the error; "" = valid
		check    func(*testing.T, *scenario.Scenario)
	}{
		{name: "defaults from the scenario", scenario: minimal, opts: Options{Cycles: -1},
			check: func(t *testing.T, sc *scenario.Scenario) {
				if sc.Churn.Cycles != 3 || sc.Seed != 5 || strings.Join(sc.Builds, ",") != "stock" {
					t.Errorf("cycles %d seed %d builds %v", sc.Churn.Cycles, sc.Seed, sc.Builds)
				}
			}},
		{name: "overrides win", scenario: minimal, opts: Options{Cycles: 9, Seed: &seven, Builds: []string{"stock", "fix"}},
			check: func(t *testing.T, sc *scenario.Scenario) {
				if sc.Churn.Cycles != 9 || sc.Seed != 7 || strings.Join(sc.Builds, ",") != "stock,fix" {
					t.Errorf("cycles %d seed %d builds %v", sc.Churn.Cycles, sc.Seed, sc.Builds)
				}
			}},
		{name: "a provider the scenario format does not know", scenario: minimal, opts: Options{Cycles: -1, Provider: "minikube"},
			want: `cluster.provider: provider "minikube": unknown (known: local, kind, existing)`},
		{name: "a provider this harness was built without", scenario: minimal, opts: Options{Cycles: -1, Provider: "existing"}, registry: cluster.NewRegistry(clustertest.Provider{ProviderName: "local"}),
			want: `cluster.provider: provider "existing": unknown (known: local)`},
		{name: "unavailable provider names what is missing", scenario: minimal, opts: Options{Cycles: -1, Provider: "kind"},
			want: `provider "kind" is not available here: docker: cannot connect to the daemon`},
		{name: "a provider that cannot run builds", scenario: minimal, opts: Options{Cycles: -1, Provider: "existing", Builds: []string{"fix"}},
			want: `builds: provider "existing" runs the cluster's own controller`},
		{name: "stock alone on such a provider", scenario: minimal, opts: Options{Cycles: -1, Provider: "existing"}},
		{name: "a build listed twice", scenario: minimal, opts: Options{Cycles: -1, Builds: []string{"fix", "fix"}},
			want: `builds[1]: "fix" is listed twice`},
		{name: "an unknown build", scenario: minimal, opts: Options{Cycles: -1, Builds: []string{"nosuchbuild"}},
			want: `builds[0]:`},
		{name: "a bad override", scenario: minimal, opts: Options{Cycles: 2_000_000},
			want: "churn.cycles: 2000000 out of range"},
		{name: "a run id suffix", scenario: minimal, opts: Options{Cycles: -1, RunIDSuffix: "shard-3"}},
		{name: "a run id suffix that cannot end a directory name", scenario: minimal, opts: Options{Cycles: -1, RunIDSuffix: "../x"},
			want: `--run-id-suffix: "../x" is not a DNS label`},
		{name: "a run id suffix too long", scenario: minimal, opts: Options{Cycles: -1, RunIDSuffix: strings.Repeat("a", 41)},
			want: `--run-id-suffix:`},
		{name: "a bad scenario field", scenario: minimal + "proxy: {rules: [{resource: nodes, predicate: volumesDetached}]}\n", opts: Options{Cycles: -1},
			want: `proxy.rules[0].predicate: "volumesDetached" is not`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.ScenarioPath, opts.RepoRoot, opts.Providers = writeScenario(t, tc.scenario), "../..", registry
			if tc.registry != nil {
				opts.Providers = tc.registry
			}
			sc, err := Prepare(context.Background(), opts)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Prepare: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Prepare error = %v, want %q", err, tc.want)
			}
			if tc.check != nil && sc != nil {
				tc.check(t, sc)
			}
		})
	}
}

func TestPinningConfig(t *testing.T) {
	sc, err := scenario.Parse([]byte(minimal + `scheduling:
  pinning: static
  static: [{statefulSet: web, ordinal: 0, node: node-1}]
  extenderLatency: {fixed: 1s}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := pinningConfig(sc)
	want := pinning.Config{Sticky: true, Seed: 5, Latency: fault.Delay{Fixed: fault.D(time.Second)},
		Static: []pinning.StaticPin{{Namespace: Namespace, StatefulSet: "web", Ordinal: 0, Node: "node-1"}}}
	if got == nil || got.Sticky != want.Sticky || got.Seed != want.Seed || got.Latency != want.Latency || len(got.Static) != 1 || got.Static[0] != want.Static[0] {
		t.Errorf("pinningConfig = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the extender would refuse it: %v", err)
	}
	plain, _ := scenario.Parse([]byte(minimal))
	if pinningConfig(plain) != nil || proxyProfile(plain) != nil {
		t.Errorf("a scenario without pinning or proxy got an extender or a proxy")
	}
}

func TestProxyProfile(t *testing.T) {
	sc, err := scenario.Parse([]byte(minimal + `proxy:
  qps: 20
  rules:
  - {resource: nodes, predicate: volumesAttachedRemoved, delay: {uniformMin: 1s, uniformMax: 2s}}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := proxyProfile(sc)
	if p == nil || p.Seed != 5 || p.QPS != 20 || len(p.Rules) != 1 || p.Rules[0].Predicate != fault.PredicateVolumesAttachedRemoved ||
		p.Rules[0].Delay != (fault.Delay{UniformMin: fault.D(time.Second), UniformMax: fault.D(2 * time.Second)}) {
		t.Errorf("proxyProfile = %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("the proxy would refuse it: %v", err)
	}
}

func TestOutcomeOf(t *testing.T) {
	res := cycle.Result{Cycles: []cycle.Cycle{{Index: 1, Outcome: cycle.Running}, {Index: 0, Outcome: cycle.Stranded}, {Index: 2, Outcome: cycle.TimedOut}}}
	b := report.Build{Cycles: 3, Stranded: 1, SafetyViolations: 2, CyclesNotRunning: 1}
	got := outcomeOf(b, res)
	if got != (scenario.Outcome{Cycles: 3, Stranded: 1, SafetyViolations: 2, CyclesNotRunning: 1, FirstCycle: "stranded"}) {
		t.Errorf("outcomeOf = %+v", got)
	}
}

func TestRunIDOf(t *testing.T) {
	now := time.Date(2026, 11, 30, 6, 13, 47, 0, time.UTC)
	tests := []struct{ name, suffix, want string }{
		{"soak", "", "20261130-061347-soak"},
		{"soak", "shard-3", "20261130-061347-soak-shard-3"},
	}
	for _, tc := range tests {
		if got := runIDOf(now, tc.name, tc.suffix); got != tc.want {
			t.Errorf("runIDOf(%q, %q) = %q, want %q", tc.name, tc.suffix, got, tc.want)
		}
	}
}

// checking is a provider that refuses specs as the existing provider does,
// and records what it was asked.
type checking struct {
	clustertest.Provider
	asked *[]cluster.Spec
}

func (p checking) CheckSpec(s cluster.Spec) error {
	*p.asked = append(*p.asked, s)
	return existing.CheckSpec(s)
}

// Prepare asks a SpecChecker about the spec each build would start with
// and refuses, before any cluster is touched, naming the scenario fields.
func TestPrepareAsksTheSpecChecker(t *testing.T) {
	var asked []cluster.Spec
	registry := cluster.NewRegistry(clustertest.Provider{ProviderName: "local", Abilities: clustertest.Everything},
		checking{Provider: clustertest.Provider{ProviderName: "existing"}, asked: &asked})
	plain := strings.Replace(minimal, "provider: local", "provider: existing", 1)
	tests := []struct {
		name, scenario string
		want           []string // fields the error names; none: accepted
	}{
		{"plain churn", plain, nil},
		{"proxy: {} holds nothing back", plain + "proxy: {}\n", nil},
		{"another storage class", strings.Replace(plain, "nodes: 1", "nodes: 1, storageClass: standard", 1), nil},
		{"proxy rules", plain + "proxy: {rules: [{resource: nodes, predicate: volumesAttachedRemoved, delay: {fixed: 3s}}]}\n", []string{"proxy.rules"}},
		{"proxy throttling", plain + "proxy: {qps: 5}\n", []string{"proxy.qps"}},
		{"pinning", plain + "scheduling: {pinning: sticky}\n", []string{"scheduling.pinning"}},
		{"the simulated kubelets' pace", strings.Replace(plain, "nodes: 1", "nodes: 1, nodeStatusUpdateFrequency: 1s", 1), []string{"cluster.nodeStatusUpdateFrequency"}},
		{"strandlab's CSI driver", strings.Replace(plain, "nodes: 1", "nodes: 1, csiDriver: x.csi.example.com", 1), []string{"cluster.csiDriver"}},
		{"all at once", strings.Replace(plain, "nodes: 1", "nodes: 1, nodeStatusUpdateFrequency: 1s", 1) +
			"scheduling: {pinning: sticky}\nproxy: {rules: [{resource: nodes, delay: {fixed: 3s}}]}\n",
			[]string{"cluster.nodeStatusUpdateFrequency", "scheduling.pinning", "proxy.rules"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			_, err := Prepare(context.Background(), Options{ScenarioPath: writeScenario(t, tc.scenario), Cycles: -1, RepoRoot: "../..", Providers: registry})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Prepare: %v", err)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), `provider "existing" cannot run it`) {
					t.Fatalf("Prepare = %v, want a refusal", err)
				}
				for _, f := range tc.want {
					if !strings.Contains(err.Error(), "\n"+f+": ") {
						t.Errorf("error does not name %s on a line of its own:\n%v", f, err)
					}
				}
			}
			if len(asked) != 1 || asked[0].Namespace != Namespace || asked[0].Name != "t-stock" || asked[0].ControllerManager != "" {
				t.Errorf("asked about %+v, want one spec for build stock in namespace %s", asked, Namespace)
			}
		})
	}
	// A provider that is no SpecChecker is not asked: local runs them all.
	if _, err := Prepare(context.Background(), Options{ScenarioPath: writeScenario(t, minimal+"scheduling: {pinning: sticky}\n"), Cycles: -1, RepoRoot: "../..", Providers: registry}); err != nil {
		t.Errorf("local: %v", err)
	}
}

func TestClusterSpec(t *testing.T) {
	sc, err := scenario.Parse([]byte(strings.Replace(minimal, "provider: local, nodes: 1", "provider: existing, nodes: 2, storageClass: fast", 1)))
	if err != nil {
		t.Fatal(err)
	}
	got := clusterSpec(sc, "stock", "/bin/kcm", "/out/stock", true, Options{RuntimeTimings: "/t.json"})
	if got.Name != "t-stock" || got.Nodes != 2 || got.OutputDir != "/out/stock" || !got.Keep || got.ControllerManager != "/bin/kcm" ||
		got.Namespace != Namespace || got.StorageClass != "fast" || got.Proxy != nil || got.Pinning != nil || got.RuntimeTimings != "/t.json" {
		t.Errorf("clusterSpec = %+v", got)
	}
	plain, _ := scenario.Parse([]byte(minimal))
	if got := clusterSpec(plain, "fix", "", "/o", false, Options{CSIDeployment: cluster.CSIUpstream}); got.StorageClass != "strandlab-hostpath" || got.CSIDeployment != cluster.CSIUpstream {
		t.Errorf("default storage class %q, CSI deployment %q", got.StorageClass, got.CSIDeployment)
	}
}

func TestNextPartialSave(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		took, want time.Duration
	}{
		{0, 0},
		{10 * time.Millisecond, 490 * time.Millisecond},
		{200 * time.Millisecond, 9800 * time.Millisecond},
	} {
		got := nextPartialSave(now, tc.took).Sub(now)
		if got != tc.want {
			t.Errorf("a write of %v: next in %v, want %v", tc.took, got, tc.want)
		}
		if share := float64(tc.took) / float64(got+tc.took); tc.took > 0 && share > partialSaveShare+1e-9 {
			t.Errorf("a write of %v takes %.3f of the time, more than %.2f", tc.took, share, partialSaveShare)
		}
	}
}
