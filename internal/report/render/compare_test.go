package render

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/stats"
	"github.com/strandlab/strandlab/internal/usage"
)

// build is a Build with n cycles, k of them stranded, and its interval.
func build(name string, k, n int, req map[string]float64) report.Build {
	b := report.Build{Name: name, Cycles: n, Stranded: k, APIRequestsPerCycle: req,
		CreatedToRunningMS: report.Percentiles{P50: 850, P99: 2400}, DeleteToRunningMS: report.Percentiles{P50: 1900, P99: 5200},
		CyclesPerSecond: 0.5}
	if n > 0 {
		b.StrandedRate = float64(k) / float64(n)
	}
	lo, hi := stats.Wilson95(k, n)
	b.StrandedRateCI95 = [2]float64{lo, hi}
	return b
}

func twoBuilds() *report.Report {
	return &report.Report{RunID: "20261129-120000", Scenario: "default", Seed: 42, Complete: true, Builds: []report.Build{
		build("stock", 3, 10, map[string]float64{"PATCH nodes/status": 2, "GET volumeattachments": 4, "LIST pods": 0.5}),
		build("fix", 0, 10, map[string]float64{"PATCH nodes/status": 3, "GET volumeattachments": 4, "WATCH csinodes": 0.1}),
	}}
}

