package scan

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/detector"
)

// DefaultThreshold is the stranding threshold of docs/design.md: the attach/detach
// controller normally reports an attach within one 100 ms loop, so a volume
// missing for longer is not a race of the moment.
const DefaultThreshold = 30 * time.Second

// Options of one scan.
type Options struct {
	// Namespace restricts pods and PVCs; "" scans all namespaces. Nodes,
	// PVs, VolumeAttachments and CSIDrivers are cluster-scoped and always
	// read in full.
	Namespace string
	// Threshold is how long a stranded condition must have held to be
	// reported. Safety violations and phantom listings are reported as
	// found.
	Threshold time.Duration
	// Interval between re-checks of stranded candidates younger than the
	// threshold; 0 picks a tenth of the threshold, within [100ms, 5s].
	Interval time.Duration
	// Cluster names the cluster in the report (the API server's host).
	Cluster string
}

// Report is the result of a scan; its JSON form is stable (docs/strandscan.md).
type Report struct {
	// ScannedAt is when the first snapshot started.
	ScannedAt time.Time `json:"scanned_at"`
	// CompletedAt is when the last re-check ended; ages are measured to it.
	CompletedAt      time.Time `json:"completed_at"`
	Cluster          string    `json:"cluster"`
	Namespace        string    `json:"namespace"` // "" = all namespaces
	ThresholdSeconds float64   `json:"threshold_seconds"`
	Counts           Counts    `json:"counts"`
	// Findings is never null: an empty list means a clean cluster.
	Findings []Finding `json:"findings"`
}

// Counts summarises what was read and found.
type Counts struct {
	Pods              int `json:"pods"`
	Nodes             int `json:"nodes"`
	PVCs              int `json:"pvcs"`
	PVs               int `json:"pvs"`
	VolumeAttachments int `json:"volume_attachments"`
	CSIDrivers        int `json:"csi_drivers"`
	// NodesNotControllerManaged are nodes without the
	// volumes.kubernetes.io/controller-managed-attach-detach annotation,
	// which the scan skips (the kubelet attaches there, not the controller).
	NodesNotControllerManaged int `json:"nodes_not_controller_managed"`
	Findings                  int `json:"findings"`
	Stranded                  int `json:"stranded"`
	SafetyViolations          int `json:"safety_violations"`
	// PhantomListings are volumes listed in a node's
	// status.volumesAttached with no attached VolumeAttachment while no pod
	// on the node needs them: not safety violations, but the node status
	// is wrong.
	PhantomListings int `json:"phantom_listings"`
	// Resolved are stranded candidates younger than the threshold that
	// cleared during the re-check: normal attach/detach in progress.
	Resolved int `json:"resolved"`
}

// Finding is one reported condition: the detector's finding (the same
// type, and the same JSON, as the runner's safety findings carry), with
// Since moved to when the condition began as far as the API shows, and how
// old that makes it.
type Finding struct {
	detector.Finding
	// AgeSeconds is CompletedAt - Since.
	AgeSeconds float64 `json:"age_seconds"`
	// SinceEvidence says how Since was found; for safety violations, Since
	// is when this scan saw the condition.
	SinceEvidence string `json:"since_evidence"`
}

// Safety reports whether the finding is a safety violation (a phantom
// listing is not one).
func (f Finding) Safety() bool {
	return f.Kind == detector.ListedNotAttached || f.Kind == detector.DetachedUnderMount
}

func (f Finding) sortKey() string {
	return string(f.Kind) + "|" + f.Node + "|" + f.Pod + "|" + f.Volume
}

// candidate is a stranded condition seen by the scan, not yet past the
// threshold.
type candidate struct {
	f         detector.Finding // as last seen
	firstSeen time.Time
	since     time.Time
	evidence  string
}

// observe records the condition seen again in s. Two claims say since when
// it has held: the API evidence, and the scan's own observation since
// firstSeen (which the re-checks keep continuous). Either is sound, so the
// earlier one counts; only the latest evidence is used, because evidence
// that moved means something changed in between.
func (c *candidate) observe(s detector.Snapshot, f detector.Finding) {
	c.f = f
	est, evidence := estimateSince(s, f)
	c.since = c.firstSeen
	if !est.IsZero() && est.Before(c.firstSeen) {
		c.since = est
	} else {
		evidence = append(evidence, "first seen by this scan "+stamp(c.firstSeen))
	}
	c.evidence = strings.Join(evidence, "; ")
}

// past: the condition has held longer than the threshold at now; a zero
// threshold reports at once, as detector.Tracker does.
func (c *candidate) past(now time.Time, threshold time.Duration) bool {
	return now.Sub(c.since) > threshold || threshold == 0
}

