package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/report/render"
)

func TestPlan(t *testing.T) {
	dir := t.TempDir()
	withStock := &report.Report{Scenario: "soak", Complete: true, Components: map[string]provenance.Component{}, Builds: []report.Build{
		{Name: "stock", Cycles: 1000, Stranded: 1, StrandedRate: 0.001}, {Name: "fix", Cycles: 1000}}}
	if err := render.Write(withStock, filepath.Join(dir, "a"), ""); err != nil {
		t.Fatal(err)
	}
	// 20 stranded cycles in 5 episodes out of 5,000: the rate of episodes
	// is 5 per 4,985 cycles that could begin one (docs/statistics.md).
	episodes := &report.Report{Scenario: "soak", Complete: true, Components: map[string]provenance.Component{}, Builds: []report.Build{
		{Name: "stock", Cycles: 5000, Stranded: 20, StrandedEpisodes: 5, StrandedRate: 0.004}}}
	if err := render.Write(episodes, filepath.Join(dir, "c"), ""); err != nil {
		t.Fatal(err)
	}
	noStrandings := &report.Report{Scenario: "soak", Complete: true, Components: map[string]provenance.Component{}, Builds: []report.Build{{Name: "stock", Cycles: 10}}}
	if err := render.Write(noStrandings, filepath.Join(dir, "b"), ""); err != nil {
		t.Fatal(err)
	}
	// Stock's 8 episodes in 4 rounds of 10 cycles, all in the first: its
	// rounds' design effect (Clustered95) is well above 1.
	clustered := &report.Report{Scenario: "soak", Complete: true, Components: map[string]provenance.Component{}, Builds: []report.Build{
		{Name: "stock", Cycles: 40, Stranded: 8, StrandedEpisodes: 8, StrandedRate: 0.2,
			Rounds: []report.Round{{Cycles: 10, Stranded: 8, Episodes: 8}, {Cycles: 10}, {Cycles: 10}, {Cycles: 10}}}}}
	if err := render.Write(clustered, filepath.Join(dir, "d"), ""); err != nil {
		t.Fatal(err)
	}
	soak := "../../scenarios/soak.yaml" // churn.cycles: 5000
	tests := []struct {
		name string
		o    planOptions
		want string // substring of the output, or of the error when wantErr
		err  bool
	}{
		// 0.001 -> 0 needs 9,074 cycles per build (internal/stats power_test).
		{"rate given", planOptions{scenario: soak, baselineRate: 0.001}, "9074 cycles per build\n../../scenarios/soak.yaml: churn.cycles = 5000 per build: NOT enough", false},
		{"rate from a report", planOptions{scenario: soak, fromReport: filepath.Join(dir, "a", "report.json")}, "baseline rate 0.001,", false},
		{"a rate of 0.01 needs 906", planOptions{scenario: soak, baselineRate: 0.01}, "906 cycles per build\n../../scenarios/soak.yaml: churn.cycles = 5000 per build: enough", false},
		{"episodes, not cycles, from a report", planOptions{scenario: soak, fromReport: filepath.Join(dir, "c", "report.json")}, "baseline rate 0.00100301,", false},
		{"independent cycles: 2 runs", planOptions{scenario: soak, baselineRate: 0.001},
			"design effect 1.00 (none given: cycles taken as independent): 9074 cycles per build, 2 runs of 5000 cycles", false},
		{"a design effect given", planOptions{scenario: soak, baselineRate: 0.001, designEffect: 2.5},
			"design effect 2.50 (--design-effect): 22685 cycles per build, 5 runs of 5000 cycles", false},
		{"the design effect of a report's rounds", planOptions{scenario: soak, fromReport: filepath.Join(dir, "d", "report.json")},
			"(stock's rounds in --from-report)", false},
		{"a design effect below 1", planOptions{scenario: soak, baselineRate: 0.001, designEffect: 0.5}, "--design-effect: 0.5 is not at least 1", true},
		{"no rate", planOptions{scenario: soak}, "--baseline-rate or --from-report is required", true},
		{"both", planOptions{scenario: soak, baselineRate: 0.1, fromReport: "x"}, "give one", true},
		{"stock never stranded", planOptions{scenario: soak, fromReport: filepath.Join(dir, "b", "report.json")}, "stock stranded 0 times", true},
		{"build rate above the baseline", planOptions{scenario: soak, baselineRate: 0.001, buildRate: 0.01}, "build rate must be in", true},
		{"bad scenario", planOptions{scenario: filepath.Join(dir, "none.yaml"), baselineRate: 0.001}, "none.yaml", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.o.alpha == 0 {
				tc.o.alpha, tc.o.power = 0.01, 0.8
			}
			var out bytes.Buffer
			err := plan(tc.o, &out)
			got := out.String()
			if err != nil {
				got = err.Error()
			}
			if (err != nil) != tc.err || !strings.Contains(got, tc.want) {
				t.Errorf("plan = %q (err %v), want %q", got, err, tc.want)
			}
		})
	}
}
