package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/report/render"
)

// writeRunReport writes a run's report directory with report.Write, as a
// run does (1,000 cycles per build, stock and fix), and returns it.
func writeRunReport(t *testing.T, runID, scenario string, seed int64, complete bool, stock, fix counts) string {
	t.Helper()
	build := func(name string, prov provenance.ControllerBuild, c counts) report.Build {
		b := report.Build{Name: name, Provenance: prov, Cycles: 1000, Stranded: c.stranded, SafetyViolations: c.safety,
			CyclesPerSecond: 10, StrandedRate: float64(c.stranded) / 1000, APIRequestsPerCycle: map[string]float64{},
			Strandings: []report.Stranding{}}
		for i := range c.stranded {
			b.Strandings = append(b.Strandings, report.Stranding{Cycle: 100 * (i + 1), Pod: "ns/web-0"})
		}
		return b
	}
	r := &report.Report{RunID: runID, Scenario: scenario, Provider: "local", Seed: seed, KubernetesVersion: "v1.37.2",
		Components: map[string]provenance.Component{"etcd": {Version: "3.7.0"}}, Complete: complete,
		Builds: []report.Build{
			build("stock", provenance.ControllerBuild{Module: "k8s.io/kubernetes@v1.37.2"}, stock),
			build("fix", provenance.ControllerBuild{Module: "k8s.io/kubernetes@v1.37.2", Patch: "fix", PatchSHA256: "b24f"}, fix),
		}}
	dir := filepath.Join(t.TempDir(), "reports", runID)
	if err := render.Write(r, dir, ""); err != nil {
		t.Fatal(err)
	}
	return dir
}

// counts are one build's outcome in a run's report.
type counts struct{ stranded, safety int }

