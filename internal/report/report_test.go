package report

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/detector"
	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/timeline"
)

func TestBuildFromCycles(t *testing.T) {
	ms := time.Millisecond
	res := cycle.Result{Elapsed: 2 * time.Second, BusyWait: 1500 * ms, Cycles: []cycle.Cycle{
		{Outcome: cycle.Running, OldNode: "n1", NewNode: "n1", CreateToRunning: 10 * ms, DeleteToRunning: 100 * ms},
		{Outcome: cycle.Running, OldNode: "n2", NewNode: "n3", CreateToRunning: 30 * ms, DeleteToRunning: 300 * ms},
		{Outcome: cycle.Running, OldNode: "n1", NewNode: "n1", CreateToRunning: 20 * ms, DeleteToRunning: 200 * ms},
		{Outcome: cycle.TimedOut, OldNode: "n1"},
	}}
	b := BuildFromCycles("stock", provenance.ControllerBuild{Module: "m"}, res, nil)
	tests := []struct {
		name      string
		got, want any
	}{
		{"cycles", b.Cycles, 4},
		{"not running", b.CyclesNotRunning, 1},
		{"cycles per second", b.CyclesPerSecond, 2.0},
		{"seconds the churn waited on busy pods", b.ChurnWaitedOnBusySeconds, 1.5},
		{"to-running p50", b.CreatedToRunningMS.P50, 20.0},
		{"to-running p99", b.CreatedToRunningMS.P99, 30.0},
		{"delete-to-running p50", b.DeleteToRunningMS.P50, 200.0},
		{"same node ratio over the cycles that ran", b.PinningSameNodeRatio, 2.0 / 3},
		{"no strandings", b.StrandedRate, 0.0},
		{"interval upper bound is informative", b.StrandedRateCI95[1] > 0 && b.StrandedRateCI95[1] < 1, true},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestStrandedCycleIsCountedWithItsTimeline(t *testing.T) {
	del := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f := detector.Finding{Kind: detector.Stranded, Pod: "ns/web-0", Node: "node-1", Volume: "kubernetes.io/csi/d^h", Since: del.Add(2 * time.Second), Evidence: "absent"}
	res := cycle.Result{Elapsed: time.Second, Cycles: []cycle.Cycle{
		{Index: 0, Outcome: cycle.Running},
		{Index: 1, Pod: "web-0", Outcome: cycle.Stranded, DeletedAt: del, ReplacementSeenAt: del.Add(time.Second), Stranding: &f, DetectedAt: del.Add(33 * time.Second)},
	}}
	b := BuildFromCycles("stock", provenance.ControllerBuild{}, res, []SafetyFinding{{Finding: detector.Finding{Kind: detector.ListedNotAttached}}})
	if b.Stranded != 1 || b.StrandedRate != 0.5 || b.SafetyViolations != 1 || b.CyclesNotRunning != 0 {
		t.Fatalf("build %+v", b)
	}
	s := b.Strandings[0]
	if s.Cycle != 1 || s.Node != "node-1" || s.DetectedAfterMS != 33000 || len(s.Timeline) != 4 || s.Timeline[2].TMS != 2000 {
		t.Errorf("stranding %+v", s)
	}
}

func TestWriteIsCompleteAndCopiedToLatest(t *testing.T) {
	dir := t.TempDir()
	runDir, latest := filepath.Join(dir, "run-1"), filepath.Join(dir, "latest")
	r := &Report{RunID: "run-1", Scenario: "smoke", Provider: "local", Seed: 1, KubernetesVersion: "v1.37.2",
		Components: map[string]provenance.Component{"etcd": {Version: "3.7.0"}},
		Builds:     []Build{BuildFromCycles("stock", provenance.ControllerBuild{Module: "m"}, cycle.Result{}, nil)}, Complete: true}
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
	b := BuildFromCycles("stock", provenance.ControllerBuild{}, cycle.Result{}, []SafetyFinding{SafetyFindingOf(safety[0], nil), SafetyFindingOf(safety[1], []timeline.Entry{patched})})
	if tl := b.SafetyFindings[0].Timeline; len(tl) != 2 || tl[0].TMS != -1500 || tl[1].TMS != 0 || tl[1].Source != timeline.Detector {
		t.Errorf("timeline %+v: want the PATCH 1500 ms before the detector's verdict", tl)
	}
	if b.SafetyViolations != 2 || len(b.SafetyFindings) != 2 || b.SafetyFindings[0].Pod != "ns/web-0" {
		t.Fatalf("safety %d, findings %+v: want both, oldest first", b.SafetyViolations, b.SafetyFindings)
	}
	md := Markdown(&Report{Scenario: "s", Builds: []Build{b}})
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
	b := BuildFromCycles("stock", provenance.ControllerBuild{}, cycle.Result{}, nil)
	AddPhantomListings(&b, []SafetyFinding{SafetyFindingOf(phantom("node-2", at.Add(time.Second)), nil), SafetyFindingOf(phantom("node-1", at), []timeline.Entry{patched})})

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
	none, _ := json.Marshal(BuildFromCycles("fix", provenance.ControllerBuild{}, cycle.Result{}, nil))
	if !strings.Contains(string(none), `"phantom_listings":0`) || strings.Contains(string(none), "phantom_findings") {
		t.Errorf("a build without phantom listings: %s", none)
	}

	md := Markdown(&Report{Scenario: "s", Builds: []Build{b}})
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
		want   *CycleSteps
	}{
		{"no cycles", nil, nil},
		{"a log without binding times (older reports)", []cycle.Cycle{noBound}, nil},
		{"each step's own percentiles, over the cycles that ran", []cycle.Cycle{
			ran(0, 1000*ms, 50*ms, 1500*ms), ran(time.Second, 1200*ms, 30*ms, 1700*ms), ran(2*time.Second, 800*ms, 70*ms, 1600*ms),
			noBound, timedOut,
		}, &CycleSteps{
			ToReplacement: Percentiles{P50: 1000, P99: 1200}, ToBound: Percentiles{P50: 50, P99: 70}, ToRunning: Percentiles{P50: 1600, P99: 1700}, Cycles: 3,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cycleSteps(tt.cycles)
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Errorf("cycleSteps = %+v, want %+v", got, tt.want)
			}
		})
	}

	r := &Report{Scenario: "s", Builds: []Build{BuildFromCycles("stock", provenance.ControllerBuild{}, cycle.Result{Elapsed: time.Second,
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
		want   *DetachSteps
	}{
		{"no cycles", nil, nil},
		{"no cycle detached (the replacements came back first)", []cycle.Cycle{detached(0, 0), detached(0, 0)}, nil},
		{"each interval over the cycles that have it", []cycle.Cycle{
			detached(4700*ms, 5500*ms), detached(4200*ms, 0), detached(5800*ms, 6100*ms), detached(0, 0),
		}, &DetachSteps{DeleteToDetach: Percentiles{P50: 4700, P99: 5800}, ListedToDetach: Percentiles{P50: 5500, P99: 6100}, Cycles: 3, ListedCycles: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := detachSteps(tt.cycles)
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Errorf("detachSteps = %+v, want %+v", got, tt.want)
			}
		})
	}
	r := &Report{Scenario: "s", Builds: []Build{BuildFromCycles("stock", provenance.ControllerBuild{}, cycle.Result{Elapsed: time.Second,
		Cycles: []cycle.Cycle{detached(4700*ms, 5500*ms)}}, nil)}}
	if md := Markdown(r); !strings.Contains(md, "## When the controller detached") || !strings.Contains(md, "| stock | 1 | 4700 / 4700 | 1 | 5500 / 5500 |") {
		t.Errorf("report.md lacks the build's detach timings:\n%s", md)
	}
}

// Read is strict: report.json is a contract, and a field it does not know
// (renamed since) would otherwise read as zero.
func TestReadIsStrict(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A shard's report kept compressed beside the docs reads the same.
	writeGzip := func(name, body string) string {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write([]byte(body)); err != nil || zw.Close() != nil {
			t.Fatal("gzip", err)
		}
		return write(name, b.String())
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	movedP50 := func(want float64) func(*Report) bool {
		return func(r *Report) bool {
			b := r.Builds[0]
			return b.CreatedToRunningMS.P50 == want && b.LegacyAttachToRunningMS == nil
		}
	}
	tests := []struct {
		name, path, want string
		wantVersion      int
		check            func(*Report) bool
	}{
		{"current", write("v2.json", `{"schema_version": 2, "scenario": "s", "builds": [{"name": "stock", "stranded": 2, "created_to_running_ms": {"p50": 7, "p99": 9}}]}`), "", 2, movedP50(7)},
		{"version 1: attach_to_running_ms is read as created_to_running_ms", write("v1.json", `{"schema_version": 1, "scenario": "s", "builds": [{"name": "stock", "stranded": 2, "attach_to_running_ms": {"p50": 5, "p99": 9}}]}`), "", 1, movedP50(5)},
		{"version 2 with the old name", write("v2-old.json", `{"schema_version": 2, "builds": [{"name": "stock", "attach_to_running_ms": {"p50": 5}}]}`), "builds[0].attach_to_running_ms: schema_version 2 names it created_to_running_ms", 0, nil},
		{"before versioning", write("v0.json", `{"scenario": "s", "builds": [{"name": "stock"}]}`), "", 1, nil},
		{"a renamed field", write("renamed.json", `{"scenario": "s", "builds": [{"name": "stock", "strandings_count": 2}]}`), `unknown field "strandings_count"`, 0, nil},
		{"a newer schema", write("v3.json", `{"schema_version": 3}`), "schema_version 3: written by a newer strandlab (this one reads up to 2)", 0, nil},
		{"two values", write("two.json", `{} {}`), "more than one JSON value", 0, nil},
		{"a FIFO", fifo, "not a regular file", 0, nil},
		{"gzip-compressed", writeGzip("v1.json.gz", `{"schema_version": 1, "scenario": "s", "builds": [{"name": "stock"}]}`), "", 1, nil},
		{"gzip-compressed, a renamed field", writeGzip("renamed.json.gz", `{"scenario": "s", "builds": [{"strandings_count": 2}]}`), `unknown field "strandings_count"`, 0, nil},
		{"named .gz, not compressed", write("plain.json.gz", `{"scenario": "s"}`), "gzip: invalid header", 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Read(tc.path)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want == "" && r.SchemaVersion != tc.wantVersion:
				t.Errorf("schema_version %d, want %d", r.SchemaVersion, tc.wantVersion)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path)):
				t.Errorf("Read = %v, want an error naming %s and %q", err, tc.path, tc.want)
			case tc.check != nil && !tc.check(r):
				t.Errorf("read %+v", r.Builds)
			}
		})
	}
}

