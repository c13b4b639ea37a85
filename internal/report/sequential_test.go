package report

import (
	"strings"
	"testing"
)

// round is a round's report: stock and each build with k of n cycles
// stranded (each its own episode) and their safety violations.
func round(builds ...Build) *Report {
	return &Report{Scenario: "s", Complete: true, Builds: builds}
}

func TestSequentialTests(t *testing.T) {
	d := SequentialDesign{Alpha: 0.001, Margin: 0.005, RoundCycles: 3}
	seed := func(n int) []*Report {
		var rs []*Report
		for range n {
			rs = append(rs, round(counts("stock", 3, 3, 0), counts("fix", 0, 3, 0)))
		}
		return rs
	}
	for _, tc := range []struct {
		name          string
		rounds        []*Report
		build         string
		outcome       string
		verdict       []string // what the sentence says
		decided       bool
		safetyOutcome string
	}{
		{"seed: fix decided after 5 rounds", seed(5), "fix", "less",
			[]string{"fix strands less than stock: 0 of 15 against 15 of 15 stranding episodes", "always-valid p = 0.00", "after 5 rounds"}, true, "continue"},
		{"seed: 4 rounds are not enough", seed(4), "fix", "continue",
			[]string{"undecided: 0 of 12 against 12 of 12 stranding episodes"}, false, "continue"},
		{"a build that only ran in later rounds is looked at in those",
			append([]*Report{round(counts("stock", 3, 3, 0))}, seed(5)...), "fix", "less", []string{"after 5 rounds"}, true, "continue"},
		{"neither strands: no difference", func() []*Report {
			var rs []*Report
			for range 8 {
				rs = append(rs, round(counts("stock", 0, 500, 0), counts("same", 0, 500, 0)))
			}
			return rs
		}(), "same", "no-difference", []string{"no difference larger than 5 per 1,000 cycles between same and stock: 0 of 4000 against 0 of 4000", "within [-"}, true, "no-difference"},
		{"unsafe: decided by its safety violations", func() []*Report {
			var rs []*Report
			for range 6 {
				rs = append(rs, round(counts("stock", 0, 3, 0), counts("unsafe", 0, 3, 9)))
			}
			return rs
		}(), "unsafe", "continue", []string{"undecided"}, true, "more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tests, err := SequentialTests(tc.rounds, d)
			if err != nil {
				t.Fatal(err)
			}
			if len(tests) != 1 || tests[0].Name != tc.build {
				t.Fatalf("tests %+v, want one of %s", tests, tc.build)
			}
			got := tests[0]
			if got.Strandings.Outcome != tc.outcome || got.Decided() != tc.decided || got.Safety.Outcome != tc.safetyOutcome {
				t.Errorf("outcome %s (safety %s), decided %v; want %s (safety %s), %v: %s", got.Strandings.Outcome, got.Safety.Outcome, got.Decided(),
					tc.outcome, tc.safetyOutcome, tc.decided, got.Strandings.Verdict)
			}
			for _, w := range tc.verdict {
				if !strings.Contains(got.Strandings.Verdict, w) {
					t.Errorf("verdict %q does not say %q", got.Strandings.Verdict, w)
				}
			}
		})
	}
}

// TestSequentialEpisodesAreTheUnit: a stock stranding that continues an
// episode is neither an event nor a trial, as in the fixed-cycles test.
func TestSequentialEpisodesAreTheUnit(t *testing.T) {
	stock := Build{Name: "stock", Cycles: 3, Stranded: 3, StrandedEpisodes: 1}
	tests, err := SequentialTests([]*Report{round(stock, counts("fix", 0, 3, 0))}, SequentialDesign{Alpha: 0.01, Margin: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	if s := tests[0].Strandings; s.BaseEvents != 1 || s.BaseTrials != 1 || s.Trials != 3 {
		t.Errorf("stock counted %d of %d, fix's trials %d; want 1 of 1 and 3", s.BaseEvents, s.BaseTrials, s.Trials)
	}
}

func TestSequentialTestsRefuseABadDesign(t *testing.T) {
	if _, err := SequentialTests(nil, SequentialDesign{Alpha: 2, Margin: 0.01}); err != nil {
		t.Errorf("no rounds: %v, want no tests and no error", err)
	}
	_, err := SequentialTests([]*Report{round(counts("stock", 0, 3, 0), counts("fix", 0, 3, 0))}, SequentialDesign{Alpha: 2, Margin: 0.01})
	if err == nil || !strings.Contains(err.Error(), "alpha") {
		t.Errorf("alpha 2: %v, want an error naming alpha", err)
	}
}
