// Package runtimeops reads how long real kubelets' container runtime takes
// to start and stop pods: the kubelet's histogram of its CRI calls
// (kubelet_runtime_operations_duration_seconds, by operation_type), read
// from each node's /metrics around a churn. The kind reports carry it, and
// it becomes the timings kubelet-sim draws its simulated runtime's
// durations from (tools/upstream/kubelet-sim/containerruntime), with the
// kubelets' API requests beside them. Pure: metrics text in, histograms
// out.
package runtimeops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Metric is the kubelet's histogram of its container runtime calls
// (pkg/kubelet/metrics RuntimeOperationsDuration).
const Metric = "kubelet_runtime_operations_duration_seconds"

// The operations a pod's start and stop are made of (the metric's
// operation_type), the ones kubelet-sim draws.
const (
	RunPodSandbox   = "run_podsandbox"
	CreateContainer = "create_container"
	StartContainer  = "start_container"
	StopContainer   = "stop_container"
	StopPodSandbox  = "stop_podsandbox"
	// Reading a pod back (the PLEG's relist of the pod, GetPodStatus).
	ListPodSandbox   = "list_podsandbox"
	ListContainers   = "list_containers"
	PodSandboxStatus = "podsandbox_status"
	ContainerStatus  = "container_status"
)

// The PLEG's periodic relist, read as two more operations: how long a
// relist takes, and the time from one relist's start to the next's (the
// period counts from the end of a relist, and on-demand relists queue in
// the same loop, so under load the interval grows past the period). A
// terminating pod's syncs each wait for a relist begun after the previous
// one ended (podCache.GetNewerThan).
const (
	PLEGRelist         = "pleg_relist"
	PLEGRelistInterval = "pleg_relist_interval"
)

// The kubelet's own delays around the runtime's calls, read as two more
// operations. pod_worker_start is the kubelet seeing a pod → its pod worker
// starting (Kubelet.SyncPod, on a pod's first sync). pod_status_sync is NOT
// one status write's queueing: the status manager stamps a pod's status
// with the time of the pod's first status and keeps that stamp on every
// later one (status.manager.updateStatusInternal copies cachedStatus.at;
// v1.37.2), so each write observes the time since the pod's first status —
// its Pending write's queueing, then ContainerCreating → Running, then its
// whole life at the terminal write. A mixture, so it is read and shown, but
// kubelet-sim does not draw a status write's delay from it.
const (
	PodStatusSync  = "pod_status_sync"
	PodWorkerStart = "pod_worker_start"
)

// KubeletMetrics are the histograms read beside the runtime's, by the
// operation they are read as: the PLEG's relists (pkg/kubelet/metrics
// PLEGRelistDuration, PLEGRelistInterval) and the kubelet's own delays
// (PodStatusSyncDuration, PodWorkerStartDuration).
var KubeletMetrics = map[string]string{
	"kubelet_pleg_relist_duration_seconds":      PLEGRelist,
	"kubelet_pleg_relist_interval_seconds":      PLEGRelistInterval,
	"kubelet_pod_status_sync_duration_seconds":  PodStatusSync,
	"kubelet_pod_worker_start_duration_seconds": PodWorkerStart,
}

// KubeletLatencies are histograms read beside the runtime's, one operation
// per value of a label: how long the kubelet's own API requests took, by
// verb, from its side (client-go's rest_client_request_duration_seconds),
// its CSI calls, by method (pkg/volume/csi csi_operations_seconds), and its
// volume operations, by name (pkg/volume/util
// storage_operation_duration_seconds). On kind they say how slow the API
// server and the CSI driver are for a real kubelet. kubelet-sim draws its
// API requests' times from the first and its CSI volume calls' from the
// second (CSIVolumeOperations; NewTimings keeps them). The rest are read and
// shown, not drawn: their first bucket ends at 100 ms, where almost every
// call falls, so they cannot tell a 2 ms call from a 90 ms one
// (docs/kubelet-sim.md, "API requests").
var KubeletLatencies = map[string]LabelledMetric{
	"rest_client_request_duration_seconds": {Label: "verb", Prefix: APIPrefix},
	"csi_operations_seconds":               {Label: "method_name", Prefix: "csi_"},
	"storage_operation_duration_seconds":   {Label: "operation_name", Prefix: "storage_"},
}

// APIPrefix begins the operations of the kubelet's API requests, by
// HTTP method: kubelet-sim draws each request's time from them
// (tools/upstream/kubelet-sim/apilatency), when its timings have them.
const APIPrefix = "api_"

