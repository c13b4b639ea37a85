package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMainJobEndsWithVerdict: the main job — `make e2e` with no variables,
// i.e. `strandlab run` with its default scenarios, seed-122413 then
// control — runs seed-122413 in rounds until a verdict (its untilVerdict,
// α 0.01) without a cycle count given: stock strands its cycles (each a
// new episode) and fix none, so the console says "fix strands less than
// stock" at p < 0.01 (after 4 rounds when stock strands every cycle:
// docs/statistics.md). Then control runs its 3 cycles once and its line
// says what they exclude. The seed's report pools the rounds it kept and
// says why it stopped.
func TestMainJobEndsWithVerdict(t *testing.T) {
	r := start(t)
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, r.text())
	}
	if !strings.Contains(r.text(), "verdict: fix strands less than stock: 0 of ") {
		t.Errorf("the console has no verdict on fix:\n%s", r.text())
	}
	if !strings.Contains(r.text(), "0 of 3 against 0 of 3 stranding episodes (Fisher's exact, one-sided); what it excludes: fix's rate above") {
		t.Errorf("the console says nothing of control's 3 cycles:\n%s", r.text())
	}
	paths := r.stdoutLines()
	if len(paths) != 2 {
		t.Fatalf("stdout %q, want the two reports' paths", paths)
	}
	path := paths[0]
	rep := readReport(t, path)
	s := rep.Sequential
	if rep.Scenario != "seed-122413" || s == nil || len(s.Builds) != 1 {
		t.Fatalf("%s: report.json's sequential: %+v, want seed-122413's test of fix", path, s)
	}
	fix := s.Builds[0]
	if s.Alpha != 0.01 || fix.Name != "fix" || fix.Strandings.Outcome != "less" || fix.Strandings.PValue >= 0.01 || fix.Strandings.DecidedAt != len(s.Rounds) ||
		fix.Strandings.Events != 0 || fix.Strandings.BaseEvents < 10 {
		t.Errorf("alpha %g, fix: %+v; want alpha 0.01 (the scenario's), less at p < 0.01 at the last of the %d rounds, 0 episodes against at least 10", s.Alpha, fix.Strandings, len(s.Rounds))
	}
	if !strings.HasPrefix(s.Stopped, "every build decided") || !rep.Complete || s.RoundCycles != 3 {
		t.Errorf("stopped %q, complete %v, rounds of %d cycles; want every build decided, complete, 3 cycles (the scenario's)", s.Stopped, rep.Complete, s.RoundCycles)
	}
	// Each round is a run's report under the run's directory, with both
	// builds and its own seed; the run's report pools them.
	var cycles int
	for i, id := range s.Rounds {
		round := readReport(t, filepath.Join(filepath.Dir(path), "rounds", id, "report.json"))
		if round.Seed != rep.Seed+int64(i) || len(round.Builds) != 2 {
			t.Errorf("round %s: seed %d, %d builds; want seed %d and stock and fix", id, round.Seed, len(round.Builds), rep.Seed+int64(i))
		}
		cycles += 3
	}
	for _, b := range rep.Builds {
		if b.Cycles != cycles {
			t.Errorf("the pooled %s ran %d cycles, want %d (%d rounds of 3)", b.Name, b.Cycles, cycles, len(s.Rounds))
		}
	}
	compare, err := os.ReadFile(filepath.Join(filepath.Dir(path), "compare.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(compare), "## Until a verdict") || !strings.Contains(string(compare), "fix strands less than stock") {
		t.Errorf("compare.md lacks the sequential verdict:\n%s", compare)
	}
	control := readReport(t, paths[1])
	if control.Scenario != "control" || control.Sequential != nil || len(control.Builds) != 2 || control.Builds[0].Cycles != 3 {
		t.Errorf("%s: scenario %s, sequential %+v, %d builds; want control's 3 cycles of stock and fix, once", paths[1], control.Scenario, control.Sequential, len(control.Builds))
	}
	assertNothingLeft(t, r)
}

// TestUntilVerdictInterrupted: Ctrl-C in the second round leaves a valid
// report of the run that pools what the rounds ran, says it was
// interrupted and why it stopped, and exits 130 with nothing running.
func TestUntilVerdictInterrupted(t *testing.T) {
	r := start(t, "--scenario", "scenarios/seed-122413.yaml", "--builds", "stock,fix", "--until-verdict")
	r.waitForLine(t, "== round 2:", 5*time.Minute)
	// Stock's first cycle of round 2 (a round runs stock first): its
	// partial build is then in the round's report.
	r.waitForLine(t, "cycles 1/", 3*time.Minute)
	if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t); code != 130 {
		t.Fatalf("exit %d after Ctrl-C, want 130:\n%s", code, r.text())
	}
	rep := readReport(t, r.lastStdoutLine())
	s := rep.Sequential
	if !rep.Interrupted || rep.Complete || s == nil || len(s.Rounds) != 2 || s.Stopped != "round 2 did not complete" {
		t.Fatalf("interrupted %v, complete %v, sequential %+v; want an interrupted report of 2 rounds, the second not complete", rep.Interrupted, rep.Complete, s)
	}
	first := readReport(t, filepath.Join(filepath.Dir(r.lastStdoutLine()), "rounds", s.Rounds[0], "report.json"))
	if !first.Complete || len(first.Builds) != 2 {
		t.Errorf("round 1: complete %v with %d builds, want complete with stock and fix", first.Complete, len(first.Builds))
	}
	// Stopped in stock's churn of round 2, before fix ran in it: fix was
	// looked at in round 1 only.
	if len(s.Builds) != 1 || s.Builds[0].Strandings.Looks != 1 {
		t.Errorf("the test looked at %+v, want fix at round 1 only", s.Builds)
	}
	assertNothingLeft(t, r)
}