func TestCompareMarkdown(t *testing.T) {
	phantoms := twoBuilds()
	phantoms.Builds[0].PhantomListings = 4
	lo3, hi3 := stats.Wilson95(3, 10)
	_, hi0 := stats.Wilson95(0, 10)
	interrupted := twoBuilds()
	interrupted.Interrupted, interrupted.Complete = true, false
	inProgress := twoBuilds()
	inProgress.Complete = false
	failed := twoBuilds()
	failed.Complete, failed.Failure, failed.FailedDuring = false, "build stock: start cluster: no Ready nodes", "cluster start"
	zero := &report.Report{RunID: "r0", Scenario: "s", Complete: true, Builds: []report.Build{build("stock", 0, 0, nil)}}

	tests := []struct {
		name    string
		r       *report.Report
		want    []string
		notWant []string
	}{
		{
			name: "phantom listings counted per build",
			r:    phantoms,
			want: []string{"| safety violations | 0 | 0 |\n| phantom listings | 4 | 0 |\n"},
		},
		{
			name: "two builds",
			r:    twoBuilds(),
			want: []string{
				"# strandlab comparison: default",
				"`20261129-120000` (complete), seed 42",
				"|  | stock | fix |",
				"| cycles | 10 | 10 |",
				"| stranded | 3 | 0 |",
				fmt.Sprintf("| stranded rate (95%% CI) | 0.3000 [%.4f, %.4f] | 0.0000 [0.0000, %.4f] |", lo3, hi3, hi0),
				"| safety violations | 0 | 0 |",
				"| phantom listings | 0 | 0 |",
				"| cycles not running | 0 | 0 |",
				"| created-to-running p50 (ms) | 850 | 850 |",
				"| created-to-running p99 (ms) | 2400 | 2400 |",
				"| delete-to-running p50 (ms) | 1900 | 1900 |",
				"| delete-to-running p99 (ms) | 5200 | 5200 |",
				"| cycles/s | 0.50 | 0.50 |",
				"| controller API requests per cycle (total) | 6.50 | 7.10 |",
				// Requests: union of keys, sorted, ratio column for fix.
				"| request | stock | fix | fix/stock |",
				"| GET volumeattachments | 4.00 | 4.00 | 1.00 |\n| LIST pods | 0.50 | 0.00 | 0.00 |\n| PATCH nodes/status | 2.00 | 3.00 | 1.50 |\n| WATCH csinodes | 0.00 | 0.10 | – |\n",
				"| **total** | 6.50 | 7.10 | 1.09 |",
				fmt.Sprintf("- `stock`: 3 stranded in 10 cycles, 3 episode(s) (rate 0.3000, 95%% CI %.4f–%.4f); no safety violations", lo3, hi3),
				fmt.Sprintf("- `fix`: 0 stranded in 10 cycles (95%% CI upper bound %.4f); interval overlaps stock's", hi0),
				// 0/10 vs 3/10: C(10,3)/C(20,3) = 2/19 = 0.105.
				"interval overlaps stock's; Fisher exact test: no evidence either way (p = 0.11); no safety violations",
				"| fix | stranding episodes | 0/10 vs 3/10 | fisher-exact one-sided (fewer stranding episodes) | 0.11 | no evidence either way (p = 0.11) |",
				"](compare.png)",
			},
			notWant: []string{"partial", "NaN", "Inf"},
		},
		{
			name: "one build",
			r:    &report.Report{RunID: "r1", Scenario: "soak", Seed: 7, Complete: true, Builds: []report.Build{build("fix", 0, 200, map[string]float64{"GET nodes": 1})}},
			want: []string{
				"|  | fix |\n|---|---:|\n",
				"| cycles | 200 |",
				"| request | fix |\n",
				"| **total** | 1.00 |",
				"- `fix`: 0 stranded in 200 cycles (95% CI upper bound",
				"No build named `stock`: nothing to test against.",
			},
			notWant: []string{"/stock", "stock's", "Fisher exact test:", "| build | count | build vs"},
		},
		{
			name:    "interrupted",
			r:       interrupted,
			want:    []string{"(interrupted (partial))", "- partial: the figures cover the cycles run so far"},
			notWant: []string{"(complete)"},
		},
		{
			name: "in progress",
			r:    inProgress,
			want: []string{"(in progress (partial))"},
		},
		{
			name:    "failed",
			r:       failed,
			want:    []string{"(failed during cluster start (partial))"},
			notWant: []string{"in progress", "(complete)"},
		},
		{
			name: "no cycles yet: empty interval, no requests",
			r:    zero,
			want: []string{
				"| stranded rate (95% CI) | 0.0000 [0.0000, 0.0000] |",
				"No controller requests were counted",
				"- `stock`: no cycles run yet",
			},
			notWant: []string{"NaN"},
		},
		{
			name: "verdict against stock",
			r: &report.Report{Complete: true, Builds: []report.Build{
				build("stock", 40, 100, nil), build("fix", 0, 100, nil),
				{Name: "retry-empty-patch", Cycles: 100, Stranded: 0, SafetyViolations: 2, StrandedRateCI95: [2]float64{0, 0.037},
					Expectation: &report.Expectation{Met: false, Unmet: []string{"safety_violations 2 > 0"}}},
			}},
			want: []string{
				// 0/100 vs 40/100: P(all 40 in stock | 40) = C(100,40)/C(200,40) = 6.7e-15.
				"- `fix`: 0 stranded in 100 cycles (95% CI upper bound 0.0370); interval entirely below stock's; Fisher exact test: fix strands less than stock, p = 6.7e-15; no safety violations",
				"- `retry-empty-patch`: 0 stranded in 100 cycles (95% CI upper bound 0.0370); interval entirely below stock's; Fisher exact test: retry-empty-patch strands less than stock, p = 6.7e-15; 2 safety violation(s); expectation NOT met: safety_violations 2 > 0",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			report.SetTests(tc.r)
			got := CompareMarkdown(tc.r)
			checkContains(t, got, tc.want, tc.notWant)
			if again := CompareMarkdown(tc.r); again != got {
				t.Error("output is not deterministic")
			}
		})
	}
}

// withSafety is b with v safety violations.
func withSafety(b report.Build, v int) report.Build {
	b.SafetyViolations = v
	return b
}

