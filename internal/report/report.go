// Package report is the contract output of a run: report.json and report.md
// under _output/reports/<run-id>/, copied to _output/reports/latest/. The
// JSON shape is a contract (docs/design.md, "Contracts"); other tools read it.
package report

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/detector"
	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/runtimeops"
	"github.com/strandlab/strandlab/internal/safefile"
	"github.com/strandlab/strandlab/internal/stats"
	"github.com/strandlab/strandlab/internal/timeline"
	"github.com/strandlab/strandlab/internal/usage"
)

// Report is report.json.
type Report struct {
	// SchemaVersion is report.json's format (SchemaVersion); Write stamps
	// it, Read refuses a newer one. Reports written before it existed
	// carry none (0) and are read as version 1 when every field is known.
	SchemaVersion       int                             `json:"schema_version"`
	RunID               string                          `json:"run_id"`
	Scenario            string                          `json:"scenario"`
	Provider            string                          `json:"provider"`
	Seed                int64                           `json:"seed"`
	Seeds               []int64                         `json:"seeds,omitempty"`
	KubernetesVersion   string                          `json:"kubernetes_version"`
	ClusterStartSeconds float64                         `json:"cluster_start_seconds"`
	Components          map[string]provenance.Component `json:"components"`
	Builds              []Build                         `json:"builds"`
	StartedAt           time.Time                       `json:"started_at"`
	FinishedAt          time.Time                       `json:"finished_at"`
	// Interrupted is true when the run was stopped (Ctrl-C) before all
	// cycles; InterruptedDuring names the phase it was stopped in
	// (provider preparation, controller build, cluster start, workload
	// start, churn, teardown).
	Interrupted       bool   `json:"interrupted"`
	InterruptedDuring string `json:"interrupted_during,omitempty"`
	// Failure is the error that ended the run before all cycles (not an
	// interrupt), and FailedDuring the phase it ended in: without them a
	// run that failed reads as one still in progress.
	Failure      string `json:"failure,omitempty"`
	FailedDuring string `json:"failed_during,omitempty"`
	// Complete is false while a run is still writing its report.
	Complete bool `json:"complete"`
	// Seeds (distinct, sorted; Seed is then the first input's) and
	// MergedFrom (run ids) are what a merged report pools (merge.go); Notes
	// say where its figures are approximate. All absent from a run's report.
	MergedFrom []string `json:"merged_from,omitempty"`
	Notes      []string `json:"notes,omitempty"`
	// RunProvenance is what the figures rest on besides the components:
	// the harness's build, the scenario file's hash and the machine.
	// Absent in reports written before it was recorded. A merged report
	// keeps the first input's and, when its inputs ran on several
	// machines, lists them in Machines.
	RunProvenance *provenance.Run      `json:"run_provenance,omitempty"`
	Machines      []provenance.Machine `json:"machines,omitempty"`
	// Sequential is the comparison of a run until a verdict
	// (sequential.go): its rounds are in MergedFrom.
	Sequential *Sequential `json:"sequential,omitempty"`
}

