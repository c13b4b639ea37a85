package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/scenario"
)

// writeReport writes r as a run would write report.json and returns its path.
func writeReport(t *testing.T, r report.Report) string {
	t.Helper()
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckReports(t *testing.T) {
	unmet := writeReport(t, report.Report{Scenario: "seed-122413", Builds: []report.Build{
		{Name: "stock", Expectation: &report.Expectation{Met: false, Unmet: []string{"stranded 0 < 1"}}},
		{Name: "fix", Expectation: &report.Expectation{Met: true}},
	}})
	met := writeReport(t, report.Report{Scenario: "control", Builds: []report.Build{
		{Name: "stock", Expectation: &report.Expectation{Met: true}},
	}})
	missing := filepath.Join(t.TempDir(), "report.json")
	corrupt := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(corrupt, []byte(`{"scenario": "seed-122413", "builds": [`), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		reports   []string
		check     bool
		wantCode  int
		wantErr   string // substring of the error; "" means none
		wantPrint string // substring of what is printed; "" means nothing
	}{
		{name: "unmet expectation with --check: exit 3", reports: []string{met, unmet}, check: true, wantCode: exitUnmet,
			wantErr: "1 expectation(s) not met", wantPrint: "expectation not met: seed-122413/stock: stranded 0 < 1"},
		{name: "unmet expectation without --check: printed, exit 0", reports: []string{unmet},
			wantPrint: "expectation not met: seed-122413/stock: stranded 0 < 1"},
		{name: "all met: exit 0", reports: []string{met}, check: true},
		{name: "missing report.json: harness failure naming it", reports: []string{met, missing}, check: true, wantCode: 1, wantErr: missing},
		{name: "corrupt report.json: harness failure naming it", reports: []string{corrupt}, check: true, wantCode: 1, wantErr: corrupt},
		{name: "unreadable report without --check is a failure too", reports: []string{corrupt}, wantCode: 1, wantErr: corrupt},
		{name: "an unreadable report outweighs an unmet expectation", reports: []string{unmet, missing}, check: true, wantCode: 1, wantErr: missing,
			wantPrint: "seed-122413/stock"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := checkReports(tc.reports, tc.check, &out)
			if got := exitCode(err); got != tc.wantCode {
				t.Errorf("exit %d, want %d (error %v)", got, tc.wantCode, err)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want it to contain %q", err, tc.wantErr)
			}
			if tc.wantPrint == "" && out.Len() != 0 || !strings.Contains(out.String(), tc.wantPrint) {
				t.Errorf("printed %q, want %q", out.String(), tc.wantPrint)
			}
		})
	}
}

func TestExistingFlags(t *testing.T) {
	e := existingFlags{}
	if p := e.provider("/env/config", nil); p.Kubeconfig != "/env/config" || p.Consent {
		t.Errorf("from KUBECONFIG: %+v", p)
	}
	e = existingFlags{kubeconfig: "/flag/config", consent: true}
	if p := e.provider("/env/config", nil); p.Kubeconfig != "/flag/config" || !p.Consent {
		t.Errorf("the flag must win: %+v", p)
	}
}

// Without --cluster-owner-consent, `run --provider existing` fails before
// anything is touched or written, saying what the flag means.
func TestRunExistingWithoutConsent(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	cmd := runCommand()
	cmd.SetArgs([]string{"--scenario", "../../scenarios/existing-control.yaml", "--kubeconfig", "/nonexistent/kubeconfig", "--output", out})
	cmd.SetContext(context.Background())
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), `provider "existing" is not available here: --cluster-owner-consent not given: the existing provider creates a namespace`) {
		t.Fatalf("run = %v", err)
	}
	if _, serr := os.Stat(out); !os.IsNotExist(serr) {
		t.Errorf("the output directory was created: %v", serr)
	}
}

