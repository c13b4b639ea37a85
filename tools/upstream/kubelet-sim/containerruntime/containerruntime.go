// Package containerruntime is kubelet-sim's container runtime. No container
// runs, but a pod takes the time a real runtime takes to start and stop its
// sandbox and containers: each operation's duration is drawn, seeded, from
// a histogram of the kubelet's own metric of it
// (kubelet_runtime_operations_duration_seconds, by operation_type) measured
// on kind with real kubelets and containerd. Before a started or stopped
// pod's status is written, the kubelet reads it back from the runtime (the
// PLEG's on-demand relist of the pod and GetPodStatus), and that read takes
// its time too.
//
// The timings kubelet-sim uses by default are embedded (timings.json),
// written by `strandlab runtime-timings` from kind reports; their source says
// where and when they were measured.
package containerruntime

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// The operations a pod's start and stop are made of, named as the
// kubelet's operation_type label (pkg/kubelet/kuberuntime's
// instrumentedRuntimeService).
const (
	RunPodSandbox   = "run_podsandbox"
	CreateContainer = "create_container"
	StartContainer  = "start_container"
	StopContainer   = "stop_container"
	StopPodSandbox  = "stop_podsandbox"
	// The calls of reading a pod back: kuberuntime GetPod, then
	// GetPodStatus.
	ListPodSandbox   = "list_podsandbox"
	ListContainers   = "list_containers"
	PodSandboxStatus = "podsandbox_status"
	ContainerStatus  = "container_status"
)

// Operations are the operations a Timings file must have.
var Operations = []string{RunPodSandbox, CreateContainer, StartContainer, StopContainer, StopPodSandbox,
	ListPodSandbox, ListContainers, PodSandboxStatus, ContainerStatus}

// The PLEG's periodic relist, which a Timings file may have: how long one
// takes (kubelet_pleg_relist_duration_seconds) and the time from one's
// start to the next's (kubelet_pleg_relist_interval_seconds). Each sync of a
// terminating pod waits for a relist begun after the previous sync ended.
// Only the duration is drawn (Relist): the interval follows from it, as
// upstream's timer restarts the period once a relist has ended. The
// interval's histogram is read and validated, not drawn: its default
// buckets put every interval of a kind run in (1 s, 2.5 s], where a draw
// averages 1.64 s although kind's relists came 1.06 s apart (their count
// over the churn). Without a duration kubelet-sim relists every period,
// instantly.
const (
	PLEGRelist         = "pleg_relist"
	PLEGRelistInterval = "pleg_relist_interval"
)

// APIPrefix begins the operations a Timings file may have for the
// kubelet's API requests, one per HTTP method ("api_get", "api_patch"):
// client-go's rest_client_request_duration_seconds by verb, as the real
// kubelet's clients measured them, from the throttle to the body read
// (rest.Request.request; watches are not in it). Without them kubelet-sim's
// requests take what its API server takes.
const APIPrefix = "api_"

// APIOperation is the operation of a request with the HTTP method.
func APIOperation(method string) string { return APIPrefix + strings.ToLower(method) }

// CSIVolumeOperations are the operations a Timings file may have for the
// kubelet's CSI calls that stage, publish, unpublish and unstage a volume:
// pkg/volume/csi's csi_operations_seconds by method, as the real kubelet
// measured them (its gRPC call, the driver's mount or unmount inside it).
// kubelet-sim holds its own calls of these methods to them
// (tools/upstream/kubelet-sim/csilatency). The driver's other calls
// (NodeGetCapabilities, NodeGetInfo) are not held: their histogram's first
// bucket, 0-100 ms, holds almost all of them, and the kind kubelets' logs
// put them near 0 (UnmountDevice, a capabilities call and an unstage, took
// no longer than the unstage alone), where a draw would put them at 50 ms.
var CSIVolumeOperations = []string{"csi_nodestagevolume", "csi_nodepublishvolume", "csi_nodeunpublishvolume", "csi_nodeunstagevolume"}

// CSIOperation is the operation of a CSI call with the gRPC method
// ("NodeUnstageVolume" -> "csi_nodeunstagevolume").
func CSIOperation(method string) string { return "csi_" + strings.ToLower(method) }

// Histogram is a Prometheus histogram of one operation's duration.
// Counts[i] operations took at most Bounds[i] seconds and more than
// Bounds[i-1] (0 for i = 0); the last count, one past the bounds, took
// more than the last bound.
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

