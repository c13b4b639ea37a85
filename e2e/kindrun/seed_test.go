package kindrun

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/report"
)

// TestSeedScenarioWithRealKubelets is the headline as a user runs it:
// `strandlab run --provider kind` on seed-122413, stock and fix, one cycle
// each, on kind clusters with real kubelets, the throttling proxy and the
// pinning extender. Stock's first cycle strands, with the controller's
// empty node status patch in its timeline; fix strands nothing and is
// never unsafe; the report names the real kubelet.
func TestSeedScenarioWithRealKubelets(t *testing.T) {
	root := suite.RepoRoot(t)
	bin := filepath.Join(t.TempDir(), "strandlab")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "tools/strandlab")).CombinedOutput(); err != nil {
		t.Fatalf("build strandlab: %v\n%s", err, out)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--provider", "kind", "--scenario", "scenarios/seed-122413.yaml",
		"--builds", "stock,fix", "--cycles", "1", "--output", out, "--check")
	cmd.Dir = root
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("strandlab run: %v (the scenario's expectations: stock strands its first cycle, fix never)\n%s", err, tail(string(output), 30))
	}
	rep, err := report.Read(filepath.Join(out, "reports", "latest", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Provider != "kind" || !strings.HasSuffix(rep.Components["kubelet"].Version, "(real)") {
		t.Errorf("report: provider %q, kubelet %+v; want kind and a real kubelet", rep.Provider, rep.Components["kubelet"])
	}
	builds := map[string]report.Build{}
	for _, b := range rep.Builds {
		builds[b.Name] = b
	}
	stock, fix := builds["stock"], builds["fix"]
	if stock.Stranded != 1 || len(stock.Strandings) != 1 {
		t.Fatalf("stock: %d stranded cycles, %d strandings; want its one cycle stranded", stock.Stranded, len(stock.Strandings))
	}
	emptyPatch := false
	for _, e := range stock.Strandings[0].Timeline {
		emptyPatch = emptyPatch || e.Source == "proxy" && strings.Contains(e.Event, "PATCH nodes/") && strings.HasSuffix(e.Event, "{} -> 200")
	}
	if !emptyPatch {
		t.Errorf("stock's stranding timeline has no empty node status patch from the proxy: %+v", stock.Strandings[0].Timeline)
	}
	if fix.Stranded != 0 || fix.SafetyViolations != 0 || fix.Cycles != 1 {
		t.Errorf("fix: %d cycles, %d stranded, %d safety violations; want 1, 0, 0", fix.Cycles, fix.Stranded, fix.SafetyViolations)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