func TestMergeCommand(t *testing.T) {
	a := writeRunReport(t, "20261130-061347-seed-122413", "seed-122413", 7, true, counts{stranded: 2}, counts{})
	b := writeRunReport(t, "20261130-061721-seed-122413", "seed-122413", 3, true, counts{stranded: 1}, counts{})
	control := writeRunReport(t, "20261130-062000-control", "control", 3, true, counts{stranded: 0}, counts{})
	partial := writeRunReport(t, "20261130-062100-seed-122413", "seed-122413", 5, false, counts{stranded: 1}, counts{})
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
			path, err := mergeReports(tc.args, mergeOptions{output: output, allowPartial: tc.allowPartial, now: now}, &stdout, &stderr)
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
			for _, f := range []string{"report.md", render.CompareMarkdownFile, render.ComparePlotFile} {
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

// writeShardReport writes the complete report of one shard of scenario.
func writeShardReport(t *testing.T, runID, scenario string, seed int64, stock, fix counts) string {
	t.Helper()
	return writeRunReport(t, runID, scenario, seed, true, stock, fix)
}

// soakBands is a scenario named soak with the nightly's bands (docs/ci.md).
const soakBands = `name: soak
cluster: {nodes: 2}
workload: {statefulSets: [{name: web, replicas: 2, volumesPerPod: 1}]}
churn: {cycles: 1000}
builds: [stock, fix]
expect:
  stock: {strandedRate: {min: 0.0002, max: 0.01}}
  fix: {stranded: {max: 0}, safetyViolations: {max: 0}}
`

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// merge --check holds the pool (not each shard) to the scenario's bands.
func TestMergeCheck(t *testing.T) {
	soak := writeFile(t, "soak.yaml", soakBands)
	// A scenario file without a name is named after the file, as a run names it.
	unnamed := writeFile(t, "soak.yaml", strings.TrimPrefix(soakBands, "name: soak\n"))
	other := writeFile(t, "control.yaml", strings.Replace(soakBands, "name: soak", "name: control", 1))
	seedBands := writeFile(t, "soak.yaml", strings.Replace(soakBands, "stock: {strandedRate: {min: 0.0002, max: 0.01}}", "stock: {firstCycle: stranded, stranded: {min: 1}}", 1))
	shard := func(i int, stock, fix counts) string {
		return writeShardReport(t, fmt.Sprintf("20261130-0600%02d-soak-shard-%d", i, i), "soak", int64(i), stock, fix)
	}
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)

	tests := []struct {
		name      string
		args      []string
		scenario  string
		check     bool
		wantCode  int
		wantErr   string // substring of the error
		wantUnmet []string
		// wantExpect: stock's and fix's expectation.met in the merged
		// report; nil when nothing is written or checked.
		wantExpect *[2]bool
		wantPrint  string // substring of stderr
	}{
		{name: "stock inside its band, fix clean", scenario: soak, check: true,
			args:       []string{shard(0, counts{2, 0}, counts{}), shard(1, counts{1, 0}, counts{})},
			wantExpect: &[2]bool{true, true}},
		{name: "a shard alone outside the band, the pool inside it", scenario: soak, check: true,
			args:       []string{shard(0, counts{0, 0}, counts{}), shard(1, counts{4, 0}, counts{})},
			wantExpect: &[2]bool{true, true}},
		{name: "stock never strands: the reproduction is lost", scenario: soak, check: true,
			args:     []string{shard(0, counts{}, counts{}), shard(1, counts{}, counts{})},
			wantCode: exitUnmet, wantErr: "1 expectation(s) not met",
			wantUnmet: []string{"soak/stock: strandedRate = 0 (0/2000), expected at least 0.0002"}, wantExpect: &[2]bool{false, true}},
		{name: "stock above the band", scenario: soak, check: true,
			args:      []string{shard(0, counts{20, 0}, counts{}), shard(1, counts{15, 0}, counts{})},
			wantCode:  exitUnmet,
			wantUnmet: []string{"soak/stock: strandedRate = 0.0175 (35/2000), expected at most 0.01"}, wantExpect: &[2]bool{false, true}},
		{name: "fix strands", scenario: soak, check: true,
			args:      []string{shard(0, counts{2, 0}, counts{}), shard(1, counts{1, 0}, counts{1, 0})},
			wantCode:  exitUnmet,
			wantUnmet: []string{"soak/fix: stranded = 1, expected at most 0"}, wantExpect: &[2]bool{true, false}},
		{name: "fix has a safety violation", scenario: soak, check: true,
			args:      []string{shard(0, counts{2, 0}, counts{0, 1}), shard(1, counts{1, 0}, counts{})},
			wantCode:  exitUnmet,
			wantUnmet: []string{"soak/fix: safetyViolations = 1, expected at most 0"}, wantExpect: &[2]bool{true, false}},
		{name: "without --check an unmet band is printed and written, exit 0", scenario: soak,
			args:      []string{shard(0, counts{2, 0}, counts{1, 0}), shard(1, counts{1, 0}, counts{})},
			wantUnmet: []string{"soak/fix: stranded = 1, expected at most 0"}, wantExpect: &[2]bool{true, false}},
		{name: "an unnamed scenario is named after its file", scenario: unnamed, check: true,
			args:       []string{shard(0, counts{2, 0}, counts{}), shard(1, counts{1, 0}, counts{})},
			wantExpect: &[2]bool{true, true}},
		{name: "firstCycle is not checked on a pool, and the user is told", scenario: seedBands, check: true,
			args:       []string{shard(0, counts{2, 0}, counts{}), shard(1, counts{1, 0}, counts{})},
			wantExpect: &[2]bool{true, true}, wantPrint: "note: soak/stock: firstCycle is a bound on one run, not checked on a pool"},
		{name: "--check without --scenario", check: true,
			args:     []string{shard(0, counts{2, 0}, counts{}), shard(1, counts{1, 0}, counts{})},
			wantCode: 1, wantErr: "--check: needs --scenario FILE"},
		{name: "a scenario of another name", scenario: other, check: true,
			args:     []string{shard(0, counts{2, 0}, counts{}), shard(1, counts{1, 0}, counts{})},
			wantCode: 1, wantErr: `--scenario: ` + other + ` is scenario "control", the reports are of "soak"`},
		{name: "a scenario file that does not load", scenario: filepath.Join(t.TempDir(), "nope.yaml"), check: true,
			args:     []string{shard(0, counts{2, 0}, counts{}), shard(1, counts{1, 0}, counts{})},
			wantCode: 1, wantErr: "--scenario: scenario:"},
		{name: "a bad band refuses the scenario", scenario: writeFile(t, "soak.yaml", soakBands+"  '*': {strandedRate: {max: 2}}\n"), check: true,
			args:     []string{shard(0, counts{2, 0}, counts{}), shard(1, counts{1, 0}, counts{})},
			wantCode: 1, wantErr: "expect.*.strandedRate.max: 2 out of range [0, 1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			output := filepath.Join(t.TempDir(), "_output")
			var stdout, stderr bytes.Buffer
			path, err := mergeReports(tc.args, mergeOptions{output: output, scenario: tc.scenario, check: tc.check, now: now}, &stdout, &stderr)
			if code := exitCode(err); code != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d", code, err, tc.wantCode)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			for _, u := range tc.wantUnmet {
				if !strings.Contains(stderr.String(), "expectation not met: "+u) {
					t.Errorf("stderr does not say %q:\n%s", u, stderr.String())
				}
			}
			if n := strings.Count(stderr.String(), "expectation not met: "); n != len(tc.wantUnmet) {
				t.Errorf("%d unmet expectations printed, want %d:\n%s", n, len(tc.wantUnmet), stderr.String())
			}
			if tc.wantPrint != "" && !strings.Contains(stderr.String(), tc.wantPrint) {
				t.Errorf("stderr does not say %q:\n%s", tc.wantPrint, stderr.String())
			}
			if tc.wantExpect == nil {
				if _, serr := os.Stat(output); tc.wantCode == 1 && !os.IsNotExist(serr) {
					t.Errorf("refused merge left %s behind (stat: %v)", output, serr)
				}
				return
			}
			// The report is written and its path printed last, met or not.
			lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
			if path == "" || lines[len(lines)-1] != path {
				t.Fatalf("printed %q, returned %q", stdout.String(), path)
			}
			m, rerr := report.Read(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			for i, b := range m.Builds {
				if b.Expectation == nil || b.Expectation.Met != tc.wantExpect[i] {
					t.Errorf("%s: expectation %+v, want met %t", b.Name, b.Expectation, tc.wantExpect[i])
				}
			}
			md, rerr := os.ReadFile(filepath.Join(filepath.Dir(path), render.CompareMarkdownFile))
			if rerr != nil {
				t.Fatal(rerr)
			}
			if want := map[bool]string{true: "expectation met", false: "expectation NOT met"}[tc.wantExpect[0]]; !strings.Contains(string(md), want) {
				t.Errorf("compare.md does not say %q", want)
			}
		})
	}
}