// Timings are the histograms kubelet-sim draws from.
type Timings struct {
	// Source says where the histograms were measured (provider, kubelet
	// and containerd versions, profile, date, operations).
	Source     string               `json:"source"`
	Operations map[string]Histogram `json:"operations"`
}

// Validate checks that every operation has a histogram with at least one
// operation in it, and bounds that increase.
func (t *Timings) Validate() error {
	for op, h := range t.Operations {
		if op != PLEGRelist && op != PLEGRelistInterval && !strings.HasPrefix(op, APIPrefix) && !slices.Contains(CSIVolumeOperations, op) {
			continue
		}
		if err := validate(op, h); err != nil {
			return err
		}
	}
	for _, op := range Operations {
		h, ok := t.Operations[op]
		if !ok {
			return fmt.Errorf("operations.%s: missing", op)
		}
		if err := validate(op, h); err != nil {
			return err
		}
	}
	return nil
}

// validate checks one operation's histogram: one count more than bounds,
// bounds positive, finite and increasing, at least one operation.
func validate(op string, h Histogram) error {
	if len(h.Bounds) == 0 || len(h.Counts) != len(h.Bounds)+1 {
		return fmt.Errorf("operations.%s: %d bounds and %d counts; want one count more than bounds", op, len(h.Bounds), len(h.Counts))
	}
	for i, b := range h.Bounds {
		if b <= 0 || math.IsInf(b, 0) || math.IsNaN(b) || (i > 0 && b <= h.Bounds[i-1]) {
			return fmt.Errorf("operations.%s: bounds_seconds must be positive, finite and increasing (%v)", op, h.Bounds)
		}
	}
	if h.Total() == 0 {
		return fmt.Errorf("operations.%s: no operation counted", op)
	}
	return nil
}

//go:embed timings.json
var embedded []byte

// Default returns the embedded timings measured on kind.
func Default() (*Timings, error) {
	return parse(embedded, "the embedded timings.json")
}

// Load reads timings from a file.
func Load(path string) (*Timings, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parse(b, path)
}

func parse(b []byte, name string) (*Timings, error) {
	var t Timings
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &t, nil
}

// Draw returns a duration distributed as h: a bucket chosen with its
// share of the operations, then a point in it, uniform in the logarithm
// (the kubelet's buckets grow by a factor, so that is how they are meant to
// be read), or uniform in the first bucket, which starts at 0. An
// operation beyond the last bound counts as the last bound: the histogram
// says no more about it.
func Draw(h Histogram, rng *rand.Rand) time.Duration {
	total := h.Total()
	if total == 0 {
		return 0
	}
	k := rng.Uint64N(total)
	i := 0
	for ; i < len(h.Counts)-1 && k >= h.Counts[i]; i++ {
		k -= h.Counts[i]
	}
	var s float64
	switch {
	case i >= len(h.Bounds):
		s = h.Bounds[len(h.Bounds)-1]
	case i == 0:
		s = rng.Float64() * h.Bounds[0]
	default:
		lo, hi := math.Log(h.Bounds[i-1]), math.Log(h.Bounds[i])
		s = math.Exp(lo + rng.Float64()*(hi-lo))
	}
	return time.Duration(s * float64(time.Second))
}

// Runtime spends a pod's runtime operations' time. A nil *Runtime is an
// instant runtime (kubelet-sim --runtime-timings=none).
type Runtime struct {
	timings *Timings
	// sleep waits d or until ctx ends; tests record instead of waiting.
	sleep func(ctx context.Context, d time.Duration) error

	mu  sync.Mutex
	rng *rand.Rand
	// apiRNG draws the API requests' times apart from rng, so that a
	// timings file with them leaves the runtime's own draws as they were;
	// csiRNG the CSI calls', for the same reason.
	apiRNG *rand.Rand
	csiRNG *rand.Rand
}

// New returns a runtime drawing from timings with a generator seeded by
// seed (kubelet-sim: the run's seed and the node's index, so two nodes of
// one run draw differently and a run repeated with its seed draws alike).
func New(timings *Timings, seed uint64) (*Runtime, error) {
	if err := timings.Validate(); err != nil {
		return nil, err
	}
	return &Runtime{timings: timings, sleep: Sleep,
		rng:    rand.New(rand.NewPCG(seed, 0x6b7562656c6574)),
		apiRNG: rand.New(rand.NewPCG(seed, 0x617069)),
		csiRNG: rand.New(rand.NewPCG(seed, 0x637369))}, nil
}

