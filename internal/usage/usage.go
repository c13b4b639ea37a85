// Package usage turns samples of components' own accounting (CPU time, peak
// memory) taken before and after a churn into per-component figures: the
// CPU seconds each component spent in the window and its peak memory. A
// sample is one process (internal/procstat: the local provider's
// components, the harness) or one control group (internal/cgroupstat: the
// kind provider's containers and node services). It is pure: the samples
// come from those packages (or a test), so the arithmetic is tested without
// any process (docs/performance.md).
package usage

import (
	"sort"
	"strings"
)

// Harness is the component name of the strandlab process itself.
const Harness = "harness"

// Sample is one process's or one control group's accounting at one
// instant.
type Sample struct {
	// Name is the process's name as its cluster knows it (e.g.
	// "kubelet-sim-node-3"); ComponentOf groups names into components.
	Name string
	// Component, when set, is the component the sample belongs to, and
	// ComponentOf's grouping by name is not used (a cgroup sampler knows
	// it: "kubelet" for every node's kubelet.service).
	Component string
	// Cgroup identifies a control group's sample across samples (its
	// path), in place of PID and StartTicks: a container started again has
	// a new cgroup, and its counters start from 0.
	Cgroup string
	PID    int
	// StartTicks is when the process started (clock ticks after boot): with
	// PID it tells a process from a later one that reuses its PID.
	StartTicks uint64
	// CPUSeconds is the CPU time the process has used since it started,
	// user plus system, its own threads only (not its reaped children:
	// the harness's children are the components, counted on their own);
	// for a control group, what its tasks and its descendants' used since
	// it was created.
	CPUSeconds float64
	// PeakRSSBytes is the process's peak resident set size so far (VmHWM);
	// for a control group, its peak memory usage (page cache included),
	// 0 when the kernel does not keep one.
	PeakRSSBytes uint64
}

// component is the component s belongs to.
func (s Sample) component() string {
	if s.Component != "" {
		return s.Component
	}
	return ComponentOf(s.Name)
}

// groups are the components that run as several processes, by the prefix
// of their processes' names: one CSI driver instance per node plus the
// controller instance, one simulated kubelet per node.
var groups = []string{"csi-driver", "kubelet-sim"}

// ComponentOf is the component a process belongs to: "csi-driver" for
// csi-driver-controller and csi-driver-node-N, "kubelet-sim" for
// kubelet-sim-node-N, the name itself otherwise.
func ComponentOf(name string) string {
	for _, g := range groups {
		if strings.HasPrefix(name, g+"-") {
			return g
		}
	}
	return name
}

// key identifies one process or control group across samples.
type key struct {
	pid    int
	start  uint64
	cgroup string
}

func keyOf(s Sample) key { return key{s.PID, s.StartTicks, s.Cgroup} }

// CPU is the CPU seconds each component used between the before and after
// samples. A process in both counts its difference; a process only in
// after started in the window (a restarted component) and counts all of
// its time; a process only in before exited in the window and counts
// nothing, since what it used after the before sample is gone with it.
// Components of after with no CPU time at all are present with 0.
func CPU(before, after []Sample) map[string]float64 {
	prev := map[key]float64{}
	for _, s := range before {
		prev[keyOf(s)] = s.CPUSeconds
	}
	out := map[string]float64{}
	for _, s := range after {
		d := s.CPUSeconds
		if p, ok := prev[keyOf(s)]; ok {
			d -= p
		}
		out[s.component()] += max(d, 0)
	}
	return out
}

// Peak is a component's peak resident memory, in MiB.
type Peak struct {
	// SumMiB is the sum of its processes' peaks: an upper bound of the
	// component's peak, as the processes need not peak at the same time.
	SumMiB float64 `json:"sum"`
	// MaxProcessMiB is the largest peak of one of its processes.
	MaxProcessMiB float64 `json:"max_process"`
	// Processes is how many processes were sampled.
	Processes int `json:"processes"`
}

const mib = 1 << 20

// Memory is each component's peak memory from one set of samples (taken
// at the end of the churn: VmHWM only grows). A control group with no peak
// (a derived figure, or a kernel that keeps none) says nothing of its
// memory and is left out.
func Memory(samples []Sample) map[string]Peak {
	out := map[string]Peak{}
	for _, s := range samples {
		if s.Cgroup != "" && s.PeakRSSBytes == 0 {
			continue
		}
		c := s.component()
		p := out[c]
		m := float64(s.PeakRSSBytes) / mib
		p.SumMiB += m
		p.MaxProcessMiB = max(p.MaxProcessMiB, m)
		p.Processes++
		out[c] = p
	}
	return out
}

// Total is the sum of a map of per-key figures, summed in key order so that
// the result does not depend on map iteration (reports are compared
// byte for byte).
func Total(m map[string]float64) float64 {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t := 0.0
	for _, k := range keys {
		t += m[k]
	}
	return t
}

// Stand-ins are the components that are strandlab's own programs rather
// than the system under test: the harness (runner, detector, informers)
// and what stands in for a real cluster's parts (the simulated kubelets,
// the throttling proxy, the pinning extender, the CSI driver). Their share
// of the CPU is what the simulation costs (the harness's own CPU).
var StandIns = []string{Harness, "kubelet-sim", "apiproxy", "pin-extender", "csi-driver"}

// Share is the part of total(m) that the given keys make up, 0 to 1 (0
// when the total is 0).
func Share(m map[string]float64, keys []string) float64 {
	total := Total(m)
	if total <= 0 {
		return 0
	}
	part := map[string]float64{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			part[k] = v
		}
	}
	return Total(part) / total
}

// Counter is one reading of monotonically increasing counters by key (e.g.
// API requests by client).
type Counter map[string]float64

// Delta is after minus before per key, for the keys of after. A key whose
// counter went down was reset in between (the API server restarted): its
// after value is all that is known to have happened since, as Prometheus's
// rate() treats a reset. Keys whose delta is 0 are left out.
func Delta(before, after Counter) map[string]float64 {
	out := map[string]float64{}
	for k, a := range after {
		d := a - before[k]
		if d < 0 {
			d = a
		}
		if d > 0 {
			out[k] = d
		}
	}
	return out
}
