package containerruntime

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func timings(h Histogram) *Timings {
	t := &Timings{Source: "test", Operations: map[string]Histogram{}}
	for _, op := range Operations {
		t.Operations[op] = h
	}
	return t
}

// Draws fall in the buckets in proportion to their counts, inside the
// bucket's bounds, and beyond the last bound count as the last bound.
func TestDrawFollowsTheHistogram(t *testing.T) {
	h := Histogram{Bounds: []float64{0.01, 0.1, 1}, Counts: []uint64{10, 60, 0, 30}}
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 20000
	var in [4]int
	for range n {
		d := Draw(h, rng).Seconds()
		switch {
		case d <= 0.01:
			in[0]++
		case d <= 0.1:
			in[1]++
		case d < 1:
			in[2]++
		case d == 1:
			in[3]++
		default:
			t.Fatalf("draw %v beyond the last bound", d)
		}
	}
	for i, c := range h.Counts {
		p := float64(c) / 100
		sd := math.Sqrt(n * p * (1 - p))
		if got := float64(in[i]); math.Abs(got-n*p) > 4*sd+1 {
			t.Errorf("bucket %d: %d of %d draws, want about %.0f", i, in[i], n, n*p)
		}
	}
}

// A run repeated with its seed draws the same durations.
func TestDrawsAreSeeded(t *testing.T) {
	h := Histogram{Bounds: []float64{0.01, 0.1, 1}, Counts: []uint64{1, 1, 1, 0}}
	draws := func(seed uint64) []time.Duration {
		r, err := New(timings(h), seed)
		if err != nil {
			t.Fatal(err)
		}
		var out []time.Duration
		for range 20 {
			out = append(out, r.draw(RunPodSandbox))
		}
		return out
	}
	a, b, c := draws(7), draws(7), draws(8)
	same := func(x, y []time.Duration) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Error("same seed, different draws")
	}
	if same(a, c) {
		t.Error("different seeds, same draws")
	}
}

