package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/report"
)

// writeRunReport writes a run's report directory with report.Write, as a
// run does, and returns it.
func writeRunReport(t *testing.T, runID, scenario string, seed int64, complete bool, stockStranded int) string {
	t.Helper()
	build := func(name string, prov provenance.ControllerBuild, stranded int) report.Build {
		b := report.Build{Name: name, Provenance: prov, Cycles: 1000, Stranded: stranded, CyclesPerSecond: 10,
			StrandedRate: float64(stranded) / 1000, APIRequestsPerCycle: map[string]float64{}, Strandings: []report.Stranding{}}
		for i := range stranded {
			b.Strandings = append(b.Strandings, report.Stranding{Cycle: 100 * (i + 1), Pod: "ns/web-0"})
		}
		return b
	}
	r := &report.Report{RunID: runID, Scenario: scenario, Provider: "local", Seed: seed, KubernetesVersion: "v1.37.2",
		Components: map[string]provenance.Component{"etcd": {Version: "3.7.0"}}, Complete: complete,
		Builds: []report.Build{
			build("stock", provenance.ControllerBuild{Module: "k8s.io/kubernetes@v1.37.2"}, stockStranded),
			build("fix", provenance.ControllerBuild{Module: "k8s.io/kubernetes@v1.37.2", Patch: "fix", PatchSHA256: "b24f"}, 0),
		}}
	dir := filepath.Join(t.TempDir(), "reports", runID)
	if err := report.Write(r, dir, ""); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestMergeCommand(t *testing.T) {
	a := writeRunReport(t, "20261130-061347-seed-122413", "seed-122413", 7, true, 2)
	b := writeRunReport(t, "20261130-061721-seed-122413", "seed-122413", 3, true, 1)
	control := writeRunReport(t, "20261130-062000-control", "control", 3, true, 0)
	partial := writeRunReport(t, "20261130-062100-seed-122413", "seed-122413", 5, false, 1)
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)

	tests := []struct {
		name         string
		args         []string
		allowPartial bool
		wantErr      string // substring; "" means the merge succeeds
		wantStranded [2]int // stock, fix
		wantCycles   int    // per build
	}{
		{name: "two runs pooled", args: []string{a, filepath.Join(b, "report.json")}, wantStranded: [2]int{3, 0}, wantCycles: 2000},
		{name: "different scenario refused", args: []string{a, control},
			wantErr: `scenario differs: "seed-122413" in ` + filepath.Join(a, "report.json") + `, "control" in ` + filepath.Join(control, "report.json")},
		{name: "partial report refused", args: []string{a, partial}, wantErr: "is a partial report"},
		{name: "partial report pooled with --allow-partial", args: []string{a, b, partial}, allowPartial: true,
			wantStranded: [2]int{4, 0}, wantCycles: 3000},
		{name: "missing report", args: []string{a, filepath.Join(t.TempDir(), "nope")}, wantErr: "nope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			output := filepath.Join(t.TempDir(), "_output")
			var stdout, stderr bytes.Buffer
			path, err := mergeReports(tc.args, output, tc.allowPartial, now, &stdout, &stderr)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if exitCode(err) != 1 {
					t.Errorf("exit %d, want 1", exitCode(err))
				}
				if _, serr := os.Stat(output); !os.IsNotExist(serr) {
					t.Errorf("refused merge left %s behind (stat: %v)", output, serr)
				}
				if stdout.Len() != 0 {
					t.Errorf("refused merge printed %q", stdout.String())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(output, "reports", "20261130-070000-merge-seed-122413", "report.json")
			lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
			if path != want || lines[len(lines)-1] != want {
				t.Errorf("printed %q (returned %s), want the last line %s", stdout.String(), path, want)
			}
			for _, f := range []string{"report.md", report.CompareMarkdownFile, report.ComparePlotFile} {
				if _, err := os.Stat(filepath.Join(filepath.Dir(want), f)); err != nil {
					t.Errorf("merged %s: %v", f, err)
				}
			}
			for _, p := range []string{want, filepath.Join(output, "reports", "latest", "report.json")} {
				m, err := report.Read(p)
				if err != nil {
					t.Fatal(err)
				}
				got := [2]int{m.Builds[0].Stranded, m.Builds[1].Stranded}
				if got != tc.wantStranded || m.Builds[0].Cycles != tc.wantCycles || m.Builds[1].Cycles != tc.wantCycles {
					t.Errorf("%s: stranded %v in %d/%d cycles, want %v in %d", p, got, m.Builds[0].Cycles, m.Builds[1].Cycles, tc.wantStranded, tc.wantCycles)
				}
				if len(m.Builds[0].Strandings) != tc.wantStranded[0] || m.Builds[1].VersusBaseline == nil {
					t.Errorf("%s: %d strandings, versus_baseline %v", p, len(m.Builds[0].Strandings), m.Builds[1].VersusBaseline)
				}
			}
		})
	}
}
