package main

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/report/render"
	"github.com/strandlab/strandlab/internal/usage"
)

// benchReport is a profile's report as a run writes it: stock, with the
// figures of the local provider or, without usage, of one that has none.
func benchReport(scenario string, withUsage bool, complete bool) *report.Report {
	b := report.Build{Name: "stock", Cycles: 500, Stranded: 1, CyclesPerSecond: 8}
	if withUsage {
		report.AddUsage(&b, map[string]float64{"etcd": 10, "kube-apiserver": 40, usage.Harness: 25, "kubelet-sim": 25},
			map[string]usage.Peak{"etcd": {SumMiB: 90, MaxProcessMiB: 90, Processes: 1}, "kubelet-sim": {SumMiB: 320, MaxProcessMiB: 45, Processes: 8}})
		report.AddRequestsByClient(&b, map[string]float64{"kube-controller-manager": 5000, "harness": 1000})
		b.Proxy.WatchLag = map[string]report.WatchLag{"pods": {Events: 400, P50MS: 0.5, P99MS: 3},
			"nodes": {Events: 900, P50MS: 0.4, P99MS: 12}, "leases": {Events: 30, P50MS: 0.3, P99MS: 1}}
	}
	return &report.Report{Scenario: scenario, ClusterStartSeconds: 9.5, Complete: complete, Builds: []report.Build{b}}
}

func TestProfileOf(t *testing.T) {
	p := profileOf("scenarios/soak.yaml", "reports/x/report.json", benchReport("soak", true, true))
	// 100 CPU seconds over 500 cycles at 8 cycles/s: 0.2 s per cycle, 1.6 cores.
	if p.Name != "soak" || p.Cycles != 500 || p.Stranded != 1 || !p.Complete || math.Abs(p.CPUSecondsTotalPerCycle-0.2) > 1e-12 ||
		math.Abs(p.CoresBusy-1.6) > 1e-12 || math.Abs(p.HarnessCPUShare-0.25) > 1e-12 || math.Abs(p.StandInsCPUShare-0.5) > 1e-12 || p.APIRequestsPerCycleByClient["harness"] != 2 {
		t.Errorf("profile %+v", p)
	}
	if p := profileOf("f.yaml", "r", &report.Report{Scenario: "empty"}); p.Cycles != 0 || p.CPUSecondsPerCycle != nil {
		t.Errorf("a report without builds: %+v", p)
	}
}

func TestBenchTable(t *testing.T) {
	tests := []struct {
		name     string
		profiles []Profile
		want     []string
		notWant  []string
	}{
		{
			name: "two profiles with every figure",
			profiles: []Profile{profileOf("c.yaml", "r1", benchReport("soak-control", true, true)),
				profileOf("s.yaml", "r2", benchReport("soak", true, false))},
			want: []string{
				"| | soak-control | soak |\n|---|---:|---:|\n",
				"| cycles (stranded) | 500 (1) | 500 (1), partial |",
				"| cycles/s | 8.00 | 8.00 |",
				"| **CPU s/cycle, all** | 0.2000 | 0.2000 |",
				"| cores busy | 1.60 | 1.60 |",
				"| harness share of the CPU | 25.0% | 25.0% |",
				"| strandlab's programs' share (harness, kubelet-sim, apiproxy, pin-extender, csi-driver) | 50.0% | 50.0% |",
				"| CPU s/cycle: etcd | 0.0200 | 0.0200 |\n| CPU s/cycle: harness | 0.0500 | 0.0500 |\n| CPU s/cycle: kube-apiserver | 0.0800 | 0.0800 |\n| CPU s/cycle: kubelet-sim | 0.0500 | 0.0500 |\n",
				"| peak MiB: etcd | 90 | 90 |\n| peak MiB: kubelet-sim | 320 (8 × ≤ 45) | 320 (8 × ≤ 45) |\n",
				"| **requests/cycle, all** | 12.0 | 12.0 |",
				"| requests/cycle: harness | 2.0 | 2.0 |\n| requests/cycle: kube-controller-manager | 10.0 | 10.0 |\n",
				"| watch lag at the proxy, p50 / p99 (ms): nodes | 0.4 / 12.0 | 0.4 / 12.0 |\n| watch lag at the proxy, p50 / p99 (ms): pods | 0.5 / 3.0 | 0.5 / 3.0 |",
			},
			notWant: []string{"leases"},
		},
		{
			name: "a profile without the figures",
			profiles: []Profile{profileOf("c.yaml", "r1", benchReport("soak-control", false, true)),
				profileOf("s.yaml", "r2", benchReport("soak", true, true))},
			want: []string{
				"| **CPU s/cycle, all** | – | 0.2000 |",
				"| harness share of the CPU | – | 25.0% |",
				"| CPU s/cycle: etcd | – | 0.0200 |",
				"| peak MiB: etcd | – | 90 |",
				"| requests/cycle: harness | – | 2.0 |",
				"| watch lag at the proxy, p50 / p99 (ms): nodes | – | 0.4 / 12.0 |",
			},
			notWant: []string{"partial"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BenchTable(Bench{Profiles: tt.profiles})
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("table lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(got, w) {
					t.Errorf("table has %q:\n%s", w, got)
				}
			}
		})
	}
}