// Scan snapshots the cluster and returns the findings past the threshold.
// Safety violations and phantom listings are reported at once. A stranded condition whose
// estimated age already exceeds the threshold is reported at once; younger
// ones are re-checked until they exceed it (by evidence, or by having been
// seen continuously for the threshold) or clear.
func Scan(ctx context.Context, client kubernetes.Interface, opts Options) (*Report, error) {
	if opts.Threshold < 0 {
		return nil, fmt.Errorf("negative threshold %v", opts.Threshold)
	}
	logger := klog.FromContext(ctx)
	s0, err := Snapshot(ctx, client, opts.Namespace)
	if err != nil {
		return nil, err
	}
	r := &Report{
		ScannedAt:        s0.Time,
		Cluster:          opts.Cluster,
		Namespace:        opts.Namespace,
		ThresholdSeconds: opts.Threshold.Seconds(),
		Counts: Counts{Pods: len(s0.Pods), Nodes: len(s0.Nodes), PVCs: len(s0.PVCs), PVs: len(s0.PVs),
			VolumeAttachments: len(s0.VolumeAttachments), CSIDrivers: len(s0.CSIDrivers)},
	}
	s0, r.Counts.NodesNotControllerManaged = controllerManaged(s0)

	var confirmed []*candidate
	var pending []*candidate
	for _, f := range detector.Check(s0) {
		c := &candidate{f: f, firstSeen: s0.Time, since: s0.Time, evidence: "first seen by this scan " + stamp(s0.Time)}
		if f.Kind != detector.Stranded {
			logger.V(1).Info("Reported at once", "kind", f.Kind, "pod", f.Pod, "node", f.Node, "volume", f.Volume)
			confirmed = append(confirmed, c)
			continue
		}
		c.observe(s0, f)
		if c.past(s0.Time, opts.Threshold) {
			logger.V(1).Info("Stranded", "pod", f.Pod, "node", f.Node, "volume", f.Volume, "since", c.since)
			confirmed = append(confirmed, c)
			continue
		}
		logger.V(1).Info("Stranded candidate younger than the threshold, re-checking", "pod", f.Pod, "node", f.Node, "volume", f.Volume, "since", c.since)
		pending = append(pending, c)
	}

	if len(pending) > 0 {
		more, resolved, err := recheck(ctx, client, s0, pending, opts)
		if err != nil {
			return nil, err
		}
		confirmed = append(confirmed, more...)
		r.Counts.Resolved = resolved
	}

	r.CompletedAt = time.Now().UTC()
	r.Findings = make([]Finding, 0, len(confirmed))
	for _, c := range confirmed {
		f := Finding{Finding: c.f, SinceEvidence: c.evidence}
		f.Since = c.since.UTC()
		f.AgeSeconds = r.CompletedAt.Sub(f.Since).Seconds()
		switch {
		case f.Safety():
			r.Counts.SafetyViolations++
		case f.Kind == detector.PhantomListing:
			r.Counts.PhantomListings++
		default:
			r.Counts.Stranded++
		}
		r.Findings = append(r.Findings, f)
	}
	r.Counts.Findings = len(r.Findings)
	// Grouped by kind, then by node: an operator fixes a node at a time.
	sort.Slice(r.Findings, func(i, j int) bool { return r.Findings[i].sortKey() < r.Findings[j].sortKey() })
	return r, nil
}

// recheck re-snapshots the pending candidates until each exceeds the
// threshold or clears; a condition that is absent once has broken, and is
// not reported. It returns the confirmed ones and how many cleared.
func recheck(ctx context.Context, client kubernetes.Interface, s0 detector.Snapshot, pending []*candidate, opts Options) ([]*candidate, int, error) {
	interval := opts.Interval
	if interval <= 0 {
		interval = min(max(opts.Threshold/10, 100*time.Millisecond), 5*time.Second)
	}
	// Every candidate is settled once the scan has seen it for the
	// threshold, so the re-check needs the threshold plus one round; the
	// margin covers slow rounds on a busy API server. The scan's own
	// deadline (ctx) bounds it as well.
	deadline := opts.Threshold + 2*interval + 30*time.Second
	logger := klog.FromContext(ctx)
	var confirmed []*candidate
	resolved := 0
	err := wait.PollUntilContextTimeout(ctx, interval, deadline, false, func(ctx context.Context) (bool, error) {
		findings := make([]detector.Finding, len(pending))
		for i, c := range pending {
			findings[i] = c.f
		}
		s, err := recheckSnapshot(ctx, client, s0.CSIDrivers, findings)
		if err != nil {
			return false, err
		}
		s, _ = controllerManaged(s)
		now := map[string]detector.Finding{}
		for _, f := range detector.Check(s) {
			now[f.Key()] = f
		}
		kept := pending[:0]
		for _, c := range pending {
			f, ok := now[c.f.Key()]
			if !ok {
				logger.V(1).Info("Stranded candidate cleared", "pod", c.f.Pod, "node", c.f.Node, "volume", c.f.Volume)
				resolved++
				continue
			}
			c.observe(s, f)
			if c.past(s.Time, opts.Threshold) {
				logger.V(1).Info("Stranded", "pod", f.Pod, "node", f.Node, "volume", f.Volume, "since", c.since)
				confirmed = append(confirmed, c)
				continue
			}
			kept = append(kept, c)
		}
		pending = kept
		return len(pending) == 0, nil
	})
	if err != nil {
		var apiErr *APIError
		if errors.As(err, &apiErr) {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("re-checking %d stranded candidates younger than the threshold (%v): %w", len(pending), opts.Threshold, err)
	}
	return confirmed, resolved, nil
}