// CSIVolumeOperations are the CSI calls kubelet-sim holds to their measured
// times: a volume's stage, publish, unpublish and unstage, real mounts and
// unmounts on kind, whose first bucket the kind kubelets' logs put at
// 57-86 ms at the median (docs/kind.md, "The volume's release, stage by
// stage"). Its own copy: tools/upstream/kubelet-sim/containerruntime.
var CSIVolumeOperations = []string{"csi_nodestagevolume", "csi_nodepublishvolume", "csi_nodeunpublishvolume", "csi_nodeunstagevolume"}

// LabelledMetric names the operations of a labelled histogram: Prefix and
// the label's value, its last path element (a gRPC method's name), in
// lower case ("api_get", "csi_nodestagevolume", "storage_volume_mount").
type LabelledMetric struct {
	Label, Prefix string
}

// Operation is the operation a value of the label is read as.
func (l LabelledMetric) Operation(value string) string {
	if i := strings.LastIndex(value, "/"); i >= 0 {
		value = value[i+1:]
	}
	return l.Prefix + strings.ToLower(value)
}

// PodOperations are the operations kubelet-sim draws: a pod's start and
// stop, and reading it back.
var PodOperations = []string{RunPodSandbox, CreateContainer, StartContainer, StopContainer, StopPodSandbox,
	ListPodSandbox, ListContainers, PodSandboxStatus, ContainerStatus}

// Histogram is one operation's durations: Counts[i] took at most
// Bounds[i] seconds and more than Bounds[i-1] (0 for i = 0); the last
// count, one past the bounds, took longer than the last bound. The JSON is
// kubelet-sim's (containerruntime.Histogram).
type Histogram struct {
	Bounds []float64 `json:"bounds_seconds"`
	Counts []uint64  `json:"counts"`
}

// Total is the number of operations in h.
func (h Histogram) Total() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Ops are histograms by operation.
type Ops map[string]Histogram

