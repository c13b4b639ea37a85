package report

import (
	"bytes"
	"compress/gzip"
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