// TestCompareMarkdownTestsAgainstStock checks the p-values and verdicts of
// compare.md's "Tests against stock" and "Verdict". Hand values (equal
// cycles, no events in one build): the one-sided p-value is the chance that
// all k events fall in the other build given k in all, C(n,k)/C(2n,k).
func TestCompareMarkdownTestsAgainstStock(t *testing.T) {
	tests := []struct {
		name    string
		builds  []report.Build
		want    []string
		notWant []string
	}{
		{
			// C(5000,5)/C(10000,5) = 0.0312 > 0.01: no evidence at α = 0.01.
			name:   "stock 5/5000 vs fix 0/5000",
			builds: []report.Build{build("stock", 5, 5000, nil), build("fix", 0, 5000, nil)},
			want: []string{
				"## Tests against stock\n",
				"at α = 0.01",
				"| build | count | build vs stock | test | p | verdict |\n|---|---|---:|---|---:|---|\n",
				"| fix | stranding episodes | 0/5000 vs 5/5000 | fisher-exact one-sided (fewer stranding episodes) | 0.031 | no evidence either way (p = 0.031) |\n" +
					"| fix | stranding episodes, rounds paired | 0/5000 vs 5/5000 | sign-flip over paired rounds | – | not tested: no per-round counts |\n" +
					"| fix | stranding episodes, design effect | 0/5000 vs 5/5000 | fisher-exact one-sided, design effect | – | not tested: no per-round counts |\n" +
					"| fix | safety violations | 0/5000 vs 0/5000 | fisher-exact one-sided (fewer safety violations) | 1 | no evidence either way (p = 1) |\n" +
					"| fix | phantom listings | 0/5000 vs 0/5000 | fisher-exact one-sided (fewer phantom listings) | 1 | no evidence either way (p = 1) |\n" +
					"| fix | cycles not running | 0/5000 vs 0/5000 | fisher-exact one-sided (fewer cycles not running) | 1 | no evidence either way (p = 1) |\n",
				"interval overlaps stock's; Fisher exact test: no evidence either way (p = 0.031); no safety violations",
			},
			notWant: []string{"| stock | 5/5000", "strands less than"},
		},
		{
			// C(5000,20)/C(10000,20) = 9.357e-7 <= 0.01.
			name:   "stock 20/5000 vs fix 0/5000",
			builds: []report.Build{build("stock", 20, 5000, nil), build("fix", 0, 5000, nil)},
			want: []string{
				"| fix | stranding episodes | 0/5000 vs 20/5000 | fisher-exact one-sided (fewer stranding episodes) | 9.4e-7 | fix strands less than stock, p = 9.4e-7 |",
				"; Fisher exact test: fix strands less than stock, p = 9.4e-7; no safety violations",
			},
			notWant: []string{"no evidence either way (p = 9.4e-7)"},
		},
		{
			// The opposite one-sided test names a build that strands more.
			name:   "a build that strands more",
			builds: []report.Build{build("stock", 0, 5000, nil), build("regress", 20, 5000, nil)},
			want: []string{
				"| regress | stranding episodes | 20/5000 vs 0/5000 | fisher-exact one-sided (more stranding episodes) | 9.4e-7 | regress strands more than stock, p = 9.4e-7 |",
				"; Fisher exact test: regress strands more than stock, p = 9.4e-7",
			},
		},
		{
			// Safety: 12/100 vs 0/100, C(100,12)/C(200,12) = 1.7e-4; 2/100
			// vs 0/100 leans towards more, C(100,2)/C(200,2) = 0.25; 7 in 5
			// cycles is not a count of cycles.
			name: "safety violations",
			builds: []report.Build{build("stock", 0, 100, nil), withSafety(build("retry", 0, 100, nil), 12),
				withSafety(build("mild", 0, 100, nil), 2), withSafety(build("busy", 0, 5, nil), 7)},
			want: []string{
				"| retry | safety violations | 12/100 vs 0/100 | fisher-exact one-sided (more safety violations) | 0.00017 | retry has more safety violations than stock, p = 0.00017 |",
				"| mild | safety violations | 2/100 vs 0/100 | fisher-exact one-sided (more safety violations) | 0.25 | no evidence either way (p = 0.25) |",
				"| busy | safety violations | 7/5 vs 0/100 | fisher-exact one-sided (fewer safety violations) | – | not tested: busy has 7 safety violations in 5 cycles, more than one per cycle |",
			},
		},
		{
			name:   "a build with no cycles yet",
			builds: []report.Build{build("stock", 3, 50, nil), build("fix", 0, 0, nil)},
			want: []string{
				"| fix | stranding episodes | 0/0 vs 3/50 | fisher-exact one-sided (fewer stranding episodes) | – | not tested: fix has run no cycles |",
				"- `fix`: no cycles run yet\n",
			},
		},
		{
			name:   "stock alone",
			builds: []report.Build{build("stock", 3, 50, nil)},
			want:   []string{"## Tests against stock\n\nOnly `stock` ran: nothing to test against it.\n"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &report.Report{Scenario: "s", Complete: true, Builds: tc.builds}
			report.SetTests(r)
			got := CompareMarkdown(r)
			checkContains(t, got, tc.want, tc.notWant)
		})
	}
}