// Add is the operations of a and b together (two nodes, two runs). Both
// must bucket an operation alike.
func Add(a, b Ops) (Ops, error) {
	out := maps.Clone(a)
	if out == nil {
		out = Ops{}
	}
	for op, h := range b {
		old, ok := out[op]
		if !ok {
			out[op] = Histogram{Bounds: slices.Clone(h.Bounds), Counts: slices.Clone(h.Counts)}
			continue
		}
		sum, err := add(old, h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		out[op] = sum
	}
	return out, nil
}

// Sub is what happened between the readings before and after of one
// kubelet. A counter that went backwards means the kubelet restarted: its
// operation is left out (the reading cannot tell what happened between).
func Sub(after, before Ops) Ops {
	out := Ops{}
	for op, a := range after {
		b, ok := before[op]
		if !ok {
			out[op] = Histogram{Bounds: slices.Clone(a.Bounds), Counts: slices.Clone(a.Counts)}
			continue
		}
		if !slices.Equal(a.Bounds, b.Bounds) || len(a.Counts) != len(b.Counts) {
			continue
		}
		d := Histogram{Bounds: slices.Clone(a.Bounds), Counts: make([]uint64, len(a.Counts))}
		restarted := false
		for i := range a.Counts {
			if a.Counts[i] < b.Counts[i] {
				restarted = true
				break
			}
			d.Counts[i] = a.Counts[i] - b.Counts[i]
		}
		if !restarted && d.Total() > 0 {
			out[op] = d
		}
	}
	return out
}

func add(a, b Histogram) (Histogram, error) {
	if !slices.Equal(a.Bounds, b.Bounds) || len(a.Counts) != len(b.Counts) {
		return Histogram{}, fmt.Errorf("different buckets (%v and %v)", a.Bounds, b.Bounds)
	}
	out := Histogram{Bounds: slices.Clone(a.Bounds), Counts: slices.Clone(a.Counts)}
	for i, c := range b.Counts {
		out.Counts[i] += c
	}
	return out, nil
}

// Quantile is the q-quantile of h, read as kubelet-sim draws from it:
// linearly inside the first bucket (which starts at 0), in the logarithm
// inside the others (the kubelet's buckets grow by a factor), and the last
// bound for what is beyond it.
func Quantile(h Histogram, q float64) time.Duration {
	total := h.Total()
	if total == 0 || q < 0 || q > 1 || len(h.Bounds) == 0 {
		return 0
	}
	rank := q * float64(total)
	var seen float64
	for i, c := range h.Counts {
		if c == 0 || (seen+float64(c) < rank && i < len(h.Counts)-1) {
			seen += float64(c)
			continue
		}
		f := min(max((rank-seen)/float64(c), 0), 1)
		var s float64
		switch {
		case i >= len(h.Bounds):
			s = h.Bounds[len(h.Bounds)-1]
		case i == 0:
			s = f * h.Bounds[0]
		default:
			lo, hi := math.Log(h.Bounds[i-1]), math.Log(h.Bounds[i])
			s = math.Exp(lo + f*(hi-lo))
		}
		return time.Duration(s * float64(time.Second))
	}
	return time.Duration(h.Bounds[len(h.Bounds)-1] * float64(time.Second))
}

// Timings is the file kubelet-sim draws its runtime from
// (containerruntime.Timings, --runtime-timings): the pod operations'
// histograms, the PLEG's relists and the API requests' where measured, and
// where they were measured.
type Timings struct {
	Source     string `json:"source"`
	Operations Ops    `json:"operations"`
}

// NewTimings keeps the pod operations of ops, each of which must have been
// seen at least once, and the PLEG's relists, the API requests and the CSI
// volume calls where they were (kubelet-sim keeps its fixed relist period,
// and its requests and calls take what they take, without them).
func NewTimings(source string, ops Ops) (Timings, error) {
	t := Timings{Source: source, Operations: Ops{}}
	for _, op := range PodOperations {
		h, ok := ops[op]
		if !ok || h.Total() == 0 {
			return Timings{}, fmt.Errorf("no %s operation measured: kubelet-sim needs every one of %v", op, PodOperations)
		}
		t.Operations[op] = h
	}
	if stop, trimmed := withoutGCSandboxStops(t.Operations[StopPodSandbox], t.Operations[RunPodSandbox].Total()); trimmed > 0 {
		t.Operations[StopPodSandbox] = stop
		t.Source += fmt.Sprintf("; %s without its %d fastest calls (the container GC's stops of sandboxes already stopped, one for each pod stopped)", StopPodSandbox, trimmed)
	}
	for op, h := range ops {
		drawn := op == PLEGRelist || op == PLEGRelistInterval || strings.HasPrefix(op, APIPrefix) || slices.Contains(CSIVolumeOperations, op)
		if drawn && h.Total() > 0 {
			t.Operations[op] = h
		}
	}
	return t, nil
}

// withoutGCSandboxStops is the stop_podsandbox histogram of the pods'
// terminations alone, with its fastest calls taken out until there are as
// many as sandboxes were started (pods churn in and out, so as many were
// stopped). The kubelet stops a sandbox twice: when it kills the pod
// (kuberuntime's killPodWithSyncResult, under the load of the stop) and
// again when the container GC removes it (containerGC.removeSandbox stops
// it first "to guard against the rare cases" it runs), on a sandbox
// already stopped, which returns at once. The metric cannot tell the two
// apart; drawn from both, kubelet-sim's sandbox stop took about half of
// what a real kubelet's terminating sync spends on it (docs/kind.md, "The
// old pod's termination, stage by stage").
func withoutGCSandboxStops(h Histogram, started uint64) (Histogram, uint64) {
	total := h.Total()
	if started == 0 || total <= started {
		return h, 0
	}
	out := Histogram{Bounds: slices.Clone(h.Bounds), Counts: slices.Clone(h.Counts)}
	excess := total - started
	for i := 0; excess > 0 && i < len(out.Counts); i++ {
		n := min(out.Counts[i], excess)
		out.Counts[i] -= n
		excess -= n
	}
	return out, total - started
}

// DecodeTimings reads a timings file's contents (--runtime-timings) and
// checks what kubelet-sim will need of it: every pod operation, each with
// one count more than bounds and at least one operation counted. kubelet-sim
// checks it again when it loads it (containerruntime.Timings.Validate); this
// is the check that refuses a bad file before any cluster starts.
func DecodeTimings(data []byte) (Timings, error) {
	var t Timings
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Timings{}, fmt.Errorf("not a timings file (strandlab runtime-timings writes one): %w", err)
	}
	for _, op := range PodOperations {
		h, ok := t.Operations[op]
		switch {
		case !ok:
			return Timings{}, fmt.Errorf("operations.%s: missing", op)
		case len(h.Bounds) == 0 || len(h.Counts) != len(h.Bounds)+1:
			return Timings{}, fmt.Errorf("operations.%s: %d bounds and %d counts; want one count more than bounds", op, len(h.Bounds), len(h.Counts))
		case h.Total() == 0:
			return Timings{}, fmt.Errorf("operations.%s: no operation counted", op)
		}
	}
	return t, nil
}