// Build is the outcome for one controller build.
type Build struct {
	Name             string                     `json:"name"`
	Provenance       provenance.ControllerBuild `json:"provenance"`
	Cycles           int                        `json:"cycles"`
	CyclesNotRunning int                        `json:"cycles_not_running"`
	Stranded         int                        `json:"stranded"`
	// StrandedEpisodes counts the stranding episodes: a stranded cycle
	// begins one unless it continues the episode of its pod's previous
	// cycle (episodes.go; docs/design.md, "Stranding episode").
	StrandedEpisodes int        `json:"stranded_episodes"`
	SafetyViolations int        `json:"safety_violations"`
	StrandedRate     float64    `json:"stranded_rate"`
	StrandedRateCI95 [2]float64 `json:"stranded_rate_ci95"`
	// StrandedRateCI95Rounds is the 95% interval of StrandedRate with the
	// rounds of the churn as the independent units instead of the cycles
	// (episodes.go); absent with fewer than two units.
	StrandedRateCI95Rounds *[2]float64 `json:"stranded_rate_ci95_rounds,omitempty"`
	// StrandedRateCI95Runs, in a merged report, is the same with each
	// pooled run as one unit; absent with fewer than two runs.
	StrandedRateCI95Runs *[2]float64 `json:"stranded_rate_ci95_runs,omitempty"`
	// Rounds are the per-round counts the rounds interval is computed from
	// and a merge pools; absent when the report has no per-round counts.
	Rounds          []Round `json:"rounds,omitempty"`
	CyclesPerSecond float64 `json:"cycles_per_second"`
	// WorkloadStartSeconds is how long the workload took, once created, to
	// have every pod Running (before the churn); absent in merged reports.
	WorkloadStartSeconds float64 `json:"workload_start_seconds,omitempty"`
	// CreatedToRunningMS: the replacement pod first seen (created) →
	// Running; CycleStepsMS splits it (bound → Running holds the attach).
	CreatedToRunningMS Percentiles `json:"created_to_running_ms"`
	// LegacyAttachToRunningMS is the same figure under the name schema
	// version 1 gave it (attach_to_running_ms), which it never measured:
	// read only, moved into CreatedToRunningMS by Decode.
	LegacyAttachToRunningMS *Percentiles `json:"attach_to_running_ms,omitempty"`
	DeleteToRunningMS       Percentiles  `json:"delete_to_running_ms"`
	// CycleStepsMS splits delete-to-Running into its steps, over the
	// cycles that reached Running (cycleSteps); absent when no cycle has
	// the timestamps, and in a merged report without full cycle logs.
	CycleStepsMS *CycleSteps `json:"cycle_steps_ms,omitempty"`
	// DetachMS is when the controller detached the deleted pods' volumes
	// from their old nodes, over the cycles where it did (detachSteps):
	// the intervals the attach/detach races depend on. Absent when no
	// cycle has them.
	DetachMS            *DetachSteps       `json:"detach_ms,omitempty"`
	APIRequestsPerCycle map[string]float64 `json:"api_requests_per_cycle"`
	// APIRequestsPerCycleByClient is every client's requests to the API
	// server during the churn, per cycle, by client (the API server's own
	// count; "other" for requests of no known client); absent when the
	// cluster does not tell clients apart (AddRequestsByClient).
	APIRequestsPerCycleByClient map[string]float64 `json:"api_requests_per_cycle_by_client,omitempty"`
	// CPUSecondsPerCycle is the CPU time each component used during the
	// churn, per cycle ("harness": strandlab itself), its total over the
	// components and the harness's share of it; MemoryPeakMiB each
	// component's peak resident memory at the end of the churn. From the
	// local provider's processes or the kind provider's control groups;
	// absent for a cluster whose components cannot be read here
	// (AddUsage).
	CPUSecondsPerCycle      map[string]float64    `json:"cpu_seconds_per_cycle,omitempty"`
	CPUSecondsTotalPerCycle float64               `json:"cpu_seconds_total_per_cycle,omitempty"`
	HarnessCPUShare         float64               `json:"harness_cpu_share,omitempty"`
	MemoryPeakMiB           map[string]usage.Peak `json:"memory_peak_mib,omitempty"`
	// RuntimeOps is how long the nodes' container runtime took to start
	// and stop pods during the churn, by operation, from real kubelets'
	// own metrics (kind; RuntimeOp): what kubelet-sim's runtime draws from.
	RuntimeOps           map[string]RuntimeOp `json:"runtime_ops,omitempty"`
	PinningSameNodeRatio float64              `json:"pinning_same_node_ratio"`
	Proxy                ProxyStats           `json:"proxy"`
	// CSIFaults counts the CSI calls strandlab's driver failed or slowed
	// (the scenario's csiErrors) over the build's whole cluster lifetime,
	// by "<method> <code>" ("<method> slowed" for a latency alone).
	CSIFaults  map[string]int64 `json:"csi_faults,omitempty"`
	Strandings []Stranding      `json:"strandings"`
	// SafetyFindings are the safety violations, one per episode (a
	// condition holding continuously), with evidence and timeline.
	SafetyFindings []SafetyFinding `json:"safety_findings"`
	// PhantomListings counts the phantom listings (a volume listed in a
	// node's status.volumesAttached with no attached VolumeAttachment and
	// no pod on the node needing it; not a safety violation), one per
	// episode like safety violations; PhantomFindings lists them with
	// evidence and timeline (AddPhantomListings).
	PhantomListings int             `json:"phantom_listings"`
	PhantomFindings []SafetyFinding `json:"phantom_findings,omitempty"`
	// Expectation is the scenario's outcome band for this build, checked.
	Expectation *Expectation `json:"expectation,omitempty"`
	// VersusBaseline tests the build's stranded cycles against the
	// baseline build's, SafetyVersusBaseline its safety violations
	// (compare.go). Absent for the baseline itself and when the report has
	// no baseline; recomputed from the counts whenever the report is
	// marshalled (Report.MarshalJSON).
	VersusBaseline       *Versus `json:"versus_baseline,omitempty"`
	SafetyVersusBaseline *Versus `json:"safety_versus_baseline,omitempty"`
	// PhantomVersusBaseline tests its phantom listings per cycle and
	// NotRunningVersusBaseline its cycles not running, the same way.
	PhantomVersusBaseline    *Versus `json:"phantom_versus_baseline,omitempty"`
	NotRunningVersusBaseline *Versus `json:"not_running_versus_baseline,omitempty"`
	// RoundsVersusBaseline tests the stranding episodes with the round as
	// the unit (paired rounds, sign-flip), AdjustedVersusBaseline with
	// Fisher's test on counts divided by the rounds' design effect.
	RoundsVersusBaseline   *Versus       `json:"rounds_versus_baseline,omitempty"`
	AdjustedVersusBaseline *Versus       `json:"adjusted_versus_baseline,omitempty"`
	CycleLog               []cycle.Cycle `json:"cycle_log,omitempty"`
	// ChurnWaitedOnBusySeconds is how long the churn had a free slot while
	// every pod whose cycle was next was busy: a cycle in flight on it, or
	// not ready (cycle.Result.BusyWait). Absent when it never waited, and
	// in a merged report.
	ChurnWaitedOnBusySeconds float64 `json:"churn_waited_on_busy_seconds,omitempty"`
}