func TestWritePlot(t *testing.T) {
	oneZero := &report.Report{Scenario: "s", Builds: []report.Build{build("stock", 0, 0, nil)}}
	nan := &report.Report{Scenario: "s", Builds: []report.Build{{Name: "odd", Cycles: 3, StrandedRate: math.NaN(),
		StrandedRateCI95: [2]float64{math.NaN(), math.Inf(1)}, CreatedToRunningMS: report.Percentiles{P50: math.NaN()},
		APIRequestsPerCycle: map[string]float64{"GET x": math.Inf(1)}}}}
	many := twoBuilds()
	many.Builds = append(many.Builds, build("retry-empty-patch", 1, 10, map[string]float64{"PATCH nodes/status": 30}),
		build("another-long-build-name", 5, 7, nil), build("fifth", 0, 3, nil))
	tests := []struct {
		name string
		r    *report.Report
	}{
		{"two builds", twoBuilds()},
		{"one build", &report.Report{Scenario: "s", Builds: []report.Build{build("fix", 0, 50, map[string]float64{"GET nodes": 1})}}},
		{"a build with 0 cycles", oneZero},
		{"0 cycles next to a build that ran", &report.Report{Builds: []report.Build{build("stock", 2, 5, nil), build("fix", 0, 0, nil)}}},
		{"NaN and Inf figures", nan},
		{"five builds, long names", many},
		{"no builds", &report.Report{Scenario: "s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, ComparePlotFile)
			if err := WritePlot(tc.r, path); err != nil {
				t.Fatal(err)
			}
			img := decodePNG(t, path)
			if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 300 {
				t.Errorf("image is %dx%d, want a four-panel figure", b.Dx(), b.Dy())
			}
			if n := colours(img); n < 3 {
				t.Errorf("image has %d colours: nothing drawn", n)
			}
			assertOnly(t, dir, ComparePlotFile)
		})
	}
}

func TestWritePlotIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.png"), filepath.Join(dir, "b.png")
	if err := WritePlot(twoBuilds(), a); err != nil {
		t.Fatal(err)
	}
	if err := WritePlot(twoBuilds(), b); err != nil {
		t.Fatal(err)
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Error("the same report drew two different images")
	}
}

func TestWritePlotIntoMissingDirFails(t *testing.T) {
	if err := WritePlot(twoBuilds(), filepath.Join(t.TempDir(), "missing", ComparePlotFile)); err == nil {
		t.Error("want an error")
	}
}

func TestWriteWritesTheComparison(t *testing.T) {
	root := t.TempDir()
	dir, latest := filepath.Join(root, "run"), filepath.Join(root, "latest")
	r := twoBuilds()
	if err := Write(r, dir, latest); err != nil {
		t.Fatal(err)
	}
	want := CompareMarkdown(r)
	for _, d := range []string{dir, latest} {
		assertOnly(t, d, "report.json", "report.md", CompareMarkdownFile, ComparePlotFile)
		got, err := os.ReadFile(filepath.Join(d, CompareMarkdownFile))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s/%s differs from CompareMarkdown", d, CompareMarkdownFile)
		}
		decodePNG(t, filepath.Join(d, ComparePlotFile))
	}

	// Rewritten in place (progress ticks): still no temp files.
	r.Builds[1].Cycles, r.Builds[1].Stranded = 20, 1
	if err := Write(r, dir, latest); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, latest} {
		assertOnly(t, d, "report.json", "report.md", CompareMarkdownFile, ComparePlotFile)
	}
}