// Write stamps the schema version, and what it writes reads back.
func TestWriteStampsTheSchemaVersion(t *testing.T) {
	dir := t.TempDir()
	if err := Write(&Report{Scenario: "s"}, dir, ""); err != nil {
		t.Fatal(err)
	}
	r, err := Read(filepath.Join(dir, "report.json"))
	if err != nil || r.SchemaVersion != SchemaVersion {
		t.Fatalf("read back %+v, %v: want schema_version %d", r, err, SchemaVersion)
	}
}

// Two runs named alike in the same second get distinct directories.
func TestClaimDirNeverReuses(t *testing.T) {
	root := filepath.Join(t.TempDir(), "reports")
	var got []string
	for range 3 {
		dir, id, err := ClaimDir(root, "20261203-120000-soak")
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(dir) != id {
			t.Errorf("dir %s is not named %s", dir, id)
		}
		got = append(got, id)
	}
	want := []string{"20261203-120000-soak", "20261203-120000-soak-2", "20261203-120000-soak-3"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("claimed %v, want %v", got, want)
	}
}

// latest/ is replaced as a whole: writers racing on it leave exactly one
// writer's files, and nothing of an earlier set that the new one lacks.
func TestReplaceDirNeverMixes(t *testing.T) {
	latest := filepath.Join(t.TempDir(), "latest")
	if err := ReplaceDir(latest, map[string][]byte{"a": []byte("old"), "compare.png": []byte("old")}); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			v := []byte(strconv.Itoa(w))
			var err error
			for range 20 {
				if err = ReplaceDir(latest, map[string][]byte{"a": v, "b": v}); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(latest)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("latest holds %d files, want a and b only", len(entries))
	}
	a, _ := os.ReadFile(filepath.Join(latest, "a"))
	b, _ := os.ReadFile(filepath.Join(latest, "b"))
	if string(a) != string(b) {
		t.Errorf("latest mixes writers: a=%s b=%s", a, b)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(latest), ".latest-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestMarkdownSaysHowTheRunEnded(t *testing.T) {
	tests := []struct {
		name    string
		r       Report
		want    []string
		notWant []string
	}{
		{"complete", Report{RunID: "r", Complete: true}, []string{"- run: `r` (complete)\n"}, []string{"- failed:"}},
		{"in progress", Report{RunID: "r"}, []string{"(in progress (partial))"}, []string{"- failed:"}},
		{"interrupted", Report{RunID: "r", Interrupted: true, InterruptedDuring: "churn"}, []string{"(interrupted during churn (partial))"}, []string{"- failed:"}},
		{"failed", Report{RunID: "r", Failure: "build stock: start cluster: kind create: exit status 1", FailedDuring: "cluster start"},
			[]string{"(failed during cluster start (partial))", "- failed: build stock: start cluster: kind create: exit status 1\n"}, []string{"in progress"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkContains(t, Markdown(&tc.r), tc.want, tc.notWant)
		})
	}
}