// Expectation is a build's outcome held against the scenario's band.
type Expectation struct {
	Met   bool     `json:"met"`
	Unmet []string `json:"unmet,omitempty"`
}

// CycleSteps are the percentiles of a cycle's steps, each from the
// harness's own sightings (its pod watch): where a cycle's time goes, and so
// what bounds the churn's rate at a given concurrency.
type CycleSteps struct {
	// ToReplacement: the delete to the replacement pod created (the old
	// pod's termination by its kubelet, then the StatefulSet controller).
	ToReplacement Percentiles `json:"delete_to_replacement"`
	// ToBound: the replacement created to bound to a node (the scheduler's
	// queue and its extenders).
	ToBound Percentiles `json:"replacement_to_bound"`
	// ToRunning: bound to Running (attach, mount and start on the node).
	ToRunning Percentiles `json:"bound_to_running"`
	// Cycles is how many cycles the percentiles are over.
	Cycles int `json:"cycles"`
}

// cycleSteps is the CycleSteps of the cycles that reached Running with
// every step's timestamp, or nil if none has them (logs written before
// ReplacementBoundAt was recorded).
func cycleSteps(cycles []cycle.Cycle) *CycleSteps {
	var toReplacement, toBound, toRunning []time.Duration
	for _, c := range cycles {
		if c.Outcome != cycle.Running || c.DeletedAt.IsZero() || c.ReplacementSeenAt.IsZero() || c.ReplacementBoundAt.IsZero() {
			continue
		}
		runningAt := c.DeletedAt.Add(c.DeleteToRunning)
		toReplacement = append(toReplacement, c.ReplacementSeenAt.Sub(c.DeletedAt))
		toBound = append(toBound, c.ReplacementBoundAt.Sub(c.ReplacementSeenAt))
		toRunning = append(toRunning, runningAt.Sub(c.ReplacementBoundAt))
	}
	if len(toRunning) == 0 {
		return nil
	}
	return &CycleSteps{ToReplacement: percentilesMS(toReplacement), ToBound: percentilesMS(toBound),
		ToRunning: percentilesMS(toRunning), Cycles: len(toRunning)}
}

// DetachSteps are the percentiles of the cycles' detach timings
// (cycle.Cycle's DeleteToDetach and ListedToDetach).
type DetachSteps struct {
	// DeleteToDetach: the pod's delete to its volume's detach request on
	// the old node.
	DeleteToDetach Percentiles `json:"delete_to_detach"`
	// ListedToDetach: the volume's last listing in the node's
	// status.volumesAttached (the add patch) to that detach request.
	ListedToDetach Percentiles `json:"listed_to_detach"`
	// Cycles is how many cycles had a detach (DeleteToDetach);
	// ListedCycles how many of them had its listing too.
	Cycles       int `json:"cycles"`
	ListedCycles int `json:"listed_cycles"`
}