func TestWriteBench(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bench", "20261201-120000-bench")
	b := Bench{RunID: "20261201-120000-bench", Command: "strandlab bench --cycles 500", Commit: "efae87b00000", Provider: "kind", Machine: Machine{CPUs: 2, OS: "linux", Arch: "amd64"},
		Cycles: 500, Profiles: []Profile{profileOf("scenarios/soak.yaml", "reports/x/report.json", benchReport("soak", true, true))}}
	path, err := writeBench(b, dir)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "bench.json") {
		t.Errorf("path %s", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back Bench
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Commit != b.Commit || len(back.Profiles) != 1 || back.Profiles[0].CPUSecondsPerCycle["etcd"] != 0.02 ||
		back.Profiles[0].MemoryPeakMiB["kubelet-sim"].Processes != 8 {
		t.Errorf("bench.json read back: %+v", back)
	}
	md, err := os.ReadFile(filepath.Join(dir, "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"- command: `strandlab bench --cycles 500`", "- commit: efae87b00000", "- provider: kind", "- machine: 2 CPUs, linux/amd64", "| cores busy | 1.60 |"} {
		if !strings.Contains(string(md), w) {
			t.Errorf("bench.md lacks %q:\n%s", w, md)
		}
	}
}

// TestBenchReports: --reports tables reports already written, a column per
// report and build, runs nothing, and refuses the run's flags and a report
// with no build before writing anything.
func TestBenchReports(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	kindRun := benchReport("mirror-safety", true, true)
	kindRun.Provider = "kind"
	fix := kindRun.Builds[0]
	fix.Name, fix.CyclesPerSecond = "fix", 0.06
	kindRun.Builds = append(kindRun.Builds, fix)
	localRun := benchReport("control", true, true)
	localRun.Provider = "local"
	empty := &report.Report{Scenario: "control", Provider: "kind", Interrupted: true}
	for name, r := range map[string]*report.Report{"kind": kindRun, "local": localRun, "empty": empty} {
		if err := render.Write(r, filepath.Join(in, name), ""); err != nil {
			t.Fatal(err)
		}
	}
	var stdout strings.Builder
	if err := benchReports([]string{filepath.Join(in, "kind"), filepath.Join(in, "local", "report.json")}, benchOptions{output: out, command: "strandlab bench --reports ..."}, &stdout); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	md, err := os.ReadFile(filepath.Join(filepath.Dir(lines[len(lines)-1]), "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"- provider: kind, local", "| | mirror-safety (stock, kind) | mirror-safety (fix, kind) | control (stock, local) |",
		"| cycles/s | 8.00 | 0.06 | 8.00 |", "- machine: the reports'"} {
		if !strings.Contains(string(md), w) {
			t.Errorf("bench.md lacks %q:\n%s", w, md)
		}
	}
	before, _ := os.ReadDir(filepath.Join(out, "bench"))
	if err := benchReports([]string{filepath.Join(in, "kind"), filepath.Join(in, "empty")}, benchOptions{output: out}, io.Discard); err == nil || !strings.Contains(err.Error(), "has no build") {
		t.Errorf("a report without builds: error %v", err)
	}
	if after, _ := os.ReadDir(filepath.Join(out, "bench")); len(after) != len(before) {
		t.Errorf("a refused --reports wrote %d bench directories, want none", len(after)-len(before))
	}
}

// TestBenchFlags: a bad --cycles, --provider, --time-to-verdict or
// --verdict-scenario is refused, naming the flag or file, before anything
// runs.
func TestBenchFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--cycles", "0"}, "--cycles: 0"},
		{[]string{"--provider", "existing"}, `--provider: "existing", want one of local, kind`},
		{[]string{"--provider", "kindd"}, `--provider: "kindd"`},
		{[]string{"--time-to-verdict", "-1"}, "--time-to-verdict: -1"},
		{[]string{"--time-to-verdict", "3", "--verdict-scenario", ""}, "--verdict-scenario: empty"},
		{[]string{"--scenario", ""}, "--scenario: empty, and no --time-to-verdict"},
		// A profile is refused before any cluster starts, cost profiles
		// or not.
		{[]string{"--scenario", "", "--time-to-verdict", "1", "--verdict-scenario", "scenarios/no-such.yaml"}, "no-such.yaml"},
		{[]string{"--reports", "r1", "--cycles", "5"}, "--cycles: does not apply to --reports"},
		{[]string{"--reports", "r1", "--provider", "kind"}, "--provider: does not apply to --reports"},
		{[]string{"--reports", "no-such-report"}, "--reports: "},
	} {
		cmd := benchCommand()
		cmd.SetArgs(tc.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("bench %v: error %v, want it to contain %q", tc.args, err, tc.wantErr)
		}
	}
}

// TestVerdictTime: the medians are over the complete runs; a run counts as
// reaching the verdict only when fix strands less at p <= alpha; the table
// shows each run.
func TestVerdictTime(t *testing.T) {
	v := VerdictTime{Name: "seed-122413", Scenario: "scenarios/seed-122413.yaml", Alpha: 0.001, Runs: []VerdictRun{
		{Seed: 1, Complete: true, Outcome: "less", PValue: 0.0008, Rounds: 3, CyclesByBuild: 15, WallMinutes: 6, CPUMinutes: 9},
		{Seed: 1001, Complete: true, Outcome: "less", PValue: 0.0004, Rounds: 5, CyclesByBuild: 25, WallMinutes: 10, CPUMinutes: 15},
		{Seed: 2001, Complete: true, Outcome: "continue", PValue: 0.2, Rounds: 50, CyclesByBuild: 250, WallMinutes: 90, CPUMinutes: 120},
		{Seed: 3001, Complete: false, Outcome: "continue", PValue: 0.5, Rounds: 1, CyclesByBuild: 5, WallMinutes: 1, CPUMinutes: 1},
	}}
	v.summarise()
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"reached: less at p <= alpha", v.Reached, 2},
		{"median wall minutes over the complete runs", v.MedianWallMinutes, 10.0},
		{"median CPU minutes", v.MedianCPUMinutes, 15.0},
		{"median cycles a build", v.MedianCyclesByBuild, 25.0},
		{"median of an even count", median([]float64{4, 1, 3, 2}), 2.5},
		{"median of none", median(nil), 0.0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	table := VerdictTable(Bench{TimeToVerdict: []VerdictTime{v}})
	for _, w := range []string{
		"| seed-122413 | 2 of 4 (α = 0.001) | 10.0 | 15.0 | 25 |",
		"less, p = 0.0008, 3, 6.0; less, p = 0.0004, 5, 10.0; continue, p = 0.2, 50, 90.0; continue, partial, p = 0.5, 1, 1.0 |",
	} {
		if !strings.Contains(table, w) {
			t.Errorf("table lacks %q:\n%s", w, table)
		}
	}
	if VerdictTable(Bench{}) != "" || verdictSection(Bench{}) != "" {
		t.Error("a bench without verdicts has a verdict table")
	}
}

// TestBenchVerdictDefaults: --time-to-verdict measures the seed, node-delay
// and the soak unless told otherwise, and those files exist.
func TestBenchVerdictDefaults(t *testing.T) {
	f := benchCommand().Flags().Lookup("verdict-scenario")
	if f == nil || f.DefValue != "[scenarios/seed-122413.yaml,scenarios/node-delay.yaml,scenarios/soak.yaml]" {
		t.Fatalf("--verdict-scenario's default: %+v", f)
	}
	for _, path := range defaultVerdictScenarios {
		if _, err := os.Stat(filepath.Join("..", "..", path)); err != nil {
			t.Errorf("default verdict profile: %v", err)
		}
	}
}
