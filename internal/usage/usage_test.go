package usage

import (
	"maps"
	"math"
	"testing"
)

func TestComponentOf(t *testing.T) {
	for name, want := range map[string]string{
		"etcd":                  "etcd",
		"kube-apiserver":        "kube-apiserver",
		"csi-driver-controller": "csi-driver",
		"csi-driver-node-12":    "csi-driver",
		"kubelet-sim-node-1":    "kubelet-sim",
		"csi-attacher":          "csi-attacher",
		"kubelet-simulator":     "kubelet-simulator", // not a kubelet-sim-<node> process
		Harness:                 Harness,
	} {
		if got := ComponentOf(name); got != want {
			t.Errorf("ComponentOf(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestCPU(t *testing.T) {
	tests := []struct {
		name          string
		before, after []Sample
		want          map[string]float64
	}{
		{
			name:   "difference per process, grouped by component",
			before: []Sample{{Name: "etcd", PID: 10, StartTicks: 5, CPUSeconds: 1.5}, {Name: "kubelet-sim-node-1", PID: 11, CPUSeconds: 2}, {Name: "kubelet-sim-node-2", PID: 12, CPUSeconds: 3}},
			after:  []Sample{{Name: "etcd", PID: 10, StartTicks: 5, CPUSeconds: 4}, {Name: "kubelet-sim-node-1", PID: 11, CPUSeconds: 2.5}, {Name: "kubelet-sim-node-2", PID: 12, CPUSeconds: 4}},
			want:   map[string]float64{"etcd": 2.5, "kubelet-sim": 1.5},
		},
		{
			name:   "a process started in the window counts all of its time",
			before: []Sample{{Name: "csi-attacher", PID: 20, StartTicks: 100, CPUSeconds: 1}},
			after:  []Sample{{Name: "csi-attacher", PID: 21, StartTicks: 900, CPUSeconds: 0.25}},
			want:   map[string]float64{"csi-attacher": 0.25},
		},
		{
			name:   "a reused PID with another start time is another process",
			before: []Sample{{Name: "kube-apiserver", PID: 30, StartTicks: 100, CPUSeconds: 50}},
			after:  []Sample{{Name: "kube-apiserver", PID: 30, StartTicks: 7000, CPUSeconds: 3}},
			want:   map[string]float64{"kube-apiserver": 3},
		},
		{
			name:   "a process that exited in the window counts nothing",
			before: []Sample{{Name: "pin-extender", PID: 40, CPUSeconds: 1}, {Name: "etcd", PID: 41, CPUSeconds: 1}},
			after:  []Sample{{Name: "etcd", PID: 41, CPUSeconds: 2}},
			want:   map[string]float64{"etcd": 1},
		},
		{
			name:   "an idle component is present with 0",
			before: []Sample{{Name: "apiproxy", PID: 50, CPUSeconds: 1}},
			after:  []Sample{{Name: "apiproxy", PID: 50, CPUSeconds: 1}},
			want:   map[string]float64{"apiproxy": 0},
		},
		{
			name: "control groups are told apart by path, grouped by their stated component",
			before: []Sample{
				{Name: "kind-worker/kubelet.service", Component: "kubelet", Cgroup: "/docker/a/system.slice/kubelet.service", CPUSeconds: 5},
				{Name: "kind-worker2/kubelet.service", Component: "kubelet", Cgroup: "/docker/b/system.slice/kubelet.service", CPUSeconds: 9},
			},
			after: []Sample{
				{Name: "kind-worker/kubelet.service", Component: "kubelet", Cgroup: "/docker/a/system.slice/kubelet.service", CPUSeconds: 7},
				{Name: "kind-worker2/kubelet.service", Component: "kubelet", Cgroup: "/docker/b/system.slice/kubelet.service", CPUSeconds: 10},
			},
			want: map[string]float64{"kubelet": 3},
		},
		{
			name:   "a container started again has a new cgroup and counts all of its time",
			before: []Sample{{Name: "kube-system/etcd/etcd", Component: "etcd", Cgroup: "/docker/a/kubepods/pod1/c1", CPUSeconds: 40}},
			after:  []Sample{{Name: "kube-system/etcd/etcd", Component: "etcd", Cgroup: "/docker/a/kubepods/pod1/c2", CPUSeconds: 2}},
			want:   map[string]float64{"etcd": 2},
		},
		{
			name:   "a stated component wins over grouping by name",
			before: []Sample{{Name: "csi-driver-x", Component: "workload", Cgroup: "/x", CPUSeconds: 1}},
			after:  []Sample{{Name: "csi-driver-x", Component: "workload", Cgroup: "/x", CPUSeconds: 1.5}},
			want:   map[string]float64{"workload": 0.5},
		},
		{
			name: "no samples", want: map[string]float64{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CPU(tt.before, tt.after); !maps.Equal(got, tt.want) {
				t.Errorf("CPU = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMemory(t *testing.T) {
	got := Memory([]Sample{
		{Name: "etcd", PeakRSSBytes: 100 * mib},
		{Name: "kubelet-sim-node-1", PeakRSSBytes: 30 * mib},
		{Name: "kubelet-sim-node-2", PeakRSSBytes: 50 * mib},
		{Name: "kubelet-sim-node-3", PeakRSSBytes: 20 * mib},
		{Name: Harness, PeakRSSBytes: mib / 2},
		{Name: "w1/kubelet.service", Component: "kubelet", Cgroup: "w1:/system.slice/kubelet.service", PeakRSSBytes: 60 * mib},
		{Name: "w2/kubelet.service", Component: "kubelet", Cgroup: "w2:/system.slice/kubelet.service", PeakRSSBytes: 70 * mib},
		// a derived cgroup figure with no peak says nothing of memory
		{Name: "w1/workload", Component: "workload", Cgroup: "w1:workload"},
	})
	want := map[string]Peak{
		"etcd":        {SumMiB: 100, MaxProcessMiB: 100, Processes: 1},
		"kubelet-sim": {SumMiB: 100, MaxProcessMiB: 50, Processes: 3},
		Harness:       {SumMiB: 0.5, MaxProcessMiB: 0.5, Processes: 1},
		"kubelet":     {SumMiB: 130, MaxProcessMiB: 70, Processes: 2},
	}
	if !maps.Equal(got, want) {
		t.Errorf("Memory = %v, want %v", got, want)
	}
}

func TestDelta(t *testing.T) {
	tests := []struct {
		name          string
		before, after Counter
		want          map[string]float64
	}{
		{name: "difference per key", before: Counter{"a": 10, "b": 5}, after: Counter{"a": 15, "b": 7}, want: map[string]float64{"a": 5, "b": 2}},
		{name: "a new key counts from 0", before: Counter{}, after: Counter{"a": 3}, want: map[string]float64{"a": 3}},
		{name: "an unchanged key is left out", before: Counter{"a": 3}, after: Counter{"a": 3}, want: map[string]float64{}},
		{name: "a reset counter counts its after value", before: Counter{"a": 1000}, after: Counter{"a": 40}, want: map[string]float64{"a": 40}},
		{name: "a key gone from after is left out", before: Counter{"a": 1, "b": 2}, after: Counter{"a": 2}, want: map[string]float64{"a": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Delta(tt.before, tt.after); !maps.Equal(got, tt.want) {
				t.Errorf("Delta = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTotal(t *testing.T) {
	// Floating-point addition is not associative: the sum is in key order
	// whatever the map's iteration order, so it is the same every time.
	a, b, c := 0.1, 0.2, 0.3
	want := a + b + c
	for range 20 {
		if got := Total(map[string]float64{"c": c, "a": a, "b": b}); got != want {
			t.Fatalf("Total = %v, want %v (a+b+c in key order)", got, want)
		}
	}
	if got := Total(nil); got != 0 {
		t.Errorf("Total(nil) = %v", got)
	}
}

func TestShare(t *testing.T) {
	tests := []struct {
		name string
		m    map[string]float64
		keys []string
		want float64
	}{
		{"stand-ins of a cluster", map[string]float64{"kube-apiserver": 0.5, Harness: 0.1, "kubelet-sim": 0.3, "etcd": 0.1}, StandIns, 0.4},
		{"keys absent from the map", map[string]float64{"etcd": 2}, StandIns, 0},
		{"empty map", nil, StandIns, 0},
		{"all of it", map[string]float64{Harness: 1, "csi-driver": 3}, StandIns, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Share(tt.m, tt.keys); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("Share = %v, want %v", got, tt.want)
			}
		})
	}
}