// detachSteps is the DetachSteps of the cycles with a detach, or nil.
func detachSteps(cycles []cycle.Cycle) *DetachSteps {
	var toDetach, listedToDetach []time.Duration
	for _, c := range cycles {
		if c.DeleteToDetach <= 0 {
			continue
		}
		toDetach = append(toDetach, c.DeleteToDetach)
		if c.ListedToDetach > 0 {
			listedToDetach = append(listedToDetach, c.ListedToDetach)
		}
	}
	if len(toDetach) == 0 {
		return nil
	}
	return &DetachSteps{DeleteToDetach: percentilesMS(toDetach), ListedToDetach: percentilesMS(listedToDetach),
		Cycles: len(toDetach), ListedCycles: len(listedToDetach)}
}

// Percentiles of a latency in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// ProxyStats are the throttling proxy's counters for a build.
type ProxyStats struct {
	EventsDelayed int64 `json:"events_delayed"`
	MaxQueueDepth int64 `json:"max_queue_depth"`
	// APIErrors is how many requests the proxy answered with an injected
	// error (proxy.apiErrors), since it started, as EventsDelayed.
	APIErrors int64 `json:"api_errors,omitempty"`
	// WatchLag is, per watched resource, how long the controller's watch
	// events waited at the proxy during the churn, after they were due,
	// for the controller to read them (fault.Counters.WatchLag): the lag
	// of its informers that the proxy can see. Events a rule held back
	// count from their release.
	WatchLag map[string]WatchLag `json:"watch_lag,omitempty"`
}

// WatchLag is one watched resource's lag at the proxy: how many events, the
// median and 99th percentile (read inside the histogram's buckets,
// runtimeops.Quantile) and the histogram, which merge pools.
type WatchLag struct {
	Events    uint64               `json:"events"`
	P50MS     float64              `json:"p50_ms"`
	P99MS     float64              `json:"p99_ms"`
	Histogram runtimeops.Histogram `json:"histogram"`
}

// AttachDetachWatches are the resources the attach/detach controller's
// informers watch (NewAttachDetachController in kubernetes'
// pkg/controller/volume/attachdetach takes these informers), in the order
// the tables list them. The proxy times every resource kube-controller-manager
// watches; the tables show these, the report keeps them all.
var AttachDetachWatches = []string{"nodes", "pods", "volumeattachments", "persistentvolumeclaims", "persistentvolumes", "csinodes", "csidrivers"}

// AttachDetachWatchLagKeys are the resources of AttachDetachWatches for
// which has is true, in AttachDetachWatches' order.
func AttachDetachWatchLagKeys(has func(resource string) bool) []string {
	var out []string
	for _, r := range AttachDetachWatches {
		if has(r) {
			out = append(out, r)
		}
	}
	return out
}

// setWatchLag fills p's watch lag from its histograms by resource;
// resources without events are left out.
func setWatchLag(p *ProxyStats, lags runtimeops.Ops) {
	p.WatchLag = figuresOf(lags, func(n uint64, h runtimeops.Histogram) WatchLag {
		return WatchLag{Events: n, Histogram: h, P50MS: quantileMS(h, 0.5), P99MS: quantileMS(h, 0.99)}
	})
}

// lagHistograms are the proxy counters' watch lag histograms, for
// runtimeops's arithmetic.
func lagHistograms(c fault.Counters) runtimeops.Ops {
	out := runtimeops.Ops{}
	for resource, h := range c.WatchLag {
		out[resource] = runtimeops.Histogram(h)
	}
	return out
}

// watchLagHistograms are the histograms of p's watch lag.
func watchLagHistograms(p ProxyStats) runtimeops.Ops {
	return histogramsOf(p.WatchLag, func(l WatchLag) runtimeops.Histogram { return l.Histogram })
}

