package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUntilVerdictDecidesSeed: `--until-verdict` on seed-122413 runs rounds
// of stock and fix, without a cycle count given, until fix is decided:
// stock strands its cycles (each a new episode) and fix none, so the
// always-valid test says "fix strands less than stock" within the bound on
// cycles. The run's report pools the rounds it kept, says why it stopped,
// and the console ends with the verdict. (α 0.05 keeps it to three rounds
// when stock strands every cycle: docs/statistics.md.)
func TestUntilVerdictDecidesSeed(t *testing.T) {
	r := start(t, "--scenario", "scenarios/seed-122413.yaml", "--builds", "stock,fix", "--until-verdict", "--verdict-alpha", "0.05", "--max-cycles", "30")
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, r.text())
	}
	if !strings.Contains(r.text(), "verdict: fix strands less than stock: 0 of ") {
		t.Errorf("the console does not end with fix's verdict:\n%s", r.text())
	}
	path := r.lastStdoutLine()
	rep := readReport(t, path)
	s := rep.Sequential
	if s == nil || len(s.Builds) != 1 {
		t.Fatalf("report.json's sequential: %+v, want fix's tests", s)
	}
	fix := s.Builds[0]
	if fix.Name != "fix" || fix.Strandings.Outcome != "less" || fix.Strandings.PValue > 0.05 || fix.Strandings.DecidedAt != len(s.Rounds) ||
		fix.Strandings.Events != 0 || fix.Strandings.BaseEvents < 7 {
		t.Errorf("fix: %+v, want less at p <= 0.05 at the last of the %d rounds, 0 episodes against at least 7", fix.Strandings, len(s.Rounds))
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
