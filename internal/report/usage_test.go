package report_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/usage"
)

func TestAddUsage(t *testing.T) {
	mem := map[string]usage.Peak{"etcd": {SumMiB: 80, MaxProcessMiB: 80, Processes: 1}}
	tests := []struct {
		name      string
		cycles    int
		cpu       map[string]float64
		wantCPU   map[string]float64
		wantTotal float64
		wantShare float64
	}{
		{name: "per cycle, total and the harness's share", cycles: 100,
			cpu:     map[string]float64{"etcd": 10, "kube-apiserver": 30, usage.Harness: 10},
			wantCPU: map[string]float64{"etcd": 0.1, "kube-apiserver": 0.3, usage.Harness: 0.1}, wantTotal: 0.5, wantShare: 0.2},
		{name: "no harness sample: share 0", cycles: 10, cpu: map[string]float64{"etcd": 1},
			wantCPU: map[string]float64{"etcd": 0.1}, wantTotal: 0.1},
		{name: "no cycles: no per-cycle figure", cycles: 0, cpu: map[string]float64{"etcd": 1}},
		{name: "no CPU figures", cycles: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := report.Build{Cycles: tt.cycles}
			report.AddUsage(&b, tt.cpu, mem)
			if !maps.EqualFunc(b.CPUSecondsPerCycle, tt.wantCPU, func(x, y float64) bool { return math.Abs(x-y) < 1e-12 }) ||
				(b.CPUSecondsPerCycle == nil) != (tt.wantCPU == nil) {
				t.Errorf("cpu_seconds_per_cycle = %v, want %v", b.CPUSecondsPerCycle, tt.wantCPU)
			}
			if math.Abs(b.CPUSecondsTotalPerCycle-tt.wantTotal) > 1e-12 || math.Abs(b.HarnessCPUShare-tt.wantShare) > 1e-12 {
				t.Errorf("total %v, share %v; want %v, %v", b.CPUSecondsTotalPerCycle, b.HarnessCPUShare, tt.wantTotal, tt.wantShare)
			}
			if !maps.Equal(b.MemoryPeakMiB, mem) {
				t.Errorf("memory_peak_mib = %v, want %v", b.MemoryPeakMiB, mem)
			}
		})
	}
}

func TestAddRequestsByClient(t *testing.T) {
	tests := []struct {
		name     string
		cycles   int
		requests map[string]float64
		want     map[string]float64
	}{
		{name: "per cycle", cycles: 4, requests: map[string]float64{"kube-controller-manager": 40, "harness": 2}, want: map[string]float64{"kube-controller-manager": 10, "harness": 0.5}},
		{name: "counted, none made", cycles: 4, requests: map[string]float64{}, want: map[string]float64{}},
		{name: "not counted", cycles: 4},
		{name: "no cycles", cycles: 0, requests: map[string]float64{"harness": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := report.Build{Cycles: tt.cycles}
			report.AddRequestsByClient(&b, tt.requests)
			if !maps.Equal(b.APIRequestsPerCycleByClient, tt.want) || (b.APIRequestsPerCycleByClient == nil) != (tt.want == nil) {
				t.Errorf("api_requests_per_cycle_by_client = %v, want %v", b.APIRequestsPerCycleByClient, tt.want)
			}
		})
	}
}