// figuresOf is a figure (made by of) for each histogram of hs with events,
// by the same key; nil when none has any.
func figuresOf[F any](hs runtimeops.Ops, of func(n uint64, h runtimeops.Histogram) F) map[string]F {
	var out map[string]F
	for k, h := range hs {
		n := h.Total()
		if n == 0 {
			continue
		}
		if out == nil {
			out = map[string]F{}
		}
		out[k] = of(n, h)
	}
	return out
}

// histogramsOf are the histograms of figures, by the same key.
func histogramsOf[F any](figures map[string]F, histogram func(F) runtimeops.Histogram) runtimeops.Ops {
	out := runtimeops.Ops{}
	for k, f := range figures {
		out[k] = histogram(f)
	}
	return out
}

// quantileMS is h's q-quantile in milliseconds (runtimeops.Quantile).
func quantileMS(h runtimeops.Histogram, q float64) float64 {
	return float64(runtimeops.Quantile(h, q)) / 1e6
}

// Stranding is one stranded volume with the timeline that produced it.
type Stranding struct {
	Cycle  int    `json:"cycle"`
	Pod    string `json:"pod"`
	Node   string `json:"node"`
	Volume string `json:"volume"`
	// VolumeAttachment is the attachment that is attached while the volume
	// is absent from the node's status.
	VolumeAttachment string  `json:"volume_attachment,omitempty"`
	DetectedAfterMS  float64 `json:"detected_after_ms"`
	// EpisodeCycle is the cycle whose stranding began this one's episode:
	// the stranding's own cycle, or an earlier cycle of the same pod when
	// it continues that episode (docs/design.md, "Stranding episode").
	EpisodeCycle int             `json:"episode_cycle"`
	Timeline     []TimelineEntry `json:"timeline"`
	// RunID is the run the stranding came from, in a merged report.
	RunID string `json:"run_id,omitempty"`
}

// SafetyFinding is one safety violation with the timeline that led to it.
type SafetyFinding struct {
	detector.Finding
	// Timeline's t_ms is relative to the violation's start (Since).
	Timeline []TimelineEntry `json:"timeline,omitempty"`
	// RunID is the run the violation came from, in a merged report.
	RunID string `json:"run_id,omitempty"`
}

// SafetyFindingOf adds the detector's verdict to what the API and the proxy
// showed around the violation and makes the times relative to its start.
// A phantom listing (not a safety violation) is built the same way.
func SafetyFindingOf(f detector.Finding, seen []timeline.Entry) SafetyFinding {
	begins := fmt.Sprintf("safety violation (%s) begins: %s", f.Kind, f.Evidence)
	if f.Kind == detector.PhantomListing {
		begins = "phantom listing begins: " + f.Evidence
	}
	entries := append(slices.Clone(seen), timeline.Entry{Time: f.Since, Source: timeline.Detector, Event: begins})
	return SafetyFinding{Finding: f, Timeline: relative(entries, f.Since)}
}

// relative sorts entries by time and expresses them in ms since t0.
func relative(entries []timeline.Entry, t0 time.Time) []TimelineEntry {
	slices.SortStableFunc(entries, func(a, b timeline.Entry) int { return a.Time.Compare(b.Time) })
	out := make([]TimelineEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, TimelineEntry{TMS: float64(e.Time.Sub(t0).Microseconds()) / 1000, Source: e.Source, Event: e.Event})
	}
	return out
}

// TimelineEntry is one event of a stranding's or safety violation's timeline.
type TimelineEntry struct {
	TMS    float64 `json:"t_ms"`
	Source string  `json:"source"`
	Event  string  `json:"event"`
}

