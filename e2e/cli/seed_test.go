package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/detector"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/scan"
)

// strandscanBin builds tools/strandscan once per test binary.
func strandscanBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(filepath.Dir(strandlab), "strandscan")
	cmd := exec.Command("go", "build", "-o", bin, "./tools/strandscan")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build strandscan: %v\n%s", err, out)
	}
	return bin
}

// runStrandscan runs strandscan -o json against kubeconfig and returns its
// exit code and findings.
func runStrandscan(t *testing.T, kubeconfig string, args ...string) (int, *scan.Report, string) {
	t.Helper()
	cmd := exec.Command(strandscanBin(t), append([]string{"--kubeconfig", kubeconfig, "-o", "json"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rep scan.Report
	if code != 2 {
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatalf("strandscan JSON: %v\n%s\n%s", err, stdout.String(), stderr.String())
		}
	}
	return code, &rep, stderr.String()
}

// TestSeed122413StrandsStockNotFix is the reproduction: on the same
// seed, the stock controller strands the volume on the first cycle, with
// the timeline of kubernetes #122413, and the fix build does not; then
// strandscan, pointed at the kept stock cluster, lists the stranding and
// exits 1.
func TestSeed122413StrandsStockNotFix(t *testing.T) {
	// The race goes the stock controller's way in at least 9 of 10 runs,
	// not all (docs/performance.md: seeds 1-10, 9 or 10 of 10 each time;
	// in a miss the replacement is scheduled before the kubelet reports
	// the volume unmounted), so a run whose only miss is stock's first
	// cycle reaching Running is run once more; two misses in a row fail.
	var r *run
	var code int
	for attempt := 1; ; attempt++ {
		r = start(t, "--scenario", "scenarios/seed-122413.yaml", "--builds", "fix,stock", "--cycles", "1", "--keep", "--check")
		code = r.wait(t)
		out := r.text()
		if attempt == 1 && code == 3 && strings.Contains(out, `seed-122413/stock: firstCycle = "running", expected "stranded"`) &&
			!strings.Contains(out, "seed-122413/fix:") {
			_, dir := keptCluster(t, r)
			_ = exec.Command(strandlab, "down", dir).Run()
			t.Logf("attempt 1: stock's first cycle reached Running (the race went the other way); running once more")
			continue
		}
		break
	}
	kubeconfig, _ := keptCluster(t, r)
	if code != 0 {
		t.Fatalf("exit %d (3: outside the scenario's expect band):\n%s", code, r.text())
	}

	rep := readReport(t, r.lastStdoutLine())
	builds := map[string]report.Build{}
	for _, b := range rep.Builds {
		builds[b.Name] = b
	}
	if fix := builds["fix"]; fix.Cycles != 1 || fix.Stranded != 0 || fix.CyclesNotRunning != 0 || fix.Provenance.PatchSHA256 == "" {
		t.Errorf("fix: %d cycles, %d stranded, %d not running, provenance %+v; want 1 Running cycle of a patched build",
			fix.Cycles, fix.Stranded, fix.CyclesNotRunning, fix.Provenance)
	}
	stock := builds["stock"]
	if stock.Stranded != 1 || len(stock.Strandings) != 1 || stock.Strandings[0].Cycle != 0 {
		t.Fatalf("stock: %d stranded %+v, want the first cycle stranded", stock.Stranded, stock.Strandings)
	}
	s := stock.Strandings[0]
	// The timeline steps of docs/design.md ("The bug"), in order: removed from node status, detach,
	// re-attached, empty patch, and the volume still absent with the
	// VolumeAttachment attached past the threshold. (The detector's
	// "stranded since" is the re-attach: the condition holds from then on,
	// before the empty patch makes it permanent.)
	checkSteps(t, s.Timeline, []step{
		{"volume removed from the node's status", "status.volumesAttached - " + s.Volume},
		{"detach", "deletion requested (detach)"},
		{"re-attach", "attached=true"},
		{"empty patch", "PATCH nodes/" + s.Node + "/status {}"},
		{"stranded past the threshold", "still stranded past the threshold"},
	})
	// The replacement's binding races the detach: the reconciler has decided
	// to detach once it patched the status, so the scheduler may bind the
	// replacement just before the DELETE as well as after it (a CI run bound
	// it 10 ms before). What the bug needs is the binding before the
	// re-attach.
	checkSteps(t, s.Timeline, []step{
		{"replacement on the same node", "scheduled to " + s.Node},
		{"re-attach", "attached=true"},
	})
	if !strings.Contains(fmt.Sprint(s.Timeline), "stranded: VolumeAttachment "+s.VolumeAttachment) {
		t.Errorf("timeline lacks the detector's evidence naming %s", s.VolumeAttachment)
	}

	code, found, stderr := runStrandscan(t, kubeconfig, "--threshold", "10s")
	if code != 1 || found.Counts.Stranded != 1 {
		t.Fatalf("strandscan exit %d with %+v, want exit 1 and the stranding\n%s", code, found.Counts, stderr)
	}
	// Other classes (a transient phantom listing) may be listed too: the
	// stranding is the one of kind stranded.
	var f scan.Finding
	for _, x := range found.Findings {
		if x.Kind == detector.Stranded {
			f = x
		}
	}
	if f.Node != s.Node || f.Pod != s.Pod || f.Volume != s.Volume || f.Since.IsZero() || f.Evidence == "" {
		t.Errorf("strandscan finding %+v, want node %s pod %s volume %s with since and evidence", f, s.Node, s.Pod, s.Volume)
	}
}

// step is one thing a timeline must show: what, and a substring of its event.
type step struct{ what, contains string }

// checkSteps fails unless the timeline shows every step, in order.
func checkSteps(t *testing.T, timeline []report.TimelineEntry, steps []step) {
	t.Helper()
	next := 0
	for _, e := range timeline {
		if next < len(steps) && strings.Contains(e.Event, steps[next].contains) {
			next++
		}
	}
	if next < len(steps) {
		var lines []string
		for _, e := range timeline {
			lines = append(lines, fmt.Sprintf("%8.0f %s: %s", e.TMS, e.Source, e.Event))
		}
		t.Errorf("timeline lacks step %q (%q) in order:\n%s", steps[next].what, steps[next].contains, strings.Join(lines, "\n"))
	}
}

// TestMirrorSafetyStockNotFix: on scenarios/mirror-safety.yaml the stock
// controller's removal patch comes out empty and the volume is detached
// while the node still lists it, and a pod is scheduled onto that node: the
// detector reports safety violation (a) with that timeline. fix, on the
// same seed and faults, has none.
func TestMirrorSafetyStockNotFix(t *testing.T) {
	r := start(t, "--scenario", "scenarios/mirror-safety.yaml", "--builds", "stock,fix", "--cycles", "6", "--check")
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d (3: outside the scenario's expect band):\n%s", code, r.text())
	}
	rep := readReport(t, r.lastStdoutLine())
	builds := map[string]report.Build{}
	for _, b := range rep.Builds {
		builds[b.Name] = b
	}
	if fix := builds["fix"]; fix.Cycles != 6 || fix.SafetyViolations != 0 || fix.Stranded != 0 || fix.CyclesNotRunning != 0 {
		t.Errorf("fix: %d cycles, %d safety violations %+v, %d stranded, %d not running; want 6 clean cycles",
			fix.Cycles, fix.SafetyViolations, fix.SafetyFindings, fix.Stranded, fix.CyclesNotRunning)
	}
	stock := builds["stock"]
	if stock.SafetyViolations < 1 || len(stock.SafetyFindings) != stock.SafetyViolations {
		t.Fatalf("stock: %d safety violations, findings %+v; want at least one, each listed", stock.SafetyViolations, stock.SafetyFindings)
	}
	f := stock.SafetyFindings[0]
	if f.Kind != detector.ListedNotAttached || f.Node != "node-1" || f.VolumeAttachment == "" {
		t.Fatalf("stock finding %+v, want listed_not_attached on node-1 naming its VolumeAttachment", f.Finding)
	}
	checkSteps(t, f.Timeline, []step{
		{"the volume added to the node's status", "PATCH nodes/node-1/status {\"status\":{\"volumesAttached\":[{"},
		{"the removal patch comes out empty", "PATCH nodes/node-1/status {}"},
		{"detach while the node still lists the volume", f.VolumeAttachment + " (" + f.PV + " on node-1) deletion requested (detach)"},
		{"a pod scheduled onto the node", "scheduled to node-1"},
		{"the detector's verdict", "safety violation (listed_not_attached) begins"},
	})
}
