package runtimeops

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAddAndSub(t *testing.T) {
	bounds := []float64{0.01, 0.1}
	before := Ops{StopContainer: {Bounds: bounds, Counts: []uint64{1, 2, 0}}}
	after := Ops{StopContainer: {Bounds: bounds, Counts: []uint64{4, 2, 1}}, RunPodSandbox: {Bounds: bounds, Counts: []uint64{0, 3, 0}}}
	d := Sub(after, before)
	want := Ops{StopContainer: {Bounds: bounds, Counts: []uint64{3, 0, 1}}, RunPodSandbox: {Bounds: bounds, Counts: []uint64{0, 3, 0}}}
	if !equalOps(d, want) {
		t.Errorf("Sub = %v, want %v", d, want)
	}
	// A restarted kubelet's counters went backwards: left out, not negative.
	if r := Sub(before, after); len(r) != 0 {
		t.Errorf("Sub across a restart = %v, want nothing", r)
	}
	sum, err := Add(d, before)
	if err != nil {
		t.Fatal(err)
	}
	if got := sum[StopContainer].Counts; !slices.Equal(got, []uint64{4, 2, 1}) {
		t.Errorf("Add: stop_container counts %v", got)
	}
	if got := d[StopContainer].Counts; !slices.Equal(got, []uint64{3, 0, 1}) {
		t.Errorf("Add changed its argument: %v", got)
	}
	if _, err := Add(d, Ops{StopContainer: {Bounds: []float64{1}, Counts: []uint64{1, 0}}}); err == nil {
		t.Error("Add of different buckets: no error")
	}
}

func TestQuantile(t *testing.T) {
	h := Histogram{Bounds: []float64{0.1, 1, 10}, Counts: []uint64{50, 0, 50, 0}}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.25, 50 * time.Millisecond}, // linear in the first bucket
		{0.5, 100 * time.Millisecond}, // its top
		{0.75, 3162 * time.Millisecond},
		{1, 10 * time.Second},
	} {
		if got := Quantile(h, tc.q); got.Round(time.Millisecond) != tc.want {
			t.Errorf("q %v: %v, want %v", tc.q, got, tc.want)
		}
	}
	over := Histogram{Bounds: []float64{0.1}, Counts: []uint64{0, 5}}
	if got := Quantile(over, 0.5); got != 100*time.Millisecond {
		t.Errorf("beyond the last bound: %v, want the bound", got)
	}
	if got := Quantile(Histogram{}, 0.5); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

func TestNewTimingsNeedsEveryPodOperation(t *testing.T) {
	h := Histogram{Bounds: []float64{1}, Counts: []uint64{1, 0}}
	ops := Ops{}
	for _, op := range PodOperations {
		ops[op] = h
	}
	if _, err := NewTimings("here", ops); err != nil {
		t.Fatal(err)
	}
	// The relists, the API requests and the CSI volume calls are kept where measured, left out
	// where not; what kubelet-sim does not draw is left out.
	ops[PLEGRelist] = h
	ops[PLEGRelistInterval] = Histogram{Bounds: []float64{1}, Counts: []uint64{0, 0}}
	ops["get_container_events"] = h
	ops["api_patch"] = h
	ops["api_get"] = Histogram{Bounds: []float64{1}, Counts: []uint64{0, 0}}
	ops["csi_nodestagevolume"] = h
	ops["csi_nodegetcapabilities"] = h
	ops["storage_volume_mount"] = h
	tm, err := NewTimings("here", ops)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{PLEGRelist, "api_patch", "csi_nodestagevolume"} {
		if _, ok := tm.Operations[op]; !ok {
			t.Errorf("operations %v: the measured %s left out", slices.Sorted(maps.Keys(tm.Operations)), op)
		}
	}
	for _, op := range []string{PLEGRelistInterval, "get_container_events", "api_get", "csi_nodegetcapabilities", "storage_volume_mount"} {
		if _, ok := tm.Operations[op]; ok {
			t.Errorf("operations %v: %s kept", slices.Sorted(maps.Keys(tm.Operations)), op)
		}
	}
	delete(ops, StopPodSandbox)
	if _, err := NewTimings("here", ops); err == nil || !strings.Contains(err.Error(), StopPodSandbox) {
		t.Errorf("err %v, want one naming %s", err, StopPodSandbox)
	}
}

