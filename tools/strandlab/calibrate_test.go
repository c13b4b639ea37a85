package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/report/render"
)

func TestParseSeeds(t *testing.T) {
	tests := []struct {
		in      string
		want    []int64
		wantErr string
	}{
		{"", nil, ""},
		{"7", []int64{7}, ""},
		{"1-5", []int64{1, 2, 3, 4, 5}, ""},
		{"1-3,7, 2", []int64{1, 2, 3, 7}, ""},
		{"5-1", nil, `"5-1" is not a range`},
		{"one", nil, `"one" is not a seed`},
		{"1,,2", nil, `"" is not a seed`},
		{"1-2000", nil, "more than 1000 seeds"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseSeeds(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "--seeds: ") {
					t.Fatalf("err %v, want --seeds: ...%s", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// calibrationReport writes a report of a run of seed-122413 on provider
// whose stock build stranded its first cycle (or not) and detached the
// volume after toDetach.
func calibrationReport(t *testing.T, dir, provider string, seed int64, stranded bool, toDetach time.Duration) string {
	t.Helper()
	c := cycle.Cycle{Index: 0, Outcome: cycle.Running, DeleteToDetach: toDetach, DeleteToRunning: 9 * time.Second}
	if stranded {
		c.Outcome = cycle.Stranded
	}
	b := report.BuildFromCycles("stock", report.Build{}.Provenance, cycle.Result{Cycles: []cycle.Cycle{c}, Elapsed: 10 * time.Second}, nil)
	r := &report.Report{RunID: provider + "-" + string(rune('0'+seed)), Scenario: "seed-122413", Provider: provider, Seed: seed, Complete: true,
		Builds: []report.Build{b}}
	d := filepath.Join(dir, r.RunID)
	if err := render.Write(r, d, ""); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCalibrateTablesWrittenReports(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	var reports []string
	for seed := int64(1); seed <= 3; seed++ {
		reports = append(reports, calibrationReport(t, in, "local", seed, true, 1100*time.Millisecond),
			filepath.Join(calibrationReport(t, in, "kind", seed, seed != 2, 4700*time.Millisecond), "report.json"))
	}
	// A run interrupted while its cluster started measured nothing: not a run of the table.
	empty := filepath.Join(in, "interrupted")
	if err := render.Write(&report.Report{RunID: "interrupted", Scenario: "seed-122413", Provider: "local", Seed: 4, Interrupted: true}, empty, ""); err != nil {
		t.Fatal(err)
	}
	reports = append(reports, empty)
	var stdout, stderr strings.Builder
	err := calibrate(context.Background(), calibrateOptions{providers: [2]string{"local", "kind"}, reports: reports, output: out,
		command: "strandlab calibrate --reports ..."}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	path := lines[len(lines)-1]
	if !strings.HasPrefix(path, filepath.Join(out, "calibration")) || filepath.Base(path) != "calibration.md" {
		t.Fatalf("last line %q, want calibration.md under %s", path, out)
	}
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| seed-122413 | stock | first cycle stranded | 3 / 3 runs", "2 / 3 runs",
		"| seed-122413 | stock | delete → detach | 1100 / 1100 (3) | 4700 / 4700 (3) | -3600 | 1.00 |",
		"| seed-122413 | kind | 3 | 1–3 | stock 3 | 0 |",
		"| seed-122413 | local | 3 | 1–3 | stock 3 | 0 |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("calibration.md lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "calibration.json")); err != nil {
		t.Error(err)
	}
}

func TestCalibrateRefusesBeforeWriting(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	only := calibrationReport(t, in, "local", 1, true, time.Second)
	tests := []struct {
		name    string
		reports []string
		want    string
	}{
		{"no report on the reference provider", []string{only}, "no run on kind"},
		{"a file that is not a report", []string{filepath.Join(in, "missing.json")}, "--reports: read report"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			err := calibrate(context.Background(), calibrateOptions{providers: [2]string{"local", "kind"}, reports: tc.reports, output: out}, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(out); len(entries) != 0 {
				t.Errorf("wrote %v before refusing", entries)
			}
		})
	}
}
