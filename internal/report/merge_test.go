package report_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/detector"
	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/report/render"
	"github.com/strandlab/strandlab/internal/runtimeops"
	"github.com/strandlab/strandlab/internal/stats"
)

var (
	stockProv = provenance.ControllerBuild{Module: "k8s.io/kubernetes@v1.37.2"}
	fixProv   = provenance.ControllerBuild{Module: "k8s.io/kubernetes@v1.37.2", Patch: "fix", PatchSHA256: "b24f2a6b"}
	t0        = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
)

// synthBuild is a build of n cycles summarised by BuildFromCycles, as a run
// writes it: a round-robin churn of web-0, web-1 and web-2 (a round is 3
// cycles); the cycles in strandedAt are stranded (on n1, never listed, so
// a pod's stranded cycles in a row are one episode), the others reach
// Running in toRunning (10x that from the delete), on the old node when
// sameNode; the churn takes n/rate seconds.
func synthBuild(name string, prov provenance.ControllerBuild, n int, strandedAt []int, toRunning time.Duration, sameNode bool, rate float64) report.Build {
	return report.BuildFromCycles(name, prov, synthCycles(n, strandedAt, toRunning, sameNode, rate), nil)
}

// synthCycles are synthBuild's cycles.
func synthCycles(n int, strandedAt []int, toRunning time.Duration, sameNode bool, rate float64) cycle.Result {
	res := cycle.Result{Elapsed: time.Duration(float64(n) / rate * float64(time.Second))}
	for i := range n {
		pod := fmt.Sprintf("web-%d", i%3)
		c := cycle.Cycle{Index: i, Round: i / 3, Pod: pod, Outcome: cycle.Running, OldNode: "n1", NewNode: "n2",
			CreateToRunning: toRunning, DeleteToRunning: 10 * toRunning, DeletedAt: t0}
		if sameNode {
			c.NewNode = "n1"
		}
		if slices.Contains(strandedAt, i) {
			c.Outcome, c.NewNode = cycle.Stranded, ""
			c.Stranding = &detector.Finding{Kind: detector.Stranded, Pod: "ns/" + pod, Node: "n1", Volume: "v-" + pod, Since: t0.Add(time.Second)}
			c.DetectedAt = t0.Add(31 * time.Second)
		}
		res.Cycles = append(res.Cycles, c)
	}
	return res
}

func synthReport(runID string, seed int64, builds ...report.Build) *report.Report {
	return &report.Report{RunID: runID, Scenario: "seed-122413", Provider: "local", Seed: seed, KubernetesVersion: "v1.37.2",
		ClusterStartSeconds: 6, StartedAt: t0, FinishedAt: t0.Add(time.Hour), Complete: true, Builds: builds,
		Components: map[string]provenance.Component{
			"etcd":                    {Name: "etcd", Version: "3.7.0"},
			"kube-controller-manager": {Name: "kube-controller-manager", Version: "v1.37.2"},
		}}
}

// twoRuns are two runs of 1,000 cycles per build: stock strands 2 (cycles
// 10 and 500) and 1 (cycle 7), fix none; run a at 10 cycles/s, 100 ms to
// Running, same node; run b at 5 cycles/s, 300 ms, moved.
func twoRuns() []report.MergeInput {
	a := synthReport("20261130-061347-seed-122413", 7,
		synthBuild("stock", stockProv, 1000, []int{10, 500}, 100*time.Millisecond, true, 10),
		synthBuild("fix", fixProv, 1000, nil, 100*time.Millisecond, true, 10))
	b := synthReport("20261130-061721-seed-122413", 3,
		synthBuild("stock", stockProv, 1000, []int{7}, 300*time.Millisecond, false, 5),
		synthBuild("fix", fixProv, 1000, nil, 300*time.Millisecond, false, 5))
	a.Builds[0].APIRequestsPerCycle = map[string]float64{"PATCH nodes/status": 2}
	b.Builds[0].APIRequestsPerCycle = map[string]float64{"PATCH nodes/status": 4, "GET nodes": 1}
	lag := func(counts ...uint64) map[string]report.WatchLag {
		h := runtimeops.Histogram{Bounds: []float64{0.001, 0.01, 0.1}, Counts: counts}
		return map[string]report.WatchLag{"nodes": {Events: h.Total(), Histogram: h}}
	}
	a.Builds[0].Proxy = report.ProxyStats{EventsDelayed: 10, MaxQueueDepth: 5, APIErrors: 2, WatchLag: lag(90, 10, 0, 0)}
	a.Builds[0].CSIFaults = map[string]int64{"ControllerUnpublishVolume DEADLINE_EXCEEDED": 2}
	b.Builds[0].Proxy = report.ProxyStats{EventsDelayed: 7, MaxQueueDepth: 9, APIErrors: 1, WatchLag: lag(0, 0, 100, 0)}
	b.Builds[0].CSIFaults = map[string]int64{"ControllerUnpublishVolume DEADLINE_EXCEEDED": 1, "NodeStageVolume slowed": 1}
	a.Builds[0].SafetyViolations = 1
	a.Builds[0].SafetyFindings = []report.SafetyFinding{{Finding: detector.Finding{Kind: detector.ListedNotAttached, Since: t0}}}
	a.Builds[0].Expectation = &report.Expectation{Met: true}
	report.AddPhantomListings(&b.Builds[0], []report.SafetyFinding{{Finding: detector.Finding{Kind: detector.PhantomListing, Node: "n2", Since: t0}}})
	b.ClusterStartSeconds = 8
	b.StartedAt, b.FinishedAt = t0.Add(2*time.Hour), t0.Add(3*time.Hour)
	return []report.MergeInput{{Path: "a/report.json", Report: a}, {Path: "b/report.json", Report: b}}
}