func TestWriteWhenThePlotFails(t *testing.T) {
	root := t.TempDir()
	dir, latest := filepath.Join(root, "run"), filepath.Join(root, "latest")
	r := twoBuilds()
	if err := Write(r, dir, latest); err != nil {
		t.Fatal(err)
	}
	defer func(f func(*report.Report) ([]byte, error)) { drawPlot = f }(drawPlot)
	drawPlot = func(*report.Report) ([]byte, error) { return nil, errors.New("no ink") }
	r.Builds[0].Cycles = 11
	if err := Write(r, dir, latest); err == nil || !strings.Contains(err.Error(), "no ink") {
		t.Fatalf("Write = %v, want the plot's error", err)
	}
	for _, d := range []string{dir, latest} {
		// The report and compare.md are current; the stale plot is gone.
		assertOnly(t, d, "report.json", "report.md", CompareMarkdownFile)
		md, _ := os.ReadFile(filepath.Join(d, CompareMarkdownFile))
		if !strings.Contains(string(md), "| cycles | 11 | 10 |") {
			t.Errorf("%s/%s is not the new one:\n%s", d, CompareMarkdownFile, md)
		}
	}
	if err := WritePlot(r, filepath.Join(dir, ComparePlotFile)); err == nil {
		t.Error("WritePlot: want the plot's error")
	}
	assertOnly(t, dir, "report.json", "report.md", CompareMarkdownFile)
}

func TestWriteWithoutBuildsWritesNoComparison(t *testing.T) {
	dir := t.TempDir()
	if err := Write(&report.Report{Scenario: "s"}, dir, ""); err != nil {
		t.Fatal(err)
	}
	assertOnly(t, dir, "report.json", "report.md")
}

// assertOnly fails unless dir holds exactly the named files (so no temp
// file was left behind).
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(slices.Sorted(slices.Values(names)), ",") {
		t.Errorf("%s holds %v, want %v", dir, got, slices.Sorted(slices.Values(names)))
	}
}

func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// colours counts the distinct colours of img (up to 16).
func colours(img image.Image) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y && len(seen) < 16; y += 3 {
		for x := b.Min.X; x < b.Max.X && len(seen) < 16; x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
		}
	}
	return len(seen)
}

// checkContains fails for every want missing from got and every notWant in it.
func checkContains(t *testing.T, got string, want, notWant []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, got)
		}
	}
	for _, w := range notWant {
		if strings.Contains(got, w) {
			t.Errorf("unexpected %q in:\n%s", w, got)
		}
	}
}

// compare.md says whether stock's cycles were enough to show a fix at
// stock's measured rate of stranding episodes, the test's unit (0.001
// needs 9,074 cycles per build, see internal/stats' power plan tests;
// 0.004 needs far fewer).
func TestCompareSaysWhetherThereWereEnoughCycles(t *testing.T) {
	for _, tc := range []struct {
		name          string
		stockStranded int
		episodes      int // 0: as many as stranded cycles (a report without episodes)
		want          string
	}{
		{"too few", 5, 5, "Enough cycles? no: showing that a build which never strands beats `stock`'s measured rate of stranding episodes 0.001 at α = 0.01 with power 0.8 takes 9074 cycles per build; `stock` ran 5000."},
		{"enough", 20, 20, "Enough cycles? yes:"},
		// 20 stranded cycles in 5 episodes: 5 of the 4,985 cycles that
		// could begin one, 0.001003, not 20/5000 = 0.004.
		{"episodes, not cycles", 20, 5, "Enough cycles? no: showing that a build which never strands beats `stock`'s measured rate of stranding episodes 0.001003 at"},
		{"a report without episodes: one per stranded cycle", 20, 0, "Enough cycles? yes:"},
		{"no rate", 0, 0, "Enough cycles? `stock` did not strand"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &report.Report{Scenario: "s", Complete: true, Builds: []report.Build{
				{Name: "stock", Cycles: 5000, Stranded: tc.stockStranded, StrandedEpisodes: tc.episodes, StrandedRate: float64(tc.stockStranded) / 5000},
				{Name: "fix", Cycles: 5000}}}
			checkContains(t, CompareMarkdown(r), []string{tc.want}, nil)
		})
	}
}