// BuildFromCycles summarises the cycles of one build. Cycle-level facts
// the churn runner cannot know yet (strandings, proxy counters, API request
// counts) are filled in by their own components.
func BuildFromCycles(name string, prov provenance.ControllerBuild, res cycle.Result, safety []SafetyFinding) Build {
	b := Build{Name: name, Provenance: prov, Cycles: len(res.Cycles),
		APIRequestsPerCycle: map[string]float64{}, Strandings: []Stranding{}, CycleLog: res.Cycles}
	var toRunning, deleteToRunning []time.Duration
	same, moved := 0, 0
	b.SafetyViolations = len(safety)
	b.SafetyFindings = append([]SafetyFinding{}, safety...)
	slices.SortFunc(b.SafetyFindings, func(x, y SafetyFinding) int { return x.Since.Compare(y.Since) })
	b.Strandings, b.StrandedEpisodes, b.Rounds = strandingEpisodes(res.Cycles)
	for _, c := range res.Cycles {
		if c.Outcome == cycle.Stranded {
			b.Stranded++
			continue
		}
		if c.Outcome != cycle.Running {
			b.CyclesNotRunning++
			continue
		}
		toRunning = append(toRunning, c.CreateToRunning)
		deleteToRunning = append(deleteToRunning, c.DeleteToRunning)
		if c.NewNode == c.OldNode {
			same++
		} else {
			moved++
		}
	}
	if same+moved > 0 {
		b.PinningSameNodeRatio = float64(same) / float64(same+moved)
	}
	setStrandedRates(&b)
	if res.Elapsed > 0 {
		b.CyclesPerSecond = float64(b.Cycles) / res.Elapsed.Seconds()
	}
	b.ChurnWaitedOnBusySeconds = res.BusyWait.Seconds()
	b.CreatedToRunningMS = percentilesMS(toRunning)
	b.DeleteToRunningMS = percentilesMS(deleteToRunning)
	b.CycleStepsMS = cycleSteps(res.Cycles)
	b.DetachMS = detachSteps(res.Cycles)
	return b
}

// strandingOf is a stranded cycle's report entry; the timeline is in
// milliseconds from the delete that started the cycle, merged from the
// runner's steps, the detector's verdicts and what the API and the proxy saw
// (c.Timeline).
func strandingOf(c cycle.Cycle) Stranding {
	f := c.Stranding
	entries := []timeline.Entry{{Time: c.DeletedAt, Source: timeline.Runner, Event: fmt.Sprintf("deleted pod %s (on %s)", c.Pod, c.OldNode)}}
	if !c.ReplacementSeenAt.IsZero() {
		entries = append(entries, timeline.Entry{Time: c.ReplacementSeenAt, Source: timeline.Runner, Event: "replacement pod seen"})
	}
	if !c.ReplacementBoundAt.IsZero() {
		entries = append(entries, timeline.Entry{Time: c.ReplacementBoundAt, Source: timeline.Runner, Event: "replacement pod seen bound to " + c.NewNode})
	}
	entries = append(entries, c.Timeline...)
	entries = append(entries,
		timeline.Entry{Time: f.Since, Source: timeline.Detector, Event: "stranded: " + f.Evidence},
		timeline.Entry{Time: c.DetectedAt, Source: timeline.Detector, Event: "still stranded past the threshold: counted"})
	return Stranding{Cycle: c.Index, EpisodeCycle: c.Index, Pod: f.Pod, Node: f.Node, Volume: f.Volume, VolumeAttachment: f.VolumeAttachment,
		DetectedAfterMS: float64(c.DetectedAt.Sub(c.DeletedAt).Microseconds()) / 1000, Timeline: relative(entries, c.DeletedAt)}
}

// AddPhantomListings puts the build's phantom listings (one per episode,
// from SafetyFindingOf) in its report, oldest first.
func AddPhantomListings(b *Build, phantoms []SafetyFinding) {
	b.PhantomListings = len(phantoms)
	b.PhantomFindings = slices.SortedStableFunc(slices.Values(phantoms), func(x, y SafetyFinding) int { return x.Since.Compare(y.Since) })
}

// AddProxyCounters fills the build's controller request counts per cycle
// (requests during the churn / cycles) and the proxy's figures (over the
// build's whole cluster lifetime, startup included) from the proxy's
// counters before and after the churn. The watch lag is the churn's.
func AddProxyCounters(b *Build, before, after fault.Counters) {
	if b.Cycles > 0 {
		for k, n := range after.Requests {
			if d := n - before.Requests[k]; d > 0 {
				b.APIRequestsPerCycle[k] = float64(d) / float64(b.Cycles)
			}
		}
	}
	b.Proxy = ProxyStats{EventsDelayed: after.EventsDelayed, MaxQueueDepth: after.MaxQueueDepth, APIErrors: after.APIErrors}
	setWatchLag(&b.Proxy, runtimeops.Sub(lagHistograms(after), lagHistograms(before)))
}