func TestMergePoolsCounts(t *testing.T) {
	now := time.Date(2026, 11, 30, 7, 8, 9, 0, time.FixedZone("CET", 3600))
	m, err := report.Merge(twoRuns(), report.MergeOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Builds) != 2 || m.Builds[0].Name != "stock" || m.Builds[1].Name != "fix" {
		t.Fatalf("builds %+v", m.Builds)
	}
	stock, fix := m.Builds[0], m.Builds[1]
	wlo, whi := stats.Wilson95(3, 2000)
	runs := func(ss []report.Stranding) (out []string) {
		for _, s := range ss {
			out = append(out, fmt.Sprintf("%d@%s", s.Cycle, s.RunID))
		}
		return out
	}
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	tests := []struct {
		name      string
		got, want any
	}{
		{"run id", m.RunID, "20261130-060809-merge-seed-122413"},
		{"merged from", strings.Join(m.MergedFrom, ","), "20261130-061347-seed-122413,20261130-061721-seed-122413"},
		{"seed is the first input's", m.Seed, int64(7)},
		{"seeds", m.Seeds, []int64{3, 7}},
		{"complete", m.Complete && !m.Interrupted, true},
		{"stock cycles", stock.Cycles, 2000},
		{"stock stranded", stock.Stranded, 3},
		{"stock rate", stock.StrandedRate, 3.0 / 2000},
		{"stock interval recomputed", stock.StrandedRateCI95, [2]float64{wlo, whi}},
		{"fix cycles", fix.Cycles, 2000},
		{"fix stranded", fix.Stranded, 0},
		{"fix interval recomputed", fix.StrandedRateCI95[1], func() float64 { _, h := stats.Wilson95(0, 2000); return h }()},
		{"strandings concatenated with cycle and run", runs(stock.Strandings),
			[]string{"10@20261130-061347-seed-122413", "500@20261130-061347-seed-122413", "7@20261130-061721-seed-122413"}},
		{"fix strandings empty, not null", fix.Strandings != nil && len(fix.Strandings) == 0, true},
		{"safety violations summed", stock.SafetyViolations, 1},
		{"safety findings keep their run", len(stock.SafetyFindings) == 1 && stock.SafetyFindings[0].RunID == "20261130-061347-seed-122413", true},
		{"phantom listings summed", stock.PhantomListings, 1},
		{"phantom findings keep their run", len(stock.PhantomFindings) == 1 && stock.PhantomFindings[0].RunID == "20261130-061721-seed-122413", true},
		{"no phantom findings: none, as in a run's report", fix.PhantomFindings == nil && fix.PhantomListings == 0, true},
		{"cycles per second: cycles over churn seconds", near(stock.CyclesPerSecond, 2000.0/300), true},
		{"not running", stock.CyclesNotRunning, 0},
		{"same-node ratio over the running cycles", near(stock.PinningSameNodeRatio, 998.0/1997), true},
		{"requests per cycle weighted by cycles", stock.APIRequestsPerCycle["PATCH nodes/status"], 3.0},
		{"a request one run did not make counts 0 there", stock.APIRequestsPerCycle["GET nodes"], 0.5},
		{"events delayed summed", stock.Proxy.EventsDelayed, int64(17)},
		{"api errors summed", stock.Proxy.APIErrors, int64(3)},
		{"csi faults summed by key", stock.CSIFaults["ControllerUnpublishVolume DEADLINE_EXCEEDED"], int64(3)},
		{"csi faults of one report kept", stock.CSIFaults["NodeStageVolume slowed"], int64(1)},
		{"max queue depth is the max", stock.Proxy.MaxQueueDepth, int64(9)},
		{"watch lag histograms pooled", fmt.Sprint(stock.Proxy.WatchLag["nodes"].Histogram.Counts), "[90 10 100 0]"},
		{"watch lag events pooled", stock.Proxy.WatchLag["nodes"].Events, uint64(200)},
		// Half the events within 1 ms, a tenth more by 10 ms: the median is
		// read in the second bucket, the 99th percentile in the third.
		{"watch lag p50 from the pooled histogram", stock.Proxy.WatchLag["nodes"].P50MS > 1 && stock.Proxy.WatchLag["nodes"].P50MS <= 10, true},
		{"watch lag p99 from the pooled histogram", stock.Proxy.WatchLag["nodes"].P99MS > 10 && stock.Proxy.WatchLag["nodes"].P99MS <= 100, true},
		{"no watch lag where no run had it", fix.Proxy.WatchLag == nil, true},
		{"expectation dropped", stock.Expectation == nil, true},
		{"cluster start is the mean", m.ClusterStartSeconds, 7.0},
		{"started at the first start", m.StartedAt, t0},
		{"finished at the last finish", m.FinishedAt, t0.Add(3 * time.Hour)},
		{"components kept", m.Components["etcd"].Version, "3.7.0"},
		{"pooled cycle log", len(stock.CycleLog), 2000},
		{"the expectation's dropping is noted", slices.ContainsFunc(m.Notes, func(n string) bool { return strings.HasPrefix(n, "expectation:") }), true},
	}
	for _, tc := range tests {
		if !equal(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// MergeOptions.Expect: the pooled builds are held to the bands it gives,
// and a build it has no band for gets none.
func TestMergeExpect(t *testing.T) {
	tests := []struct {
		name       string
		expect     func(report.Build) ([]string, bool)
		wantStock  *report.Expectation
		wantFix    *report.Expectation
		wantNoteOf string // prefix of the expectation note
	}{
		{name: "no bands: the runs' expectations are dropped", wantNoteOf: "expectation: not carried over"},
		{name: "pooled counts held to the bands",
			expect: func(b report.Build) ([]string, bool) {
				if b.Name == "stock" {
					// stock pooled 3 of 2000: what the callback sees is the pool.
					if b.Stranded != 3 || b.Cycles != 2000 {
						return []string{fmt.Sprintf("saw %d/%d", b.Stranded, b.Cycles)}, true
					}
					return nil, true
				}
				return []string{"stranded = 0, expected at least 1"}, true
			},
			wantStock: &report.Expectation{Met: true}, wantFix: &report.Expectation{Met: false, Unmet: []string{"stranded = 0, expected at least 1"}},
			wantNoteOf: "expectation: the scenario's expect band held to the pooled counts"},
		{name: "a build without a band has no expectation",
			expect:     func(b report.Build) ([]string, bool) { return nil, b.Name == "fix" },
			wantFix:    &report.Expectation{Met: true},
			wantNoteOf: "expectation: the scenario's expect band held to the pooled counts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := report.Merge(twoRuns(), report.MergeOptions{Expect: tc.expect})
			if err != nil {
				t.Fatal(err)
			}
			if !equal(m.Builds[0].Expectation, tc.wantStock) || !equal(m.Builds[1].Expectation, tc.wantFix) {
				t.Errorf("expectations stock %+v fix %+v, want %+v and %+v", m.Builds[0].Expectation, m.Builds[1].Expectation, tc.wantStock, tc.wantFix)
			}
			var notes []string
			for _, n := range m.Notes {
				if strings.HasPrefix(n, "expectation:") {
					notes = append(notes, n)
				}
			}
			if len(notes) != 1 || !strings.HasPrefix(notes[0], tc.wantNoteOf) {
				t.Errorf("expectation notes %q, want one starting %q", notes, tc.wantNoteOf)
			}
		})
	}
}

func equal(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestMergeLatencies(t *testing.T) {
	// Run a: 998 cycles Running in 100 ms; run b: 999 in 300 ms. Pooled,
	// p50 and p99 are 300 ms; the weighted mean of the runs' percentiles is
	// (998*100 + 999*300) / 1997.
	mean := (998*100.0 + 999*300.0) / 1997
	tests := []struct {
		name                 string
		dropLog              bool
		wantP50, wantP99     float64
		wantDeleteP50        float64
		wantNote, wantLogLen bool
	}{
		{name: "full cycle logs: percentiles of the pooled cycles", wantP50: 300, wantP99: 300, wantDeleteP50: 3000, wantLogLen: true},
		{name: "a report without its cycle log: weighted means, noted", dropLog: true, wantP50: mean, wantP99: mean, wantDeleteP50: 10 * mean, wantNote: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := twoRuns()
			if tc.dropLog {
				in[1].Report.Builds[0].CycleLog = nil
			}
			m, err := report.Merge(in, report.MergeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b := m.Builds[0]
			if math.Abs(b.CreatedToRunningMS.P50-tc.wantP50) > 1e-9 || math.Abs(b.CreatedToRunningMS.P99-tc.wantP99) > 1e-9 ||
				math.Abs(b.DeleteToRunningMS.P50-tc.wantDeleteP50) > 1e-6 {
				t.Errorf("attach %+v delete %+v, want p50 %v p99 %v, delete p50 %v", b.CreatedToRunningMS, b.DeleteToRunningMS, tc.wantP50, tc.wantP99, tc.wantDeleteP50)
			}
			noted := slices.ContainsFunc(m.Notes, func(n string) bool {
				return strings.HasPrefix(n, "build stock: created_to_running_ms and delete_to_running_ms are means")
			})
			if noted != tc.wantNote {
				t.Errorf("notes %q: latency note %t, want %t", m.Notes, noted, tc.wantNote)
			}
			if (len(b.CycleLog) == 2000) != tc.wantLogLen || (!tc.wantLogLen && b.CycleLog != nil) {
				t.Errorf("cycle log of %d cycles, want the pooled log: %t", len(b.CycleLog), tc.wantLogLen)
			}
			// fix keeps full logs either way: 1,000 cycles at 100 ms and
			// 1,000 at 300 ms, nearest rank.
			if f := m.Builds[1]; f.CreatedToRunningMS != (report.Percentiles{P50: 100, P99: 300}) || len(f.CycleLog) != 2000 {
				t.Errorf("fix attach %+v, %d logged cycles", f.CreatedToRunningMS, len(f.CycleLog))
			}
		})
	}
}

func TestMergeRefuses(t *testing.T) {
	tests := []struct {
		name         string
		mutate       func(in []report.MergeInput) []report.MergeInput
		allowPartial bool
		wantField    string    // a report.MergeConflict on this field; "" means none
		wantValues   [2]string // with wantField
		wantErr      string    // substring of the error; "" with no field means success
		wantPartial  bool      // errors.Is(err, report.ErrPartial)
	}{
		{name: "same scenario, builds, versions: merged", mutate: same},
		{name: "different scenario", mutate: func(in []report.MergeInput) []report.MergeInput { in[1].Report.Scenario = "control"; return in },
			wantField: "scenario", wantValues: [2]string{"seed-122413", "control"}},
		{name: "a build's patch differs", mutate: func(in []report.MergeInput) []report.MergeInput {
			in[1].Report.Builds[1].Provenance.PatchSHA256 = "0000"
			return in
		}, wantField: "builds[fix].provenance.patch_sha256", wantValues: [2]string{"b24f2a6b", "0000"}},
		{name: "a build's module differs", mutate: func(in []report.MergeInput) []report.MergeInput {
			in[1].Report.Builds[0].Provenance.Module = "k8s.io/kubernetes@v1.36.0"
			return in
		}, wantField: "builds[stock].provenance.module", wantValues: [2]string{"k8s.io/kubernetes@v1.37.2", "k8s.io/kubernetes@v1.36.0"}},
		{name: "a build in one report only", mutate: func(in []report.MergeInput) []report.MergeInput {
			in[1].Report.Builds = in[1].Report.Builds[:1]
			return in
		}, wantField: "builds", wantValues: [2]string{"fix,stock", "stock"}},
		{name: "different kubernetes_version", mutate: func(in []report.MergeInput) []report.MergeInput {
			in[1].Report.KubernetesVersion = "v1.36.0"
			return in
		},
			wantField: "kubernetes_version", wantValues: [2]string{"v1.37.2", "v1.36.0"}},
		{name: "different provider", mutate: func(in []report.MergeInput) []report.MergeInput { in[1].Report.Provider = "kind"; return in },
			wantField: "provider", wantValues: [2]string{"local", "kind"}},
		{name: "a component's version differs", mutate: func(in []report.MergeInput) []report.MergeInput {
			in[1].Report.Components["etcd"] = provenance.Component{Version: "3.6.0"}
			return in
		}, wantField: "components[etcd].version", wantValues: [2]string{"3.7.0", "3.6.0"}},
		{name: "a component missing from one report", mutate: func(in []report.MergeInput) []report.MergeInput {
			in[1].Report.Components["apiproxy"] = provenance.Component{Version: "strandlab"}
			return in
		}, wantField: "components[apiproxy].version", wantValues: [2]string{"(absent)", "strandlab"}},
		{name: "incomplete report refused", mutate: func(in []report.MergeInput) []report.MergeInput { in[1].Report.Complete = false; return in },
			wantErr: "b/report.json is a partial report (complete: false, interrupted: false)", wantPartial: true},
		{name: "interrupted report refused", mutate: func(in []report.MergeInput) []report.MergeInput { in[0].Report.Interrupted = true; return in },
			wantErr: "a/report.json is a partial report (complete: true, interrupted: true)", wantPartial: true},
		{name: "incomplete report allowed with AllowPartial", mutate: func(in []report.MergeInput) []report.MergeInput { in[1].Report.Complete = false; return in },
			allowPartial: true},
		{name: "the same run twice", mutate: func(in []report.MergeInput) []report.MergeInput {
			return []report.MergeInput{in[0], {Path: "latest/report.json", Report: in[0].Report}}
		}, wantErr: "run 20261130-061347-seed-122413 is in both a/report.json and latest/report.json"},
		{name: "one report", mutate: func(in []report.MergeInput) []report.MergeInput { return in[:1] }, wantErr: "at least two are needed"},
		{name: "a report without builds", mutate: func(in []report.MergeInput) []report.MergeInput { in[1].Report.Builds = nil; return in },
			wantErr: "b/report.json has no builds"},
		{name: "a scenario that is not a directory name", mutate: func(in []report.MergeInput) []report.MergeInput {
			in[0].Report.Scenario, in[1].Report.Scenario = "../x", "../x"
			return in
		}, wantErr: `scenario "../x" cannot name a report directory`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := report.Merge(tc.mutate(twoRuns()), report.MergeOptions{AllowPartial: tc.allowPartial})
			if tc.wantField == "" && tc.wantErr == "" {
				if err != nil || m == nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if m != nil || err == nil {
				t.Fatalf("merged, want a refusal")
			}
			var c *report.MergeConflict
			if isConflict := errors.As(err, &c); isConflict != (tc.wantField != "") {
				t.Fatalf("error %v: a MergeConflict %t, want %t", err, isConflict, tc.wantField != "")
			}
			if c != nil {
				if c.Field != tc.wantField || c.Values != tc.wantValues || c.Files != [2]string{"a/report.json", "b/report.json"} {
					t.Errorf("conflict %+v, want field %s values %q in a/ and b/", c, tc.wantField, tc.wantValues)
				}
				for _, s := range []string{tc.wantField, tc.wantValues[0], tc.wantValues[1], "a/report.json", "b/report.json"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not name %q", err, s)
					}
				}
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q, want it to contain %q", err, tc.wantErr)
			}
			if errors.Is(err, report.ErrPartial) != tc.wantPartial {
				t.Errorf("error %v: ErrPartial %t, want %t", err, !tc.wantPartial, tc.wantPartial)
			}
		})
	}
}

func same(in []report.MergeInput) []report.MergeInput { return in }

func TestMergeSeedsAndRuns(t *testing.T) {
	third := func(seed int64) *report.Report {
		return synthReport("20261130-070000-seed-122413", seed, synthBuild("stock", stockProv, 10, nil, time.Millisecond, true, 1),
			synthBuild("fix", fixProv, 10, nil, time.Millisecond, true, 1))
	}
	tests := []struct {
		name           string
		inputs         func() []report.MergeInput
		allowPartial   bool
		wantSeeds      []int64
		wantSeed       int64
		wantRuns       string
		wantComplete   bool
		wantPartialRun string // named in a note; "" means no such note
	}{
		{name: "two seeds, sorted", inputs: twoRuns, wantSeeds: []int64{3, 7}, wantSeed: 7,
			wantRuns: "20261130-061347-seed-122413,20261130-061721-seed-122413", wantComplete: true},
		{name: "a repeated seed once", inputs: func() []report.MergeInput {
			return append(twoRuns(), report.MergeInput{Path: "c/report.json", Report: third(7)})
		}, wantSeeds: []int64{3, 7}, wantSeed: 7,
			wantRuns: "20261130-061347-seed-122413,20261130-061721-seed-122413,20261130-070000-seed-122413", wantComplete: true},
		{name: "a merged report's seeds and runs are pooled, not its own", inputs: func() []report.MergeInput {
			m, err := report.Merge(twoRuns(), report.MergeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return []report.MergeInput{{Path: "c/report.json", Report: third(11)}, {Path: "m/report.json", Report: m}}
		}, wantSeeds: []int64{3, 7, 11}, wantSeed: 11,
			wantRuns: "20261130-070000-seed-122413,20261130-061347-seed-122413,20261130-061721-seed-122413", wantComplete: true},
		{name: "a partial report pooled: not complete, noted", allowPartial: true, inputs: func() []report.MergeInput {
			in := twoRuns()
			in[1].Report.Complete = false
			return in
		}, wantSeeds: []int64{3, 7}, wantSeed: 7, wantRuns: "20261130-061347-seed-122413,20261130-061721-seed-122413",
			wantPartialRun: "20261130-061721-seed-122413 (in progress (partial))"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := report.Merge(tc.inputs(), report.MergeOptions{AllowPartial: tc.allowPartial})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m.Seeds, tc.wantSeeds) || m.Seed != tc.wantSeed {
				t.Errorf("seed %d seeds %v, want %d %v", m.Seed, m.Seeds, tc.wantSeed, tc.wantSeeds)
			}
			if got := strings.Join(m.MergedFrom, ","); got != tc.wantRuns {
				t.Errorf("merged_from %s, want %s", got, tc.wantRuns)
			}
			if m.Complete != tc.wantComplete {
				t.Errorf("complete %t, want %t", m.Complete, tc.wantComplete)
			}
			noted := slices.ContainsFunc(m.Notes, func(n string) bool {
				return strings.HasPrefix(n, "partial reports pooled") && strings.Contains(n, tc.wantPartialRun)
			})
			if noted != (tc.wantPartialRun != "") {
				t.Errorf("notes %q, want a partial-report note naming %q: %t", m.Notes, tc.wantPartialRun, tc.wantPartialRun != "")
			}
		})
	}
}

// A merged report is written like a run's: the new fields survive the
// round trip, the tests against stock are computed from the pooled counts
// and report.md says which runs it pools.
func TestMergedReportWritten(t *testing.T) {
	m, err := report.Merge(twoRuns(), report.MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := render.Write(m, dir, ""); err != nil {
		t.Fatal(err)
	}
	back, err := report.Read(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	md := render.Markdown(back)
	cmpMD := render.CompareMarkdown(back)
	tests := []struct {
		name      string
		got, want any
	}{
		{"seeds", back.Seeds, []int64{3, 7}},
		{"merged_from", len(back.MergedFrom), 2},
		{"notes", len(back.Notes), len(m.Notes)},
		{"stranding run id", back.Builds[0].Strandings[2].RunID, "20261130-061721-seed-122413"},
		{"fix tested against the pooled stock", back.Builds[1].VersusBaseline != nil && back.Builds[1].VersusBaseline.PValue != nil &&
			*back.Builds[1].VersusBaseline.PValue == *retested(back).Builds[1].VersusBaseline.PValue, true},
		{"report.md names the runs", strings.Contains(md, "- merged from 2 runs: `20261130-061347-seed-122413`, `20261130-061721-seed-122413`; seeds 3, 7\n"), true},
		{"report.md has the notes", strings.Contains(md, "- note: expectation: not carried over"), true},
		{"report.md's stranding headings name the run", strings.Contains(md, "## Stranding: build stock, cycle 7, run `20261130-061721-seed-122413`"), true},
		{"compare.md names the runs", strings.Contains(cmpMD, "- merged from 2 runs:"), true},
		{"a run's report.md has no merge line", strings.Contains(render.Markdown(twoRuns()[0].Report), "merged from"), false},
	}
	for _, tc := range tests {
		if !equal(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// A figure some reports lack is pooled over the others and noted.
func TestMergeCoverageNotes(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(b *report.Build) // run b's stock build
		wantRate  float64
		wantPatch float64 // PATCH nodes/status per cycle
		wantNote  string  // prefix of a note; "" means no coverage note
	}{
		{name: "every report has both", mutate: func(*report.Build) {}, wantRate: 2000.0 / 300, wantPatch: 3},
		{name: "a report without request counts", mutate: func(b *report.Build) { b.APIRequestsPerCycle = map[string]float64{} },
			wantRate: 2000.0 / 300, wantPatch: 2, wantNote: "build stock: api_requests_per_cycle covers 1000 of 2000 cycles"},
		{name: "a report without a cycle rate", mutate: func(b *report.Build) { b.CyclesPerSecond = 0 },
			wantRate: 10, wantPatch: 3, wantNote: "build stock: cycles_per_second covers 1000 of 2000 cycles"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := twoRuns()
			tc.mutate(&in[1].Report.Builds[0])
			m, err := report.Merge(in, report.MergeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b := m.Builds[0]
			if math.Abs(b.CyclesPerSecond-tc.wantRate) > 1e-9 || b.APIRequestsPerCycle["PATCH nodes/status"] != tc.wantPatch {
				t.Errorf("cycles/s %v, PATCH per cycle %v; want %v, %v", b.CyclesPerSecond, b.APIRequestsPerCycle["PATCH nodes/status"], tc.wantRate, tc.wantPatch)
			}
			var coverage []string
			for _, n := range m.Notes {
				if strings.Contains(n, " covers ") {
					coverage = append(coverage, n)
				}
			}
			if tc.wantNote == "" && len(coverage) > 0 || tc.wantNote != "" && (len(coverage) != 1 || !strings.HasPrefix(coverage[0], tc.wantNote)) {
				t.Errorf("coverage notes %q, want %q", coverage, tc.wantNote)
			}
		})
	}
}

// A merge sums the stranding episodes (they never span runs), pools the
// rounds of every run, each naming its run, and recomputes the rounds
// interval from them, which then equals that of one report of both runs;
// the runs interval has each run as one unit. Reports written before
// episodes and rounds were counted are pooled with notes.
func TestMergeEpisodesAndRounds(t *testing.T) {
	const runA, runB = "20261130-061347-seed-122413", "20261130-061721-seed-122413"
	// Run a: web-1 strands in cycles 10 and 13 (rounds 3 and 4: one
	// episode) and web-2 in cycle 500; run b: web-1 in cycle 7.
	resA := synthCycles(1000, []int{10, 13, 500}, time.Millisecond, true, 10)
	resB := synthCycles(1000, []int{7}, time.Millisecond, true, 10)
	inputs := func() []report.MergeInput {
		return []report.MergeInput{
			{Path: "a/report.json", Report: synthReport(runA, 7, report.BuildFromCycles("stock", stockProv, resA, nil))},
			{Path: "b/report.json", Report: synthReport(runB, 3, report.BuildFromCycles("stock", stockProv, resB, nil))},
		}
	}
	// One report of both runs: b's cycles and rounds after a's.
	var both cycle.Result
	both.Cycles = append(both.Cycles, resA.Cycles...)
	for _, c := range resB.Cycles {
		c.Index, c.Round = c.Index+1000, c.Round+334
		both.Cycles = append(both.Cycles, c)
	}
	one := report.BuildFromCycles("stock", stockProv, both, nil)
	runs, err := stats.Clustered95([]stats.Unit{{Trials: 1000, Events: 3}, {Trials: 1000, Events: 1}})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("pooled", func(t *testing.T) {
		m, err := report.Merge(inputs(), report.MergeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b := m.Builds[0]
		firstB := b.Rounds[334]
		tests := []struct {
			name      string
			got, want any
		}{
			{"stranded", b.Stranded, 4},
			{"episodes summed", b.StrandedEpisodes, 3},
			{"the same counts as one report of both", [2]int{b.Stranded, b.StrandedEpisodes}, [2]int{one.Stranded, one.StrandedEpisodes}},
			{"rounds of both runs", len(b.Rounds), 668},
			{"each round names its run", [2]string{b.Rounds[0].RunID, firstB.RunID}, [2]string{runA, runB}},
			{"the rounds of the episode", [2]report.Round{b.Rounds[3], b.Rounds[4]}, [2]report.Round{{Cycles: 3, Stranded: 1, Episodes: 1, RunID: runA}, {Cycles: 3, Stranded: 1, RunID: runA}}},
			{"rounds interval as one report of both", b.StrandedRateCI95Rounds, one.StrandedRateCI95Rounds},
			{"runs interval: each run one unit", b.StrandedRateCI95Runs, &[2]float64{runs.Low, runs.High}},
			{"a stranding continuing an episode keeps its first cycle", [2]int{b.Strandings[1].Cycle, b.Strandings[1].EpisodeCycle}, [2]int{13, 10}},
			{"no notes on episodes or rounds", slices.ContainsFunc(m.Notes, func(n string) bool {
				return strings.Contains(n, "episode") || strings.Contains(n, "per-round")
			}), false},
		}
		for _, tc := range tests {
			if !equal(tc.got, tc.want) {
				t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
			}
		}
		if one.StrandedRateCI95Rounds == nil {
			t.Error("one report of both has no rounds interval")
		}
		cmpMD := render.CompareMarkdown(m)
		checkContains(t, cmpMD, []string{"| stranding episodes | 3 |",
			fmt.Sprintf("| 95%% CI, runs as unit | [%.4f, %.4f], 2 units, design effect %.2f |", runs.Low, runs.High, runs.DesignEffect)}, nil)
	})

	t.Run("reports without episodes or rounds", func(t *testing.T) {
		in := inputs()
		old := &in[1].Report.Builds[0]
		old.StrandedEpisodes, old.Rounds, old.StrandedRateCI95Rounds = 0, nil, nil
		m, err := report.Merge(in, report.MergeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b := m.Builds[0]
		if b.StrandedEpisodes != 3 || b.Rounds != nil || b.StrandedRateCI95Rounds != nil || b.StrandedRateCI95Runs != nil {
			t.Errorf("episodes %d, rounds %d, intervals %v %v; want 3 episodes (b's stranding its own) and no rounds", b.StrandedEpisodes, len(b.Rounds),
				b.StrandedRateCI95Rounds, b.StrandedRateCI95Runs)
		}
		for _, want := range []string{
			"build stock: no interval with rounds or runs as the unit: " + runB + " has no per-round counts",
			"build stock: stranded_episodes counts each stranded cycle of " + runB + " as its own episode (its report has no episodes)",
		} {
			if !slices.Contains(m.Notes, want) {
				t.Errorf("notes %q lack %q", m.Notes, want)
			}
		}
	})
}

// The container runtime's operations of kind reports are pooled by summing
// their histograms, the percentiles read from the sum; reports bucketed
// differently pool none, with a note. report.md tables them.
func TestRuntimeOpsPooledAndTabled(t *testing.T) {
	bounds := []float64{0.01, 0.1, 1}
	in := twoRuns()
	report.AddRuntimeOps(&in[0].Report.Builds[0], runtimeops.Ops{runtimeops.RunPodSandbox: {Bounds: bounds, Counts: []uint64{0, 3, 1, 0}}})
	report.AddRuntimeOps(&in[1].Report.Builds[0], runtimeops.Ops{runtimeops.RunPodSandbox: {Bounds: bounds, Counts: []uint64{0, 1, 3, 0}}})
	m, err := report.Merge(in, report.MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := m.Builds[0].RuntimeOps[runtimeops.RunPodSandbox]
	if got.Count != 8 || !slices.Equal(got.Histogram.Counts, []uint64{0, 4, 4, 0}) || math.Abs(got.P50MS-100) > 1e-6 {
		t.Errorf("pooled run_podsandbox %+v; want 8 operations, counts [0 4 4 0], p50 100 ms", got)
	}
	if md := render.Markdown(m); !strings.Contains(md, "## The container runtime") || !strings.Contains(md, "| stock | run_podsandbox | 8 | 100 / ") {
		t.Errorf("report.md lacks the runtime table:\n%s", md)
	}

	in = twoRuns()
	report.AddRuntimeOps(&in[0].Report.Builds[0], runtimeops.Ops{runtimeops.RunPodSandbox: {Bounds: bounds, Counts: []uint64{0, 3, 1, 0}}})
	report.AddRuntimeOps(&in[1].Report.Builds[0], runtimeops.Ops{runtimeops.RunPodSandbox: {Bounds: []float64{1}, Counts: []uint64{1, 0}}})
	m, err = report.Merge(in, report.MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Builds[0].RuntimeOps) != 0 || !slices.ContainsFunc(m.Notes, func(n string) bool { return strings.Contains(n, "no runtime_ops") }) {
		t.Errorf("differently bucketed: runtime_ops %v, notes %q", m.Builds[0].RuntimeOps, m.Notes)
	}
}

// Counts no run can produce refuse the merge, naming the build and field.
func TestMergeRefusesImpossibleCounts(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(b *report.Build)
		want   string
	}{
		{"negative cycles", func(b *report.Build) { b.Cycles = -1 }, "builds[stock].cycles: -1 is negative"},
		{"negative safety violations", func(b *report.Build) { b.SafetyViolations = -2 }, "builds[stock].safety_violations: -2 is negative"},
		{"more stranded than cycles", func(b *report.Build) { b.Stranded = b.Cycles + 1 }, "builds[stock].stranded: 1001 is more than its 1000 cycles"},
		{"more not Running than cycles", func(b *report.Build) { b.CyclesNotRunning = b.Cycles + 1 }, "builds[stock].cycles_not_running: 1001"},
		{"more episodes than stranded", func(b *report.Build) { b.StrandedEpisodes = b.Stranded + 1 }, "builds[stock].stranded_episodes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := twoRuns()
			tc.mutate(&in[1].Report.Builds[0])
			_, err := report.Merge(in, report.MergeOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), in[1].Path) {
				t.Errorf("Merge = %v, want an error naming %s and %q", err, in[1].Path, tc.want)
			}
		})
	}
}

// retested is a copy of r with its tests against the baseline computed
// again from its counts.
func retested(r *report.Report) *report.Report {
	c := *r
	c.Builds = slices.Clone(r.Builds)
	report.SetTests(&c)
	return &c
}

// checkContains fails for every want missing from got and every notWant in
// it (render's tests have their own: these are another package's).
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

// TestMergeRunProvenance: runs of different scenario files (by content)
// or, unless allowed, strandlab builds refuse to pool; machines and
// reports without provenance are noted; differing build sets pool only
// when allowed (a run until a verdict).
func TestMergeRunProvenance(t *testing.T) {
	m1 := provenance.Machine{ID: "aaaaaaaaaaaa", CPUs: 2, MemoryGiB: 23.4}
	m2 := provenance.Machine{ID: "bbbbbbbbbbbb", CPUs: 8, MemoryGiB: 31.3}
	with := func(harness, scenario string, m provenance.Machine) func([]report.MergeInput) []report.MergeInput {
		return func(in []report.MergeInput) []report.MergeInput {
			in[0].Report.RunProvenance = &provenance.Run{Harness: "rev1", ScenarioSHA256: "s1", Machine: m1}
			in[1].Report.RunProvenance = &provenance.Run{Harness: harness, ScenarioSHA256: scenario, Machine: m}
			return in
		}
	}
	for _, tc := range []struct {
		name      string
		inputs    func([]report.MergeInput) []report.MergeInput
		opts      report.MergeOptions
		wantErr   string
		wantNotes []string
		machines  int
		// noProvenance: neither input records one.
		noProvenance bool
	}{
		{name: "same everything", inputs: with("rev1", "s1", m1)},
		{name: "another scenario file under the same name", inputs: with("rev1", "s2", m1),
			wantErr: `cannot merge: run_provenance.scenario_sha256 differs: "s1" in a/report.json, "s2" in b/report.json`},
		{name: "another harness", inputs: with("rev2", "s1", m1),
			wantErr: `run_provenance.harness differs: "rev1" in a/report.json, "rev2" in b/report.json (pool them anyway with --allow-harness-change)`},
		{name: "another harness, allowed", inputs: with("rev2", "s1", m1), opts: report.MergeOptions{AllowHarnessChange: true},
			wantNotes: []string{"pooled across strandlab builds: rev1, rev2"}},
		{name: "two machines", inputs: with("rev1", "s1", m2), machines: 2,
			wantNotes: []string{"pooled across 2 machines: aaaaaaaaaaaa (2 CPUs, 23.4 GiB), bbbbbbbbbbbb (8 CPUs, 31.3 GiB)"}},
		{name: "a report without provenance", inputs: func(in []report.MergeInput) []report.MergeInput {
			in[0].Report.RunProvenance = &provenance.Run{Harness: "rev1", ScenarioSHA256: "s1", Machine: m1}
			return in
		}, wantNotes: []string{"run provenance (harness, scenario hash, machine) not recorded in: 20261130-061721-seed-122413"}},
		{name: "a build in only some reports", inputs: func(in []report.MergeInput) []report.MergeInput {
			in[1].Report.Builds = in[1].Report.Builds[:1]
			return in
		}, wantErr: `cannot merge: builds differs: "fix,stock" in a/report.json, "stock" in b/report.json`},
		{name: "a build in only some reports, allowed", inputs: func(in []report.MergeInput) []report.MergeInput {
			in[1].Report.Builds = in[1].Report.Builds[:1]
			return in
		}, opts: report.MergeOptions{AllowFewerBuilds: true}, noProvenance: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := report.Merge(tc.inputs(twoRuns()), tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			notes := strings.Join(out.Notes, "\n")
			for _, w := range tc.wantNotes {
				if !strings.Contains(notes, w) {
					t.Errorf("notes %q lack %q", notes, w)
				}
			}
			if len(out.Machines) != tc.machines {
				t.Errorf("machines %+v, want %d listed", out.Machines, tc.machines)
			}
			if (out.RunProvenance == nil || out.RunProvenance.Harness != "rev1") != tc.noProvenance {
				t.Errorf("run provenance %+v, want the first input's", out.RunProvenance)
			}
		})
	}
}
