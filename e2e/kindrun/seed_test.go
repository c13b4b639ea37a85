package kindrun

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/report"
)

// seedAttempts is how many seeds the kind seed test may try before it
// calls stock's stranding lost. The race is probabilistic: stock's first
// cycle strands in 9 of 10 seeds on the local provider (docs/performance.md)
// and a kind run once went the other
// way, so one seed alone would fail about one run in ten. With three, a
// healthy race fails about one run in a thousand, while a harness or
// controller that never strands still fails every time.
const seedAttempts = 3

// TestSeedScenarioWithRealKubelets is the headline as a user runs it:
// `strandlab run --provider kind` on seed-122413, stock and fix, one cycle
// each, on kind clusters with real kubelets, the throttling proxy and the
// pinning extender. Stock's first cycle strands, with the controller's
// empty node status patch in its timeline; fix strands nothing and is
// never unsafe; the report names the real kubelet. A seed whose stock
// cycle ran is logged and the next seed tried (seedAttempts); fix is held
// to its band on every seed tried.
func TestSeedScenarioWithRealKubelets(t *testing.T) {
	root := suite.RepoRoot(t)
	bin := filepath.Join(t.TempDir(), "strandlab")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "tools/strandlab")).CombinedOutput(); err != nil {
		t.Fatalf("build strandlab: %v\n%s", err, out)
	}
	for seed := 1; seed <= seedAttempts; seed++ {
		stock := runSeed(t, root, bin, seed)
		if stock.Stranded == 0 {
			t.Logf("seed %d: stock's first cycle ran (the race went the other way); trying the next seed", seed)
			continue
		}
		if stock.Stranded != 1 || len(stock.Strandings) != 1 {
			t.Fatalf("seed %d: stock: %d stranded cycles, %d strandings; want its one cycle stranded", seed, stock.Stranded, len(stock.Strandings))
		}
		emptyPatch := false
		for _, e := range stock.Strandings[0].Timeline {
			emptyPatch = emptyPatch || e.Source == "proxy" && strings.Contains(e.Event, "PATCH nodes/") && strings.HasSuffix(e.Event, "{} -> 200")
		}
		if !emptyPatch {
			t.Errorf("seed %d: stock's stranding timeline has no empty node status patch from the proxy: %+v", seed, stock.Strandings[0].Timeline)
		}
		return
	}
	t.Fatalf("stock's first cycle ran in all %d seeds tried; it strands in about 9 of 10 (docs/scenarios.md)", seedAttempts)
}

// runSeed runs seed-122413 on kind for one cycle of stock and fix with
// --check, fails the test unless fix stayed in its band and the report
// names a real kubelet, and returns stock's build. An unmet --check
// (exit 3) is expected when stock's first cycle ran; any other failure
// of the run is fatal.
func runSeed(t *testing.T, root, bin string, seed int) report.Build {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--provider", "kind", "--scenario", "scenarios/seed-122413.yaml",
		"--builds", "stock,fix", "--cycles", "1", "--seed", strconv.Itoa(seed), "--output", out, "--check")
	cmd.Dir = root
	output, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == exitUnmet) {
		t.Fatalf("seed %d: strandlab run: %v\n%s", seed, err, tail(string(output), 30))
	}
	rep, rerr := report.Read(filepath.Join(out, "reports", "latest", "report.json"))
	if rerr != nil {
		t.Fatalf("seed %d: %v (strandlab run: %v)\n%s", seed, rerr, err, tail(string(output), 30))
	}
	if rep.Provider != "kind" || !strings.HasSuffix(rep.Components["kubelet"].Version, "(real)") {
		t.Errorf("seed %d: report: provider %q, kubelet %+v; want kind and a real kubelet", seed, rep.Provider, rep.Components["kubelet"])
	}
	builds := map[string]report.Build{}
	for _, b := range rep.Builds {
		builds[b.Name] = b
	}
	stock, fix := builds["stock"], builds["fix"]
	if stock.Cycles != 1 {
		t.Fatalf("seed %d: stock ran %d cycles; want 1", seed, stock.Cycles)
	}
	if fix.Stranded != 0 || fix.SafetyViolations != 0 || fix.Cycles != 1 {
		t.Fatalf("seed %d: fix: %d cycles, %d stranded, %d safety violations; want 1, 0, 0", seed, fix.Cycles, fix.Stranded, fix.SafetyViolations)
	}
	// Every kind report has what a cycle cost by component, the real
	// kubelet's included, read from the nodes' control groups.
	for _, b := range rep.Builds {
		for _, c := range []string{"kubelet", "containerd", "kube-apiserver", "apiproxy", "harness"} {
			if b.CPUSecondsPerCycle[c] <= 0 {
				t.Errorf("seed %d: build %s: cpu_seconds_per_cycle[%s] = %v, want > 0 (all: %v)", seed, b.Name, c, b.CPUSecondsPerCycle[c], b.CPUSecondsPerCycle)
			}
		}
	}
	// And what the nodes' container runtime took, from the kubelets' own
	// metrics: the deleted pod's stop on both builds, the replacement's
	// start where it ran (fix; stock's replacement strands before its
	// sandbox is made), and the kubelet's status writes around them.
	wantOps := map[string][]string{"stock": {"stop_container", "stop_podsandbox", "pod_status_sync"},
		"fix": {"stop_container", "stop_podsandbox", "run_podsandbox", "create_container", "start_container", "pod_status_sync"}}
	for name, ops := range wantOps {
		for _, op := range ops {
			if o := builds[name].RuntimeOps[op]; o.Count == 0 || o.P50MS <= 0 {
				t.Errorf("seed %d: build %s: runtime_ops[%s] = %+v, want a count and a median (all: %v)", seed, name, op, o, builds[name].RuntimeOps)
			}
		}
	}
	if err != nil && stock.Stranded != 0 {
		t.Fatalf("seed %d: --check failed although stock stranded\n%s", seed, tail(string(output), 30))
	}
	return stock
}

// exitUnmet is strandlab run --check's exit status for an outcome outside
// the scenario's expect band (tools/strandlab).
const exitUnmet = 3

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