// AddCSIFaults counts the CSI driver's journal of injected faults into the
// build (Build.CSIFaults).
func AddCSIFaults(b *Build, journal []fault.JournalEntry) {
	for _, j := range journal {
		if j.Kind != fault.JournalCSIError {
			continue
		}
		key := j.Verb + " slowed"
		if j.Code != 0 {
			key = j.Verb + " " + grpcCodeName(j.Code)
		}
		if b.CSIFaults == nil {
			b.CSIFaults = map[string]int64{}
		}
		b.CSIFaults[key]++
	}
}

// grpcCodeName is a gRPC code's canonical name (fault.CSICodes is in the
// codes' order, from 1); the number where it is not one of them.
func grpcCodeName(code int) string {
	if code >= 1 && code <= len(fault.CSICodes) {
		return fault.CSICodes[code-1]
	}
	return strconv.Itoa(code)
}

// AddUsage fills the build's CPU seconds per cycle (from each
// component's CPU seconds during the churn, usage.CPU), their total and
// the harness's share, and its peak memory. Without cycles there is no
// per-cycle figure; the memory is set all the same.
func AddUsage(b *Build, cpuSeconds map[string]float64, memory map[string]usage.Peak) {
	if len(memory) > 0 {
		b.MemoryPeakMiB = memory
	}
	if b.Cycles <= 0 || len(cpuSeconds) == 0 {
		return
	}
	b.CPUSecondsPerCycle = map[string]float64{}
	for c, s := range cpuSeconds {
		b.CPUSecondsPerCycle[c] = s / float64(b.Cycles)
	}
	setCPUTotals(b)
}

// setCPUTotals derives the total and the harness's share from
// CPUSecondsPerCycle.
func setCPUTotals(b *Build) {
	b.CPUSecondsTotalPerCycle = usage.Total(b.CPUSecondsPerCycle)
	b.HarnessCPUShare = 0
	if b.CPUSecondsTotalPerCycle > 0 {
		b.HarnessCPUShare = b.CPUSecondsPerCycle[usage.Harness] / b.CPUSecondsTotalPerCycle
	}
}

// RuntimeOp is one container runtime operation during the churn: how many,
// the median and 90th percentile (read from the histogram's buckets,
// runtimeops.Quantile), and the histogram itself, which merge pools and
// `strandlab runtime-timings` turns into kubelet-sim's timings.
type RuntimeOp struct {
	Count     uint64               `json:"count"`
	P50MS     float64              `json:"p50_ms"`
	P90MS     float64              `json:"p90_ms"`
	Histogram runtimeops.Histogram `json:"histogram"`
}

// AddRuntimeOps fills the build's runtime operations from their histograms
// over the churn; operations not seen are left out.
func AddRuntimeOps(b *Build, ops runtimeops.Ops) {
	figures := figuresOf(ops, func(n uint64, h runtimeops.Histogram) RuntimeOp {
		return RuntimeOp{Count: n, Histogram: h, P50MS: quantileMS(h, 0.5), P90MS: quantileMS(h, 0.9)}
	})
	if b.RuntimeOps == nil {
		b.RuntimeOps = figures
		return
	}
	maps.Copy(b.RuntimeOps, figures)
}

// RuntimeOpsHistograms are the histograms of b's runtime operations.
func RuntimeOpsHistograms(b Build) runtimeops.Ops {
	return histogramsOf(b.RuntimeOps, func(r RuntimeOp) runtimeops.Histogram { return r.Histogram })
}

// AddRequestsByClient fills the build's requests per cycle by client from
// each client's requests during the churn (usage.Delta of the API
// server's counts before and after).
func AddRequestsByClient(b *Build, requests map[string]float64) {
	if b.Cycles <= 0 || requests == nil {
		return
	}
	b.APIRequestsPerCycleByClient = map[string]float64{}
	for c, n := range requests {
		b.APIRequestsPerCycleByClient[c] = n / float64(b.Cycles)
	}
}

func percentilesMS(ds []time.Duration) Percentiles {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return Percentiles{P50: ms(stats.Percentile(ds, 50)), P99: ms(stats.Percentile(ds, 99))}
}

// SchemaVersion is the report.json format this code writes. Raise it when a
// field is renamed, removed or changes meaning, and migrate older versions
// explicitly in Read: a report read with a field it does not know would
// read that field as zero (a renamed count as no events).
//
// Version 2 renamed attach_to_running_ms to created_to_running_ms: the
// figure starts when the replacement pod is first seen, not at the
// volume's attachment.
const SchemaVersion = 2

