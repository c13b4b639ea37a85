package render

import (
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/report"
)

func TestVerdicts(t *testing.T) {
	fixed := &report.Report{Scenario: "seed-122413", Complete: true, Builds: []report.Build{
		{Name: "stock", Cycles: 8, Stranded: 8, StrandedEpisodes: 8}, {Name: "fix", Cycles: 8}}}
	report.SetTests(fixed)
	control := &report.Report{Scenario: "control", Complete: true, Builds: []report.Build{{Name: "stock", Cycles: 3}, {Name: "fix", Cycles: 3}}}
	report.SetTests(control)
	rounds := []*report.Report{}
	for range 5 {
		rounds = append(rounds, &report.Report{Builds: []report.Build{{Name: "stock", Cycles: 3, Stranded: 3, StrandedEpisodes: 3}, {Name: "fix", Cycles: 3}}})
	}
	d := report.SequentialDesign{Alpha: 0.001, Margin: 0.005, RoundCycles: 3, MaxCycles: 300}
	tests, err := report.SequentialTests(rounds, d)
	if err != nil {
		t.Fatal(err)
	}
	seq := &report.Report{Scenario: "seed-122413", Complete: true, Builds: fixed.Builds,
		Sequential: &report.Sequential{Test: report.SequentialTestName, SequentialDesign: d, Rounds: []string{"round-001", "round-002"},
			Stopped: "every build decided, after 15 cycles a build", Builds: tests}}
	for _, tc := range []struct {
		name    string
		r       *report.Report
		console []string
		compare []string
	}{
		{"fixed cycles", fixed,
			[]string{"verdict: fix strands less than stock, p = 7.8e-5: 0 of 8 against 8 of 8 stranding episodes (Fisher's exact, one-sided)"}, nil},
		{"until a verdict", seq,
			[]string{"verdict: fix strands less than stock: 0 of 15 against 15 of 15 stranding episodes, always-valid p = ", "  safety: undecided", "stopped: every build decided"},
			[]string{"## Until a verdict", "mixture sequential probability ratio test", "rounds of 3 cycles a build", "| fix | stranding episodes | fix strands less than stock", "| 5 |", "- fix: 0.41, 0.069, 0.011, 0.0015, 0.00021"}},
		{"no baseline", &report.Report{Builds: []report.Build{{Name: "fix", Cycles: 3}}}, nil, nil},
		{"control: no verdict, what it excludes", control,
			[]string{"verdict: no evidence either way (p = 1): 0 of 3 against 0 of 3 stranding episodes (Fisher's exact, one-sided); what it excludes: fix's rate above 0.561 and stock's above 0.561 per cycle (95% upper bounds)"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Verdicts(tc.r)
			if len(tc.console) == 0 && got != "" {
				t.Errorf("console %q, want nothing", got)
			}
			for _, w := range tc.console {
				if !strings.Contains(got, w) {
					t.Errorf("console %q does not say %q", got, w)
				}
			}
			md := CompareMarkdown(tc.r)
			for _, w := range tc.compare {
				if !strings.Contains(md, w) {
					t.Errorf("compare.md does not say %q:\n%s", w, md)
				}
			}
			if tc.r.Sequential == nil && strings.Contains(md, "Until a verdict") {
				t.Error("compare.md of a fixed-cycles run has an \"Until a verdict\" section")
			}
		})
	}
}

// A build whose every cycle stranded has no latency to Running: "–", not 0.
func TestNoMedianWithoutRunningCycles(t *testing.T) {
	r := &report.Report{Scenario: "seed-122413", Complete: true, Builds: []report.Build{
		{Name: "stock", Cycles: 3, Stranded: 3, StrandedEpisodes: 3}, {Name: "fix", Cycles: 3, CreatedToRunningMS: report.Percentiles{P50: 1800, P99: 2500}}}}
	table := Table(r)
	if !strings.Contains(table, "| – / – |") || !strings.Contains(table, "| 1800 / 2500 |") {
		t.Errorf("table:\n%s\nwant stock's to-running \"– / –\" and fix's 1800 / 2500", table)
	}
	md := CompareMarkdown(r)
	if !strings.Contains(md, "| created-to-running p50 (ms) | – | 1800 |") {
		t.Errorf("compare.md:\n%s\nwant stock's created-to-running \"–\"", md)
	}
}