// A pod's start is its sandbox then each container's create and start; its
// stop is the slowest container's stop then the sandbox's.
func TestPodStartAndStop(t *testing.T) {
	// Every operation takes exactly 1 s (a bucket of one point: the draw
	// beyond the last bound is the bound).
	one := Histogram{Bounds: []float64{1}, Counts: []uint64{0, 1}}
	r, err := New(timings(one), 1)
	if err != nil {
		t.Fatal(err)
	}
	var slept []time.Duration
	r.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	if err := r.StartPod(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if err := r.StopPod(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{5 * time.Second, 2 * time.Second}; len(slept) != 2 || slept[0] != want[0] || slept[1] != want[1] {
		t.Errorf("slept %v, want %v (start: sandbox + 2 x (create + start); stop: max of the stops + sandbox)", slept, want)
	}
}

// Reading a pod back lists the sandboxes and containers and reads the
// sandbox's and each container's status.
func TestReadBack(t *testing.T) {
	one := Histogram{Bounds: []float64{1}, Counts: []uint64{0, 1}}
	r, err := New(timings(one), 1)
	if err != nil {
		t.Fatal(err)
	}
	var slept time.Duration
	r.sleep = func(_ context.Context, d time.Duration) error { slept = d; return nil }
	if err := r.ReadBack(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if slept != 5*time.Second {
		t.Errorf("slept %v, want 5s (list sandboxes, list containers, sandbox status, 2 container statuses)", slept)
	}
}

// A nil runtime is instant: nothing waits.
func TestInstantRuntime(t *testing.T) {
	var r *Runtime
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r.StartPod(ctx, 1) != nil || r.StopPod(ctx, 1) != nil || r.ReadBack(ctx, 1) != nil || r.Source() != "" {
		t.Error("the instant runtime waited or failed")
	}
}

// A relist's duration is drawn only from timings that measured it; the
// interval's histogram alone draws nothing (the interval follows from the
// duration and the period), and without a duration the node keeps
// instant relists every period.
func TestRelist(t *testing.T) {
	one := Histogram{Bounds: []float64{1}, Counts: []uint64{0, 1}}
	two := Histogram{Bounds: []float64{2}, Counts: []uint64{0, 1}}
	tests := []struct {
		name             string
		relist, interval *Histogram
		wantD            time.Duration
		wantOK           bool
	}{
		{"both measured", &one, &two, time.Second, true},
		{"the duration alone", &one, nil, time.Second, true},
		{"no relists", nil, nil, 0, false},
		{"the interval alone", nil, &two, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tm := timings(one)
			if tc.relist != nil {
				tm.Operations[PLEGRelist] = *tc.relist
			}
			if tc.interval != nil {
				tm.Operations[PLEGRelistInterval] = *tc.interval
			}
			r, err := New(tm, 1)
			if err != nil {
				t.Fatal(err)
			}
			d, ok := r.Relist()
			if d != tc.wantD || ok != tc.wantOK {
				t.Errorf("Relist() = %v, %v; want %v, %v", d, ok, tc.wantD, tc.wantOK)
			}
		})
	}
	var instant *Runtime
	if _, ok := instant.Relist(); ok {
		t.Error("the instant runtime drew a relist")
	}
}

// An API request is drawn from its method's histogram when the timings
// measured it, and not at all otherwise; drawing requests leaves the
// runtime's own draws as they were without them.
func TestAPIRequest(t *testing.T) {
	one := Histogram{Bounds: []float64{1}, Counts: []uint64{0, 1}}
	spread := Histogram{Bounds: []float64{0.01, 0.1, 1}, Counts: []uint64{1, 1, 1, 0}}
	tm := timings(spread)
	tm.Operations[APIOperation("PATCH")] = one
	r, err := New(tm, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method string
		want   time.Duration
		wantOK bool
	}{
		{"PATCH", time.Second, true},
		{"GET", 0, false},
	} {
		if d, ok := r.APIRequest(tc.method); d != tc.want || ok != tc.wantOK {
			t.Errorf("APIRequest(%s) = %v, %v; want %v, %v", tc.method, d, ok, tc.want, tc.wantOK)
		}
	}
	var instant *Runtime
	if _, ok := instant.APIRequest("PATCH"); ok || instant.APIRequests() {
		t.Error("the instant runtime drew an API request")
	}
	plain, err := New(timings(spread), 7)
	if err != nil {
		t.Fatal(err)
	}
	if !r.APIRequests() || plain.APIRequests() {
		t.Errorf("APIRequests() = %v with a request measured, %v without", r.APIRequests(), plain.APIRequests())
	}
	for i := range 20 {
		r.APIRequest("PATCH")
		if a, b := r.draw(StopContainer), plain.draw(StopContainer); a != b {
			t.Fatalf("draw %d: %v with API requests drawn between, %v without", i, a, b)
		}
	}
}

// A CSI volume call is drawn from its method's histogram when the timings
// measured it; other CSI calls are not drawn, measured or not; drawing the
// calls leaves the runtime's and the API requests' draws as they were.
func TestCSICall(t *testing.T) {
	one := Histogram{Bounds: []float64{1}, Counts: []uint64{0, 1}}
	spread := Histogram{Bounds: []float64{0.01, 0.1, 1}, Counts: []uint64{1, 1, 1, 0}}
	tm := timings(spread)
	tm.Operations[CSIOperation("NodeUnstageVolume")] = one
	tm.Operations[CSIOperation("NodeGetCapabilities")] = one
	tm.Operations[APIOperation("PATCH")] = spread
	r, err := New(tm, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method string
		want   time.Duration
		wantOK bool
	}{
		{"NodeUnstageVolume", time.Second, true},
		{"NodePublishVolume", 0, false},   // a volume call, not measured
		{"NodeGetCapabilities", 0, false}, // measured, not a volume call
	} {
		if d, ok := r.CSICall(tc.method); d != tc.want || ok != tc.wantOK {
			t.Errorf("CSICall(%s) = %v, %v; want %v, %v", tc.method, d, ok, tc.want, tc.wantOK)
		}
	}
	var instant *Runtime
	if _, ok := instant.CSICall("NodeUnstageVolume"); ok || instant.CSICalls() {
		t.Error("the instant runtime drew a CSI call")
	}
	plainTimings := timings(spread)
	plainTimings.Operations[APIOperation("PATCH")] = spread
	plain, err := New(plainTimings, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !r.CSICalls() || plain.CSICalls() {
		t.Errorf("CSICalls() = %v with a call measured, %v without", r.CSICalls(), plain.CSICalls())
	}
	for i := range 20 {
		r.CSICall("NodeUnstageVolume")
		if a, b := r.draw(StopContainer), plain.draw(StopContainer); a != b {
			t.Fatalf("draw %d: %v with CSI calls drawn between, %v without", i, a, b)
		}
		a, _ := r.APIRequest("PATCH")
		b, _ := plain.APIRequest("PATCH")
		if a != b {
			t.Fatalf("request %d: %v with CSI calls drawn between, %v without", i, a, b)
		}
	}
}

// A cancelled pod start does not sit out its drawn time.
func TestCancelledStart(t *testing.T) {
	long := Histogram{Bounds: []float64{3600}, Counts: []uint64{0, 1}}
	r, err := New(timings(long), 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.StartPod(ctx, 1); err == nil {
		t.Error("a cancelled start returned no error")
	}
}

func TestValidate(t *testing.T) {
	good := Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{1, 0, 0}}
	for _, tc := range []struct {
		name string
		edit func(*Timings)
		want string
	}{
		{"an operation missing", func(t *Timings) { delete(t.Operations, StopPodSandbox) }, "operations.stop_podsandbox: missing"},
		{"counts not one more than bounds", func(t *Timings) {
			t.Operations[RunPodSandbox] = Histogram{Bounds: []float64{1}, Counts: []uint64{1}}
		}, "operations.run_podsandbox: 1 bounds and 1 counts"},
		{"bounds not increasing", func(t *Timings) {
			t.Operations[StopContainer] = Histogram{Bounds: []float64{1, 0.5}, Counts: []uint64{1, 0, 0}}
		}, "operations.stop_container: bounds_seconds must be"},
		{"nothing counted", func(t *Timings) {
			t.Operations[StartContainer] = Histogram{Bounds: []float64{1}, Counts: []uint64{0, 0}}
		}, "operations.start_container: no operation counted"},
		{"a relist histogram, when there, checked too", func(t *Timings) {
			t.Operations[PLEGRelistInterval] = Histogram{Bounds: []float64{1}, Counts: []uint64{1}}
		}, "operations.pleg_relist_interval: 1 bounds and 1 counts"},
		{"an API request histogram, when there, checked too", func(t *Timings) {
			t.Operations[APIOperation("GET")] = Histogram{Bounds: []float64{1}, Counts: []uint64{0, 0}}
		}, "operations.api_get: no operation counted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := timings(good)
			tm.Operations = map[string]Histogram{}
			for _, op := range Operations {
				tm.Operations[op] = good
			}
			tc.edit(tm)
			if err := tm.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// The built-in timings are valid and say where they were measured.
func TestDefault(t *testing.T) {
	tm, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tm.Source, "kind") {
		t.Errorf("source %q does not say it was measured on kind", tm.Source)
	}
}