// MaxReportSize bounds report.json: a 30,000-cycle soak's full cycle log
// is about 30 MB.
const MaxReportSize = 512 << 20

// Read reads a report.json written by Write, strictly: an unknown field, a
// second JSON value or a schema version newer than SchemaVersion is an
// error naming the file. A path ending in .gz is read gzip-compressed: the
// form a shard's report is kept in beside the docs, so that a run too long
// for one sitting is merged from shards measured on other machines.
func Read(path string) (*Report, error) {
	data, err := safefile.ReadRegular(path, MaxReportSize, "a report's")
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	if strings.HasSuffix(path, ".gz") {
		if data, err = gunzip(data); err != nil {
			return nil, fmt.Errorf("read report %s: %w", path, err)
		}
	}
	r, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("decode report %s: %w", path, err)
	}
	return r, nil
}

// gunzip decompresses a gzip-compressed report, refusing one that
// decompresses to more than MaxReportSize.
func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, MaxReportSize+1))
	if err != nil {
		return nil, err
	}
	if len(out) > MaxReportSize {
		return nil, fmt.Errorf("decompresses to more than %d MiB", MaxReportSize>>20)
	}
	return out, nil
}

// Decode decodes report.json strictly (Read).
func Decode(data []byte) (*Report, error) {
	var r Report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	switch {
	case r.SchemaVersion > SchemaVersion:
		return nil, fmt.Errorf("schema_version %d: written by a newer strandlab (this one reads up to %d)", r.SchemaVersion, SchemaVersion)
	case r.SchemaVersion < 0:
		return nil, fmt.Errorf("schema_version %d is negative", r.SchemaVersion)
	case r.SchemaVersion == 0:
		// Before versioning: the fields decoded strictly, so they are
		// version 1's.
		r.SchemaVersion = 1
	}
	for i := range r.Builds {
		b := &r.Builds[i]
		if b.LegacyAttachToRunningMS == nil {
			continue
		}
		if r.SchemaVersion >= 2 {
			return nil, fmt.Errorf("builds[%d].attach_to_running_ms: schema_version %d names it created_to_running_ms", i, r.SchemaVersion)
		}
		b.CreatedToRunningMS, b.LegacyAttachToRunningMS = *b.LegacyAttachToRunningMS, nil
	}
	return &r, nil
}

// Encode is report.json's contents: r as indented JSON, stamped with
// SchemaVersion. The tests against the baseline are what SetTests last set.
func Encode(r *Report) ([]byte, error) {
	r.SchemaVersion = SchemaVersion
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(js, '\n'), nil
}

// ClaimDir creates a new directory under root for the run id, never one
// that exists: two runs started in the same second get id and id-2 (and
// so on). It returns the directory and the id it is named after.
func ClaimDir(root, id string) (dir, claimed string, err error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", "", err
	}
	for n := 1; n <= 1000; n++ {
		claimed = id
		if n > 1 {
			claimed = fmt.Sprintf("%s-%d", id, n)
		}
		dir = filepath.Join(root, claimed)
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir, claimed, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", "", err
		}
	}
	return "", "", fmt.Errorf("%s: a thousand runs named %s already", root, id)
}

// ReplaceDir makes dir hold exactly files: it writes them into a fresh
// directory beside dir and swaps it in with two renames, so a reader (or a
// second run writing at the same time) sees one write's set of files or
// another's, never a mix; for a moment between the renames dir may be
// absent.
func ReplaceDir(dir string, files map[string][]byte) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+"-new-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // gone after the swap; left only on failure
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return err
		}
	}
	// Another run may swap its own set in between our two renames: then
	// move that one aside too and try again.
	for attempt := 0; ; attempt++ {
		old, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+"-old-")
		if err != nil {
			return err
		}
		// A fresh unique name: os.Rename does not replace a directory.
		if err := os.Remove(old); err != nil {
			return err
		}
		if err := os.Rename(dir, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		err = os.Rename(tmp, dir)
		os.RemoveAll(old)
		if err == nil {
			return nil
		}
		if !errors.Is(err, fs.ErrExist) || attempt == 10 {
			return err
		}
	}
}

// WriteFileAtomic writes data to path through a temporary file in its
// directory, so an interrupted write leaves the old file whole.
func WriteFileAtomic(path string, data []byte) error { return safefile.WriteAtomic(path, data) }
