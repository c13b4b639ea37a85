package render

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/detector"
	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/timeline"
)

func TestWriteIsCompleteAndCopiedToLatest(t *testing.T) {
	dir := t.TempDir()
	runDir, latest := filepath.Join(dir, "run-1"), filepath.Join(dir, "latest")
	r := &report.Report{RunID: "run-1", Scenario: "smoke", Provider: "local", Seed: 1, KubernetesVersion: "v1.37.2",
		Components: map[string]provenance.Component{"etcd": {Version: "3.7.0"}},
		Builds:     []report.Build{report.BuildFromCycles("stock", provenance.ControllerBuild{Module: "m"}, cycle.Result{}, nil)}, Complete: true}
	if err := Write(r, runDir, latest); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{runDir, latest} {
		data, err := os.ReadFile(filepath.Join(d, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		var generic map[string]any
		if err := json.Unmarshal(data, &generic); err != nil {
			t.Fatal(err)
		}
		// The contract's field names (docs/design.md, "report.json").
		for _, k := range []string{"scenario", "provider", "seed", "kubernetes_version", "cluster_start_seconds", "components", "builds"} {
			if _, ok := generic[k]; !ok {
				t.Errorf("%s/report.json lacks %q", d, k)
			}
		}
		build := generic["builds"].([]any)[0].(map[string]any)
		for _, k := range []string{"name", "provenance", "cycles", "stranded", "safety_violations", "stranded_rate", "stranded_rate_ci95",
			"cycles_per_second", "created_to_running_ms", "api_requests_per_cycle", "pinning_same_node_ratio", "proxy", "strandings", "phantom_listings"} {
			if _, ok := build[k]; !ok {
				t.Errorf("build lacks %q", k)
			}
		}
		md, err := os.ReadFile(filepath.Join(d, "report.md"))
		if err != nil || !strings.Contains(string(md), "| stock |") {
			t.Errorf("report.md: %v\n%s", err, md)
		}
		entries, _ := os.ReadDir(d)
		if len(entries) != 4 { // report.json, report.md, compare.md, compare.png
			t.Errorf("%s holds %d files (temporary files left?)", d, len(entries))
		}
	}
}

func TestSafetyFindingsAreListedWithEvidence(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	safety := []detector.Finding{
		{Kind: detector.ListedNotAttached, Pod: "ns/web-1", Node: "node-2", Volume: "v2", Since: at.Add(time.Second), Evidence: "volume listed, but no VolumeAttachment exists"},
		{Kind: detector.DetachedUnderMount, Pod: "ns/web-0", Node: "node-1", Volume: "v1", Since: at, Evidence: "VolumeAttachment csi-1 is being deleted while pod ns/web-0 still has the volume mounted"},
	}
	patched := timeline.Entry{Time: at.Add(-1500 * time.Millisecond), Source: timeline.Proxy, Event: "controller PATCH nodes/node-1/status {}"}
	b := report.BuildFromCycles("stock", provenance.ControllerBuild{}, cycle.Result{}, []report.SafetyFinding{report.SafetyFindingOf(safety[0], nil), report.SafetyFindingOf(safety[1], []timeline.Entry{patched})})
	if tl := b.SafetyFindings[0].Timeline; len(tl) != 2 || tl[0].TMS != -1500 || tl[1].TMS != 0 || tl[1].Source != timeline.Detector {
		t.Errorf("timeline %+v: want the PATCH 1500 ms before the detector's verdict", tl)
	}
	if b.SafetyViolations != 2 || len(b.SafetyFindings) != 2 || b.SafetyFindings[0].Pod != "ns/web-0" {
		t.Fatalf("safety %d, findings %+v: want both, oldest first", b.SafetyViolations, b.SafetyFindings)
	}
	md := Markdown(&report.Report{Scenario: "s", Builds: []report.Build{b}})
	for _, want := range []string{"## Safety violations: build stock", "detached_under_mount", "## Safety violation: build stock, detached_under_mount", "| -1500 | proxy | controller PATCH nodes/node-1/status {} |", "still has the volume mounted", "listed_not_attached"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
}

func TestPhantomListingsAreReportedApartFromSafetyViolations(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	phantom := func(node string, since time.Time) detector.Finding {
		return detector.Finding{Kind: detector.PhantomListing, Node: node, Volume: "v1", PV: "pv-1", VolumeAttachment: "csi-1", Since: since,
			Evidence: "volume listed in node " + node + " status.volumesAttached, but VolumeAttachment csi-1 is being deleted and no pod on the node needs it"}
	}
	patched := timeline.Entry{Time: at.Add(-800 * time.Millisecond), Source: timeline.Proxy, Event: "controller PATCH nodes/node-1/status {}"}
	b := report.BuildFromCycles("stock", provenance.ControllerBuild{}, cycle.Result{}, nil)
	report.AddPhantomListings(&b, []report.SafetyFinding{report.SafetyFindingOf(phantom("node-2", at.Add(time.Second)), nil), report.SafetyFindingOf(phantom("node-1", at), []timeline.Entry{patched})})

	if b.PhantomListings != 2 || len(b.PhantomFindings) != 2 || b.PhantomFindings[0].Node != "node-1" {
		t.Fatalf("phantoms %d, findings %+v: want both, oldest first", b.PhantomListings, b.PhantomFindings)
	}
	if b.SafetyViolations != 0 || len(b.SafetyFindings) != 0 {
		t.Errorf("safety %d %+v: a phantom listing is not a safety violation", b.SafetyViolations, b.SafetyFindings)
	}
	if tl := b.PhantomFindings[0].Timeline; len(tl) != 2 || tl[0].TMS != -800 || tl[1].Source != timeline.Detector ||
		!strings.HasPrefix(tl[1].Event, "phantom listing begins: volume listed") {
		t.Errorf("timeline %+v: want the PATCH 800 ms before the detector's phantom listing", tl)
	}

	js, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var shape struct {
		PhantomListings *int `json:"phantom_listings"`
		PhantomFindings []struct {
			Kind     string  `json:"kind"`
			Node     string  `json:"node"`
			Pod      *string `json:"pod"`
			PodUID   *string `json:"pod_uid"`
			Timeline []any   `json:"timeline"`
		} `json:"phantom_findings"`
	}
	if err := json.Unmarshal(js, &shape); err != nil {
		t.Fatal(err)
	}
	if shape.PhantomListings == nil || *shape.PhantomListings != 2 || len(shape.PhantomFindings) != 2 {
		t.Fatalf("report.json: %s", js)
	}
	if f := shape.PhantomFindings[0]; f.Kind != "phantom_listing" || f.Node != "node-1" || f.Pod == nil || *f.Pod != "" || f.PodUID == nil || len(f.Timeline) != 2 {
		t.Errorf("phantom_findings[0] %+v in %s", f, js)
	}
	none, _ := json.Marshal(report.BuildFromCycles("fix", provenance.ControllerBuild{}, cycle.Result{}, nil))
	if !strings.Contains(string(none), `"phantom_listings":0`) || strings.Contains(string(none), "phantom_findings") {
		t.Errorf("a build without phantom listings: %s", none)
	}

	md := Markdown(&report.Report{Scenario: "s", Builds: []report.Build{b}})
	for _, want := range []string{"## Phantom listings: build stock", "| node-1 | `v1` | csi-1 | volume listed in node node-1",
		"## Phantom listing: build stock", "| -800 | proxy | controller PATCH nodes/node-1/status {} |", "phantom listing begins"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if strings.Contains(md, "Safety violation") {
		t.Errorf("report.md lists phantom listings as safety violations:\n%s", md)
	}
}

func TestCycleStepsSplitDeleteToRunning(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	// ran: deleted at t0+off, replacement seen after rep, bound after bnd,
	// Running after run more.
	ran := func(off, rep, bnd, run time.Duration) cycle.Cycle {
		del := t0.Add(off)
		return cycle.Cycle{Outcome: cycle.Running, DeletedAt: del, ReplacementSeenAt: del.Add(rep), ReplacementBoundAt: del.Add(rep + bnd),
			DeleteToRunning: rep + bnd + run}
	}
	noBound := ran(0, 100*ms, 10*ms, 200*ms)
	noBound.ReplacementBoundAt = time.Time{}
	timedOut := ran(0, 5000*ms, 5000*ms, 5000*ms)
	timedOut.Outcome = cycle.TimedOut
	tests := []struct {
		name   string
		cycles []cycle.Cycle
		want   *report.CycleSteps
	}{
		{"no cycles", nil, nil},
		{"a log without binding times (older reports)", []cycle.Cycle{noBound}, nil},
		{"each step's own percentiles, over the cycles that ran", []cycle.Cycle{
			ran(0, 1000*ms, 50*ms, 1500*ms), ran(time.Second, 1200*ms, 30*ms, 1700*ms), ran(2*time.Second, 800*ms, 70*ms, 1600*ms),
			noBound, timedOut,
		}, &report.CycleSteps{
			ToReplacement: report.Percentiles{P50: 1000, P99: 1200}, ToBound: report.Percentiles{P50: 50, P99: 70}, ToRunning: report.Percentiles{P50: 1600, P99: 1700}, Cycles: 3,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := report.BuildFromCycles("stock", provenance.ControllerBuild{}, cycle.Result{Cycles: tt.cycles}, nil).CycleStepsMS
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Errorf("cycleSteps = %+v, want %+v", got, tt.want)
			}
		})
	}

	r := &report.Report{Scenario: "s", Builds: []report.Build{report.BuildFromCycles("stock", provenance.ControllerBuild{}, cycle.Result{Elapsed: time.Second,
		Cycles: []cycle.Cycle{ran(0, 1000*ms, 50*ms, 1500*ms)}}, nil)}}
	if md := Markdown(r); !strings.Contains(md, "## Where a cycle's time goes") || !strings.Contains(md, "| stock | 1 | 1000 / 1000 | 50 / 50 | 1500 / 1500 | 2550 / 2550 |") {
		t.Errorf("report.md lacks the build's steps:\n%s", md)
	}
}

func TestDetachStepsOverTheCyclesWithADetach(t *testing.T) {
	ms := time.Millisecond
	detached := func(toDetach, listedToDetach time.Duration) cycle.Cycle {
		return cycle.Cycle{Outcome: cycle.Running, DeleteToDetach: toDetach, ListedToDetach: listedToDetach}
	}
	tests := []struct {
		name   string
		cycles []cycle.Cycle
		want   *report.DetachSteps
	}{
		{"no cycles", nil, nil},
		{"no cycle detached (the replacements came back first)", []cycle.Cycle{detached(0, 0), detached(0, 0)}, nil},
		{"each interval over the cycles that have it", []cycle.Cycle{
			detached(4700*ms, 5500*ms), detached(4200*ms, 0), detached(5800*ms, 6100*ms), detached(0, 0),
		}, &report.DetachSteps{DeleteToDetach: report.Percentiles{P50: 4700, P99: 5800}, ListedToDetach: report.Percentiles{P50: 5500, P99: 6100}, Cycles: 3, ListedCycles: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := report.BuildFromCycles("stock", provenance.ControllerBuild{}, cycle.Result{Cycles: tt.cycles}, nil).DetachMS
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Errorf("detachSteps = %+v, want %+v", got, tt.want)
			}
		})
	}
	r := &report.Report{Scenario: "s", Builds: []report.Build{report.BuildFromCycles("stock", provenance.ControllerBuild{}, cycle.Result{Elapsed: time.Second,
		Cycles: []cycle.Cycle{detached(4700*ms, 5500*ms)}}, nil)}}
	if md := Markdown(r); !strings.Contains(md, "## When the controller detached") || !strings.Contains(md, "| stock | 1 | 4700 / 4700 | 1 | 5500 / 5500 |") {
		t.Errorf("report.md lacks the build's detach timings:\n%s", md)
	}
}

// Write stamps the schema version, and what it writes reads back.
func TestWriteStampsTheSchemaVersion(t *testing.T) {
	dir := t.TempDir()
	if err := Write(&report.Report{Scenario: "s"}, dir, ""); err != nil {
		t.Fatal(err)
	}
	r, err := report.Read(filepath.Join(dir, "report.json"))
	if err != nil || r.SchemaVersion != report.SchemaVersion {
		t.Fatalf("read back %+v, %v: want schema_version %d", r, err, report.SchemaVersion)
	}
}

func TestMarkdownSaysHowTheRunEnded(t *testing.T) {
	tests := []struct {
		name    string
		r       report.Report
		want    []string
		notWant []string
	}{
		{"complete", report.Report{RunID: "r", Complete: true}, []string{"- run: `r` (complete)\n"}, []string{"- failed:"}},
		{"in progress", report.Report{RunID: "r"}, []string{"(in progress (partial))"}, []string{"- failed:"}},
		{"interrupted", report.Report{RunID: "r", Interrupted: true, InterruptedDuring: "churn"}, []string{"(interrupted during churn (partial))"}, []string{"- failed:"}},
		{"failed", report.Report{RunID: "r", Failure: "build stock: start cluster: kind create: exit status 1", FailedDuring: "cluster start"},
			[]string{"(failed during cluster start (partial))", "- failed: build stock: start cluster: kind create: exit status 1\n"}, []string{"in progress"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkContains(t, Markdown(&tc.r), tc.want, tc.notWant)
		})
	}
}