func TestCompareMarkdownResources(t *testing.T) {
	withUsage := twoBuilds()
	for i, scale := range []float64{1, 2} {
		b := &withUsage.Builds[i]
		report.AddUsage(b, map[string]float64{"etcd": scale, "kube-apiserver": 3 * scale, usage.Harness: 1},
			map[string]usage.Peak{"etcd": {SumMiB: 60, MaxProcessMiB: 60, Processes: 1}, "kubelet-sim": {SumMiB: 240, MaxProcessMiB: 35, Processes: 8}})
		report.AddRequestsByClient(b, map[string]float64{"kube-controller-manager": 70 * scale, "harness": 10})
	}
	withUsage.Builds[1].MemoryPeakMiB = map[string]usage.Peak{"etcd": {SumMiB: 61, MaxProcessMiB: 61, Processes: 1}}
	withUsage.Builds[0].Proxy.WatchLag = map[string]report.WatchLag{"nodes": {Events: 120, P50MS: 0.5, P99MS: 42},
		"configmaps": {Events: 3, P50MS: 0.5, P99MS: 1}, "volumeattachments": {Events: 80, P50MS: 0.6, P99MS: 2}}
	tests := []struct {
		name    string
		r       *report.Report
		want    []string
		notWant []string
	}{
		{
			name: "figures per build, ratios to stock",
			r:    withUsage,
			want: []string{
				"| API requests per cycle, all clients | 8.00 | 15.00 |",
				"| CPU seconds per cycle, all components | 0.5000 | 0.9000 |",
				"| harness share of the CPU | 20.0% | 11.1% |",
				"## API requests per cycle by client",
				"| client | stock | fix | fix/stock |",
				"| harness | 1.00 | 1.00 | 1.00 |\n| kube-controller-manager | 7.00 | 14.00 | 2.00 |\n| **total** | 8.00 | 15.00 | 1.88 |",
				"## CPU seconds per cycle by component",
				"| etcd | 0.1000 | 0.2000 | 2.00 |\n| harness | 0.1000 | 0.1000 | 1.00 |\n| kube-apiserver | 0.3000 | 0.6000 | 2.00 |\n| **total** | 0.5000 | 0.9000 | 1.80 |",
				"## Peak memory (MiB) by component",
				"| etcd | 60 | 61 |\n| kubelet-sim | 240 (8 processes, largest 35) | – |",
				"## Watch lag at the proxy",
				"| nodes | 0.5 / 42.0 (120) | – |\n| volumeattachments | 0.6 / 2.0 (80) | – |",
			},
			notWant: []string{"configmaps"},
		},
		{
			name:    "a report without them has no such rows or sections",
			r:       twoBuilds(),
			notWant: []string{"all clients", "all components", "harness share", "by client", "by component", "Peak memory", "Watch lag"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := CompareMarkdown(tt.r)
			for _, w := range tt.want {
				if !strings.Contains(md, w) {
					t.Errorf("compare.md lacks %q:\n%s", w, md)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(md, w) {
					t.Errorf("compare.md has %q:\n%s", w, md)
				}
			}
		})
	}
}

// compare.md shows the tests the report holds and computes none: a report
// whose tests were never set says so, one whose counts changed after
// report.SetTests shows the tests of the counts it was set with.
func TestCompareMarkdownRendersTheStoredTests(t *testing.T) {
	r := twoBuilds()
	checkContains(t, CompareMarkdown(r), []string{"| fix | stranding episodes | 0/10 vs 3/10 | – | – | not tested (the report carries no test) |"}, []string{"Fisher exact test:"})
	report.SetTests(r)
	r.Builds[0].Stranded, r.Builds[0].StrandedEpisodes = 10, 10
	checkContains(t, CompareMarkdown(r), []string{"no evidence either way (p = 0.11)"}, []string{"strands less than"})
}