// The timings kubelet-sim embeds are a file this package writes: it reads
// as Timings, with every pod operation measured.
func TestKubeletSimEmbedsTimings(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "tools", "upstream", "kubelet-sim", "containerruntime", "timings.json"))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := DecodeTimings(b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tm.Source, "kind") {
		t.Errorf("source %q does not say it was measured on kind", tm.Source)
	}
}

// A file --runtime-timings cannot use is refused naming what is wrong.
func TestDecodeTimingsRefusesWhatKubeletSimCannotDrawFrom(t *testing.T) {
	good := Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{3, 1, 0}}
	file := func(edit func(Ops)) []byte {
		ops := Ops{}
		for _, op := range PodOperations {
			ops[op] = good
		}
		edit(ops)
		b, err := json.Marshal(Timings{Source: "test", Operations: ops})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"valid", "", file(func(Ops) {})},
		{"not JSON", "not a timings file", []byte("run_podsandbox: 1s")},
		{"unknown field", "not a timings file", []byte(`{"source":"x","operations":{},"ops":{}}`)},
		{"an operation missing", "operations.stop_container: missing", file(func(o Ops) { delete(o, StopContainer) })},
		{"counts do not match bounds", "operations.run_podsandbox: 2 bounds and 2 counts", file(func(o Ops) {
			o[RunPodSandbox] = Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{1, 1}}
		})},
		{"nothing counted", "operations.start_container: no operation counted", file(func(o Ops) {
			o[StartContainer] = Histogram{Bounds: []float64{1}, Counts: []uint64{0, 0}}
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeTimings(tc.data)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func equalOps(a, b Ops) bool {
	if len(a) != len(b) {
		return false
	}
	for op, h := range a {
		o, ok := b[op]
		if !ok || !slices.Equal(h.Bounds, o.Bounds) || !slices.Equal(h.Counts, o.Counts) {
			return false
		}
	}
	return true
}

// The sandbox stops a kind kubelet makes twice (its kill, then the GC's on
// a sandbox already stopped) come out fastest first, down to one per
// sandbox started; the source says how many.
func TestNewTimingsLeavesOutTheGCsSandboxStops(t *testing.T) {
	bounds := []float64{0.005, 0.5, 3}
	for _, tc := range []struct {
		name          string
		started       uint64
		stops         []uint64
		want          []uint64
		sourceMention bool
	}{
		{"the GC's stops, all in the first bucket", 4, []uint64{4, 0, 3, 1}, []uint64{0, 0, 3, 1}, true},
		{"more than the first bucket", 4, []uint64{3, 2, 3, 0}, []uint64{0, 1, 3, 0}, true},
		{"one stop per sandbox: kept", 4, []uint64{1, 0, 3, 0}, []uint64{1, 0, 3, 0}, false},
		{"fewer stops than starts: kept", 5, []uint64{1, 0, 3, 0}, []uint64{1, 0, 3, 0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := Ops{}
			for _, op := range PodOperations {
				ops[op] = Histogram{Bounds: bounds, Counts: []uint64{1, 0, 0, 0}}
			}
			ops[RunPodSandbox] = Histogram{Bounds: bounds, Counts: []uint64{0, 0, tc.started, 0}}
			ops[StopPodSandbox] = Histogram{Bounds: bounds, Counts: tc.stops}
			tm, err := NewTimings("kind", ops)
			if err != nil {
				t.Fatal(err)
			}
			if got := tm.Operations[StopPodSandbox].Counts; !slices.Equal(got, tc.want) {
				t.Errorf("stop_podsandbox counts %v, want %v", got, tc.want)
			}
			if got := strings.Contains(tm.Source, "fastest calls"); got != tc.sourceMention {
				t.Errorf("source %q: mentions the trim %v, want %v", tm.Source, got, tc.sourceMention)
			}
			if !slices.Equal(ops[StopPodSandbox].Counts, tc.stops) {
				t.Errorf("the measured histogram changed: %v", ops[StopPodSandbox].Counts)
			}
		})
	}
}