// The new figures are report.json fields under their contract names, and
// absent (not empty) from a report that has none (kind, existing).
func TestUsageFieldsInTheJSON(t *testing.T) {
	b := report.Build{Name: "stock", Cycles: 10}
	report.AddUsage(&b, map[string]float64{"etcd": 1, usage.Harness: 1}, map[string]usage.Peak{"etcd": {SumMiB: 50, MaxProcessMiB: 50, Processes: 1}})
	report.AddRequestsByClient(&b, map[string]float64{"kube-scheduler": 20})
	data, err := json.Marshal(report.Report{Builds: []report.Build{b, {Name: "fix"}}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Builds []map[string]json.RawMessage `json:"builds"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"cpu_seconds_per_cycle":            `{"etcd":0.1,"harness":0.1}`,
		"cpu_seconds_total_per_cycle":      `0.2`,
		"harness_cpu_share":                `0.5`,
		"memory_peak_mib":                  `{"etcd":{"sum":50,"max_process":50,"processes":1}}`,
		"api_requests_per_cycle_by_client": `{"kube-scheduler":2}`,
	}
	for k, v := range want {
		if string(got.Builds[0][k]) != v {
			t.Errorf("%s = %s, want %s", k, got.Builds[0][k], v)
		}
		if _, ok := got.Builds[1][k]; ok {
			t.Errorf("a build without the figures has %s", k)
		}
	}
}

func TestMergePoolsUsage(t *testing.T) {
	tests := []struct {
		name       string
		mutate     func(a, b *report.Build) // the two runs' stock builds
		wantCPU    map[string]float64
		wantShare  float64
		wantClient map[string]float64
		wantMemory map[string]usage.Peak
		wantNotes  []string
	}{
		{
			name: "cycle-weighted means, recomputed share, the larger peak",
			mutate: func(a, b *report.Build) {
				a.Cycles, b.Cycles = 1000, 3000 // weights 1:3
				a.CPUSecondsPerCycle = map[string]float64{"etcd": 0.1, usage.Harness: 0.1}
				b.CPUSecondsPerCycle = map[string]float64{"etcd": 0.3, usage.Harness: 0.1, "kube-apiserver": 0.4}
				a.APIRequestsPerCycleByClient = map[string]float64{"harness": 4}
				b.APIRequestsPerCycleByClient = map[string]float64{"harness": 8, "kube-scheduler": 2}
				a.MemoryPeakMiB = map[string]usage.Peak{"etcd": {SumMiB: 50, MaxProcessMiB: 50, Processes: 1}, "kubelet-sim": {SumMiB: 200, MaxProcessMiB: 30, Processes: 8}}
				b.MemoryPeakMiB = map[string]usage.Peak{"etcd": {SumMiB: 70, MaxProcessMiB: 70, Processes: 1}, "kubelet-sim": {SumMiB: 190, MaxProcessMiB: 40, Processes: 8}}
			},
			// etcd (0.1 + 3*0.3)/4, harness 0.1, kube-apiserver 3*0.4/4.
			wantCPU:    map[string]float64{"etcd": 0.25, usage.Harness: 0.1, "kube-apiserver": 0.3},
			wantShare:  0.1 / 0.65,
			wantClient: map[string]float64{"harness": 7, "kube-scheduler": 1.5},
			wantMemory: map[string]usage.Peak{"etcd": {SumMiB: 70, MaxProcessMiB: 70, Processes: 1}, "kubelet-sim": {SumMiB: 200, MaxProcessMiB: 40, Processes: 8}},
		},
		{
			name: "one report without them: over the other's cycles, with notes",
			mutate: func(a, b *report.Build) {
				a.CPUSecondsPerCycle = map[string]float64{"etcd": 0.2}
				a.APIRequestsPerCycleByClient = map[string]float64{"harness": 4}
			},
			wantCPU:    map[string]float64{"etcd": 0.2},
			wantClient: map[string]float64{"harness": 4},
			wantNotes: []string{
				"build stock: api_requests_per_cycle_by_client covers 1000 of 2000 cycles",
				"build stock: cpu_seconds_per_cycle covers 1000 of 2000 cycles",
			},
		},
		{
			name:   "none has them",
			mutate: func(a, b *report.Build) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := twoRuns()
			tt.mutate(&in[0].Report.Builds[0], &in[1].Report.Builds[0])
			m, err := report.Merge(in, report.MergeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b := m.Builds[0]
			near := func(x, y float64) bool { return math.Abs(x-y) < 1e-12 }
			if !maps.EqualFunc(b.CPUSecondsPerCycle, tt.wantCPU, near) || (b.CPUSecondsPerCycle == nil) != (tt.wantCPU == nil) {
				t.Errorf("cpu_seconds_per_cycle = %v, want %v", b.CPUSecondsPerCycle, tt.wantCPU)
			}
			if !near(b.CPUSecondsTotalPerCycle, usage.Total(tt.wantCPU)) || !near(b.HarnessCPUShare, tt.wantShare) {
				t.Errorf("total %v, share %v; want %v, %v", b.CPUSecondsTotalPerCycle, b.HarnessCPUShare, usage.Total(tt.wantCPU), tt.wantShare)
			}
			if !maps.EqualFunc(b.APIRequestsPerCycleByClient, tt.wantClient, near) || (b.APIRequestsPerCycleByClient == nil) != (tt.wantClient == nil) {
				t.Errorf("api_requests_per_cycle_by_client = %v, want %v", b.APIRequestsPerCycleByClient, tt.wantClient)
			}
			if !maps.Equal(b.MemoryPeakMiB, tt.wantMemory) {
				t.Errorf("memory_peak_mib = %v, want %v", b.MemoryPeakMiB, tt.wantMemory)
			}
			for _, n := range tt.wantNotes {
				found := false
				for _, got := range m.Notes {
					found = found || strings.HasPrefix(got, n)
				}
				if !found {
					t.Errorf("no note %q in %q", n, m.Notes)
				}
			}
		})
	}
}

// TestAddProxyCounters: requests per cycle and the watch lag are the
// churn's (after − before); a resource whose events all came before the
// churn has no lag figure.
func TestAddProxyCounters(t *testing.T) {
	bounds := []float64{0.001, 0.01, 0.1}
	h := func(counts ...uint64) fault.Histogram {
		return fault.Histogram{Bounds: bounds, Counts: counts}
	}
	before := fault.Counters{Requests: map[string]int64{"PATCH nodes/status": 10}, WatchLag: map[string]fault.Histogram{
		"nodes": h(5, 0, 0, 0), "pods": h(3, 0, 0, 0)}}
	after := fault.Counters{Requests: map[string]int64{"PATCH nodes/status": 30}, EventsDelayed: 4, MaxQueueDepth: 2, APIErrors: 3,
		WatchLag: map[string]fault.Histogram{"nodes": h(5, 0, 8, 2), "pods": h(3, 0, 0, 0)}}
	b := report.Build{Cycles: 10, APIRequestsPerCycle: map[string]float64{}}
	report.AddProxyCounters(&b, before, after)
	nodes, ok := b.Proxy.WatchLag["nodes"]
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"requests per cycle during the churn", b.APIRequestsPerCycle["PATCH nodes/status"], 2.0},
		{"events delayed", b.Proxy.EventsDelayed, int64(4)},
		{"api errors injected", b.Proxy.APIErrors, int64(3)},
		{"nodes' lag is the churn's events", fmt.Sprint(ok, nodes.Events, nodes.Histogram.Counts), "true 10 [0 0 8 2]"},
		{"p50 inside the 10–100 ms bucket", nodes.P50MS > 10 && nodes.P50MS <= 100, true},
		{"p99 beyond the last bound reads as the last bound", nodes.P99MS, 100.0},
		{"no pod events during the churn: no figure", len(b.Proxy.WatchLag), 1},
	}
	for _, tt := range tests {
		if fmt.Sprint(tt.got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

// The CSI driver's journal counts by method and code, a latency alone as
// "slowed"; other journal entries do not count.
func TestAddCSIFaults(t *testing.T) {
	journal := []fault.JournalEntry{
		{Kind: fault.JournalCSIError, Verb: "ControllerUnpublishVolume", Code: 4},
		{Kind: fault.JournalCSIError, Verb: "ControllerUnpublishVolume", Code: 4},
		{Kind: fault.JournalCSIError, Verb: "ControllerPublishVolume", Code: 14},
		{Kind: fault.JournalCSIError, Verb: "NodeStageVolume"},
		{Kind: fault.JournalAPIError, Verb: "PATCH", Code: 500},
	}
	var b report.Build
	report.AddCSIFaults(&b, journal)
	want := map[string]int64{"ControllerUnpublishVolume DEADLINE_EXCEEDED": 2, "ControllerPublishVolume UNAVAILABLE": 1, "NodeStageVolume slowed": 1}
	if fmt.Sprint(b.CSIFaults) != fmt.Sprint(want) {
		t.Errorf("CSIFaults = %v, want %v", b.CSIFaults, want)
	}
	var none report.Build
	report.AddCSIFaults(&none, nil)
	if none.CSIFaults != nil {
		t.Errorf("no journal: CSIFaults = %v, want absent", none.CSIFaults)
	}
}