// merge without --scenario keeps its behaviour: no expectation in the pool.
func TestMergeWithoutScenarioDropsExpectations(t *testing.T) {
	a := writeShardReport(t, "20261130-060000-soak-shard-0", "soak", 0, counts{1, 0}, counts{})
	b := writeShardReport(t, "20261130-060000-soak-shard-1", "soak", 1, counts{1, 0}, counts{})
	var stdout, stderr bytes.Buffer
	path, err := mergeReports([]string{a, b}, mergeOptions{output: filepath.Join(t.TempDir(), "_output"), now: time.Now()}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	m, err := report.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range m.Builds {
		if b.Expectation != nil {
			t.Errorf("%s: expectation %+v without --scenario", b.Name, b.Expectation)
		}
	}
}

// A directory of report directories (a soak Job's shards' <output>/reports,
// docs/soak-job.md) is pooled without a shell glob: every report directory
// directly under it, but not latest/, the copy of the last one written.
func TestMergeDirectoryOfReports(t *testing.T) {
	shards := filepath.Join(t.TempDir(), "reports")
	for i, c := range []counts{{stranded: 2}, {stranded: 1}, {stranded: 4}} {
		runID := fmt.Sprintf("20261130-0613%02d-soak-shard-%d", i, i)
		r, err := report.Read(filepath.Join(writeRunReport(t, runID, "soak", int64(i), true, c, counts{}), "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := render.Write(r, filepath.Join(shards, runID), filepath.Join(shards, "latest")); err != nil {
			t.Fatal(err)
		}
	}
	// Neither a file nor a directory without a report is a run.
	if err := os.MkdirAll(filepath.Join(shards, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shards, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	output := filepath.Join(t.TempDir(), "_output")
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	var stdout, stderr bytes.Buffer
	path, err := mergeReports([]string{shards}, mergeOptions{output: output, now: now}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("merge %s: %v\n%s", shards, err, stderr.String())
	}
	m, err := report.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.MergedFrom) != 3 || m.Builds[0].Stranded != 7 || m.Builds[0].Cycles != 3000 {
		t.Errorf("merged from %v: stock stranded %d in %d cycles, want the 3 shards: 7 in 3000", m.MergedFrom, m.Builds[0].Stranded, m.Builds[0].Cycles)
	}
	if fmt.Sprint(m.Seeds) != "[0 1 2]" {
		t.Errorf("seeds %v, want [0 1 2]", m.Seeds)
	}

	// A directory with no report under it is refused, naming it.
	empty := t.TempDir()
	if _, err := mergeReports([]string{empty}, mergeOptions{output: output, now: now}, &stdout, &stderr); err == nil ||
		!strings.Contains(err.Error(), empty+": no report.json in it") {
		t.Errorf("merge of an empty directory: %v", err)
	}
	// One report alone is refused by the merge itself.
	one := filepath.Join(t.TempDir(), "reports")
	r, err := report.Read(filepath.Join(writeRunReport(t, "20261130-061300-soak-shard-0", "soak", 0, true, counts{}, counts{}), "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := render.Write(r, filepath.Join(one, r.RunID), filepath.Join(one, "latest")); err != nil {
		t.Fatal(err)
	}
	if _, err := mergeReports([]string{one}, mergeOptions{output: output, now: now}, &stdout, &stderr); err == nil ||
		!strings.Contains(err.Error(), "at least two are needed") {
		t.Errorf("merge of a directory of one report: %v", err)
	}
}

// TestMergeSequential: merge --sequential reads the shards as the rounds
// of a sequential comparison, in argument order, and says at which shard
// the verdict was reached; a bad design is refused before anything is
// written.
func TestMergeSequential(t *testing.T) {
	var shards []string
	for i := range 4 {
		id := fmt.Sprintf("20261130-06%02d00-soak", i)
		shards = append(shards, writeRunReport(t, id, "soak", int64(i+1), true, counts{stranded: 5}, counts{}))
	}
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	output := filepath.Join(t.TempDir(), "_output")
	var stdout, stderr bytes.Buffer
	path, err := mergeReports(shards, mergeOptions{output: output, now: now, sequential: true,
		design: report.SequentialDesign{Alpha: 0.001, Margin: 0.005}}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Sequential
	// 0 of 5 against 5 per shard: 10 episodes to 0 give p = 0.011, 15
	// give 0.00021 (docs/statistics.md): decided at the third shard.
	if s == nil || len(s.Builds) != 1 || s.Builds[0].Strandings.DecidedAt != 3 || s.RoundCycles != 1000 || len(s.Rounds) != 4 {
		t.Fatalf("sequential %+v, want fix decided at the 3rd of 4 shards of 1000 cycles", s)
	}
	if want := "decided: fix less at report 3 of 4"; !strings.Contains(s.Stopped, want) {
		t.Errorf("stopped %q, want %q", s.Stopped, want)
	}
	if !strings.Contains(stderr.String(), "verdict: fix strands less than stock: 0 of 4000 against 20 of 4000 stranding episodes") {
		t.Errorf("the console lacks the verdict:\n%s", stderr.String())
	}

	bad := filepath.Join(t.TempDir(), "_output")
	_, err = mergeReports(shards, mergeOptions{output: bad, now: now, sequential: true, design: report.SequentialDesign{Alpha: 0.001}}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--verdict-margin") {
		t.Errorf("margin 0: %v, want an error naming --verdict-margin", err)
	}
	if _, serr := os.Stat(bad); !os.IsNotExist(serr) {
		t.Errorf("a refused merge wrote %s", bad)
	}
}