// A run until a verdict with a bad design or builds fails before anything
// is started or written, naming the flag.
func TestRunUntilVerdictRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		// control has no untilVerdict; seed-122413 has one, which --cycles
		// and --until-verdict=false turn off.
		{[]string{"--scenario", "../../scenarios/control.yaml", "--verdict-alpha", "0.01"}, "--verdict-alpha: only with --until-verdict, or a scenario with untilVerdict"},
		{[]string{"--cycles", "3", "--max-cycles", "100"}, "--max-cycles: only with --until-verdict"},
		{[]string{"--until-verdict=false", "--verdict-margin", "0.01"}, "--verdict-margin: only with --until-verdict"},
		{[]string{"--verdict-alpha", "2"}, "seed-122413 (untilVerdict): --verdict-alpha: 2 is not in (0, 1)"},
		{[]string{"--max-cycles", "-1"}, "seed-122413 (untilVerdict): --max-cycles: -1 is negative"},
		{[]string{"--until-verdict", "--verdict-alpha", "2"}, "--verdict-alpha: 2 is not in (0, 1)"},
		{[]string{"--until-verdict", "--verdict-margin", "0"}, "--verdict-margin: 0 is not a rate in (0, 1)"},
		{[]string{"--until-verdict", "--max-cycles", "-1"}, "--max-cycles: -1 is negative"},
		{[]string{"--until-verdict", "--builds", "fix"}, "need stock, the build the others are tested against"},
		{[]string{"--until-verdict", "--builds", "stock"}, "need one to test against stock"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			cmd := runCommand()
			args := append([]string{"--output", out}, tc.args...)
			if !slices.Contains(tc.args, "--scenario") {
				args = append(args, "--scenario", "../../scenarios/seed-122413.yaml")
			}
			cmd.SetArgs(args)
			cmd.SetContext(context.Background())
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run %v = %v, want an error containing %q", tc.args, err, tc.want)
			}
			if _, serr := os.Stat(out); !os.IsNotExist(serr) {
				t.Errorf("the output directory was created: %v", serr)
			}
		})
	}
}

// TestRunDesigns: which scenarios of a run go until a verdict. make e2e's
// main job (seed-122413 with untilVerdict, control without) runs the seed
// in rounds and control once; --until-verdict runs both in rounds;
// --cycles or --until-verdict=false runs both once; a verdict flag given
// sets what the scenario leaves.
func TestRunDesigns(t *testing.T) {
	seed := &scenario.Scenario{Name: "seed-122413", Builds: []string{"stock", "fix"}, UntilVerdict: &scenario.UntilVerdict{Alpha: 0.01}}
	control := &scenario.Scenario{Name: "control", Builds: []string{"stock", "fix"}}
	flagDesign := report.SequentialDesign{Alpha: 0.05, Margin: 0.02, MaxCycles: 30}
	def := report.DefaultSequentialDesign()
	for _, tc := range []struct {
		name     string
		given    []string
		explicit *report.SequentialDesign
		want     []*report.SequentialDesign // seed's, control's
	}{
		{"the main job", nil, nil, []*report.SequentialDesign{{Alpha: 0.01, Margin: def.Margin}, nil}},
		{"--until-verdict", []string{"until-verdict"}, &flagDesign, []*report.SequentialDesign{&flagDesign, &flagDesign}},
		{"--until-verdict=false", []string{"until-verdict"}, nil, []*report.SequentialDesign{nil, nil}},
		{"--cycles", []string{"cycles"}, nil, []*report.SequentialDesign{nil, nil}},
		{"--verdict-margin and --max-cycles over the scenario's", []string{"verdict-margin", "max-cycles"}, nil,
			[]*report.SequentialDesign{{Alpha: 0.01, Margin: 0.02, MaxCycles: 30}, nil}},
		{"--verdict-alpha over the scenario's", []string{"verdict-alpha"}, nil, []*report.SequentialDesign{{Alpha: 0.05, Margin: def.Margin}, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := func(flag string) bool { return slices.Contains(tc.given, flag) }
			got, err := runDesigns(changed, []*scenario.Scenario{seed, control}, tc.explicit, flagDesign)
			if err != nil {
				t.Fatal(err)
			}
			for i, name := range []string{"seed-122413", "control"} {
				switch g, w := got[i], tc.want[i]; {
				case (g == nil) != (w == nil):
					t.Errorf("%s: %+v, want %+v", name, g, w)
				case g != nil && *g != *w:
					t.Errorf("%s: %+v, want %+v", name, *g, *w)
				}
			}
		})
	}
}