// Source is where the timings were measured ("" for the instant runtime).
func (r *Runtime) Source() string {
	if r == nil {
		return ""
	}
	return r.timings.Source
}

func (r *Runtime) draw(op string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Draw(r.timings.Operations[op], r.rng)
}

// APIRequest draws how long one API request with the HTTP method takes a
// real kubelet. ok is false when the timings have no such requests (or the
// runtime is instant): the request takes what it takes.
func (r *Runtime) APIRequest(method string) (d time.Duration, ok bool) {
	if r == nil {
		return 0, false
	}
	return r.drawWith(APIOperation(method), r.apiRNG)
}

// drawWith draws op with rng; ok is false when the timings have no op.
func (r *Runtime) drawWith(op string, rng *rand.Rand) (time.Duration, bool) {
	h, ok := r.timings.Operations[op]
	if !ok {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return Draw(h, rng), true
}

// APIRequests is whether the timings have any API request's time.
func (r *Runtime) APIRequests() bool {
	if r == nil {
		return false
	}
	for op := range r.timings.Operations {
		if strings.HasPrefix(op, APIPrefix) {
			return true
		}
	}
	return false
}

// CSICall draws how long one CSI call of the gRPC method takes a real
// kubelet. ok is false when the method is not one of CSIVolumeOperations,
// the timings have no such calls, or the runtime is instant: the call takes
// what it takes.
func (r *Runtime) CSICall(method string) (d time.Duration, ok bool) {
	if r == nil {
		return 0, false
	}
	op := CSIOperation(method)
	if !slices.Contains(CSIVolumeOperations, op) {
		return 0, false
	}
	return r.drawWith(op, r.csiRNG)
}

// CSICalls is whether the timings have any of CSIVolumeOperations.
func (r *Runtime) CSICalls() bool {
	if r == nil {
		return false
	}
	for _, op := range CSIVolumeOperations {
		if _, ok := r.timings.Operations[op]; ok {
			return true
		}
	}
	return false
}

// Relist draws how long one periodic PLEG relist takes. ok is false when
// the timings have no relists (or the runtime is instant): the caller keeps
// the kubelet's fixed period and instant relists.
func (r *Runtime) Relist() (duration time.Duration, ok bool) {
	if r == nil {
		return 0, false
	}
	d, ok := r.timings.Operations[PLEGRelist]
	if !ok {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return Draw(d, r.rng), true
}

// StartPod spends the time to start a pod once its volumes are mounted, as
// kuberuntime's SyncPod does: the sandbox (RunPodSandbox, the network
// included), then each container created and started in turn.
func (r *Runtime) StartPod(ctx context.Context, containers int) error {
	if r == nil {
		return nil
	}
	d := r.draw(RunPodSandbox)
	for range containers {
		d += r.draw(CreateContainer) + r.draw(StartContainer)
	}
	return r.sleep(ctx, d)
}

// StopPod spends the time to stop a running pod, as kuberuntime's KillPod
// does: its containers are stopped at once, each in a goroutine
// (killContainersWithSyncResult), so the slowest one counts, then the
// sandbox.
func (r *Runtime) StopPod(ctx context.Context, containers int) error {
	if r == nil {
		return nil
	}
	var d time.Duration
	for range containers {
		d = max(d, r.draw(StopContainer))
	}
	return r.sleep(ctx, d+r.draw(StopPodSandbox))
}

// ReadBack spends the time the kubelet takes to read a pod back from the
// runtime before it writes the pod's status: with v1.37's on-demand relist
// (PLEGOnDemandRelist, GA: Kubelet.SyncPod asks GenericPLEG.relistPod for
// the pod right after a sync that started containers, so Running does not
// wait for the 1 s periodic relist) GetPod lists the sandboxes and the
// containers, and GetPodStatus reads the sandbox's and each container's
// status; syncTerminatingPod reads the stopped pod with GetPodStatus the
// same way.
func (r *Runtime) ReadBack(ctx context.Context, containers int) error {
	if r == nil {
		return nil
	}
	d := r.draw(ListPodSandbox) + r.draw(ListContainers) + r.draw(PodSandboxStatus)
	for range containers {
		d += r.draw(ContainerStatus)
	}
	return r.sleep(ctx, d)
}

// Sleep waits d, or until ctx ends (its error then); the runtime's and the
// API requests' drawn times are spent with it.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
