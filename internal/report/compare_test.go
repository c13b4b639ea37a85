package report

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

	"github.com/strandlab/strandlab/internal/stats"
)

// build is a Build with n cycles, k of them stranded, and its interval.
func build(name string, k, n int, req map[string]float64) Build {
	b := Build{Name: name, Cycles: n, Stranded: k, APIRequestsPerCycle: req,
		AttachToRunningMS: Percentiles{P50: 850, P99: 2400}, DeleteToRunningMS: Percentiles{P50: 1900, P99: 5200},
		CyclesPerSecond: 0.5}
	if n > 0 {
		b.StrandedRate = float64(k) / float64(n)
	}
	lo, hi := stats.Wilson95(k, n)
	b.StrandedRateCI95 = [2]float64{lo, hi}
	return b
}

func twoBuilds() *Report {
	return &Report{RunID: "20261129-120000", Scenario: "default", Seed: 42, Complete: true, Builds: []Build{
		build("stock", 3, 10, map[string]float64{"PATCH nodes/status": 2, "GET volumeattachments": 4, "LIST pods": 0.5}),
		build("fix", 0, 10, map[string]float64{"PATCH nodes/status": 3, "GET volumeattachments": 4, "WATCH csinodes": 0.1}),
	}}
}

func TestCompareMarkdown(t *testing.T) {
	lo3, hi3 := stats.Wilson95(3, 10)
	_, hi0 := stats.Wilson95(0, 10)
	interrupted := twoBuilds()
	interrupted.Interrupted, interrupted.Complete = true, false
	inProgress := twoBuilds()
	inProgress.Complete = false
	zero := &Report{RunID: "r0", Scenario: "s", Complete: true, Builds: []Build{build("stock", 0, 0, nil)}}

	tests := []struct {
		name    string
		r       *Report
		want    []string
		notWant []string
	}{
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
				"| cycles not running | 0 | 0 |",
				"| attach-to-running p50 (ms) | 850 | 850 |",
				"| attach-to-running p99 (ms) | 2400 | 2400 |",
				"| delete-to-running p50 (ms) | 1900 | 1900 |",
				"| delete-to-running p99 (ms) | 5200 | 5200 |",
				"| cycles/s | 0.50 | 0.50 |",
				"| controller API requests per cycle (total) | 6.50 | 7.10 |",
				// Requests: union of keys, sorted, ratio column for fix.
				"| request | stock | fix | fix/stock |",
				"| GET volumeattachments | 4.00 | 4.00 | 1.00 |\n| LIST pods | 0.50 | 0.00 | 0.00 |\n| PATCH nodes/status | 2.00 | 3.00 | 1.50 |\n| WATCH csinodes | 0.00 | 0.10 | – |\n",
				"| **total** | 6.50 | 7.10 | 1.09 |",
				fmt.Sprintf("- `stock`: 3 stranded in 10 cycles (rate 0.3000, 95%% CI %.4f–%.4f); no safety violations", lo3, hi3),
				fmt.Sprintf("- `fix`: 0 stranded in 10 cycles (95%% CI upper bound %.4f); interval overlaps stock's", hi0),
				"](compare.png)",
			},
			notWant: []string{"partial", "NaN", "Inf"},
		},
		{
			name: "one build",
			r:    &Report{RunID: "r1", Scenario: "soak", Seed: 7, Complete: true, Builds: []Build{build("fix", 0, 200, map[string]float64{"GET nodes": 1})}},
			want: []string{
				"|  | fix |\n|---|---:|\n",
				"| cycles | 200 |",
				"| request | fix |\n",
				"| **total** | 1.00 |",
				"- `fix`: 0 stranded in 200 cycles (95% CI upper bound",
			},
			notWant: []string{"/stock", "stock's"},
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
			r: &Report{Complete: true, Builds: []Build{
				build("stock", 40, 100, nil), build("fix", 0, 100, nil),
				{Name: "retry-empty-patch", Cycles: 100, Stranded: 0, SafetyViolations: 2, StrandedRateCI95: [2]float64{0, 0.037},
					Expectation: &Expectation{Met: false, Unmet: []string{"safety_violations 2 > 0"}}},
			}},
			want: []string{
				"- `fix`: 0 stranded in 100 cycles (95% CI upper bound 0.0370); interval entirely below stock's; no safety violations",
				"- `retry-empty-patch`: 0 stranded in 100 cycles (95% CI upper bound 0.0370); interval entirely below stock's; 2 safety violation(s); expectation NOT met: safety_violations 2 > 0",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := CompareMarkdown(tc.r)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in:\n%s", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("unexpected %q in:\n%s", w, got)
				}
			}
			if again := CompareMarkdown(tc.r); again != got {
				t.Error("output is not deterministic")
			}
		})
	}
}

func TestWritePlot(t *testing.T) {
	oneZero := &Report{Scenario: "s", Builds: []Build{build("stock", 0, 0, nil)}}
	nan := &Report{Scenario: "s", Builds: []Build{{Name: "odd", Cycles: 3, StrandedRate: math.NaN(),
		StrandedRateCI95: [2]float64{math.NaN(), math.Inf(1)}, AttachToRunningMS: Percentiles{P50: math.NaN()},
		APIRequestsPerCycle: map[string]float64{"GET x": math.Inf(1)}}}}
	many := twoBuilds()
	many.Builds = append(many.Builds, build("retry-empty-patch", 1, 10, map[string]float64{"PATCH nodes/status": 30}),
		build("another-long-build-name", 5, 7, nil), build("fifth", 0, 3, nil))
	tests := []struct {
		name string
		r    *Report
	}{
		{"two builds", twoBuilds()},
		{"one build", &Report{Scenario: "s", Builds: []Build{build("fix", 0, 50, map[string]float64{"GET nodes": 1})}}},
		{"a build with 0 cycles", oneZero},
		{"0 cycles next to a build that ran", &Report{Builds: []Build{build("stock", 2, 5, nil), build("fix", 0, 0, nil)}}},
		{"NaN and Inf figures", nan},
		{"five builds, long names", many},
		{"no builds", &Report{Scenario: "s"}},
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
	defer func(f func(*Report) ([]byte, error)) { drawPlot = f }(drawPlot)
	drawPlot = func(*Report) ([]byte, error) { return nil, errors.New("no ink") }
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
	if err := Write(&Report{Scenario: "s"}, dir, ""); err != nil {
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
