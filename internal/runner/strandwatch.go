package runner

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/detector"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/timeline"
	"github.com/strandlab/strandlab/internal/workload"
)

// snapshotInterval is the detector's sampling period: short enough to see
// the sub-second windows of safety violations (reported at once), cheap
// because snapshots come from informer caches.
const snapshotInterval = 250 * time.Millisecond

// safetyHold: see startStrandWatch.
const safetyHold = 200 * time.Millisecond

// strandWatch feeds the detector a snapshot of the API objects every
// snapshotInterval, from informer caches, and remembers what it found.
type strandWatch struct {
	mu sync.Mutex
	// stranded: by pod (namespace/name), latest; a finding also names its
	// pod's UID, which StrandedPod matches against the pod that has the
	// name now (pods).
	stranded map[string]detector.Finding
	pods     corelisters.PodLister
	// pvcs and pvs resolve a churned pod's volume (Annotate).
	pvcs corelisters.PersistentVolumeClaimLister
	pvs  corelisters.PersistentVolumeLister
	// safety and phantoms: one per episode (a finding's key and the start
	// of the condition), with its timeline as seen when first reported.
	safety   map[string]report.SafetyFinding
	phantoms map[string]report.SafetyFinding
	// changes feeds the timelines; proxied adds the proxy's journal (nil
	// when the cluster has no proxy).
	changes *transitions
	proxied cluster.ProxyReader
	// csiFaults adds the CSI driver's journal of injected faults (nil
	// without csiErrors).
	csiFaults cluster.CSIFaultReader
	// sampled is closed when the sampling goroutine has returned;
	// factories are shut down by Wait.
	sampled   chan struct{}
	factories []informers.SharedInformerFactory
}

// Wait joins what startStrandWatch started — the sampling goroutine and the
// informers — once its context has ended, so nothing of the watch outlives
// the cluster it watched.
func (w *strandWatch) Wait() {
	<-w.sampled
	for _, f := range w.factories {
		f.Shutdown()
	}
}

// startStrandWatch runs until ctx ends. pods is the churn's watch of the
// namespace's pods, whose informer it shares; proxied may be nil.
func startStrandWatch(ctx context.Context, client kubernetes.Interface, pods *workload.Pods, proxied cluster.ProxyReader, csiFaults cluster.CSIFaultReader, namespace string, threshold time.Duration) (*strandWatch, error) {
	nsFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	factory := informers.NewSharedInformerFactory(client, 0)
	pvcs := nsFactory.Core().V1().PersistentVolumeClaims()
	nodes, pvs := factory.Core().V1().Nodes(), factory.Core().V1().PersistentVolumes()
	vas, drivers := factory.Storage().V1().VolumeAttachments(), factory.Storage().V1().CSIDrivers()
	changes := newTransitions(10 * time.Minute)
	// The pods' informer (workload.WatchPods) stamps its objects already.
	for _, inf := range []cache.SharedIndexInformer{nodes.Informer(), vas.Informer()} {
		if err := inf.SetTransform(workload.StampSeen); err != nil {
			return nil, err
		}
	}
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
	}{{nodes.Informer(), changes.nodeHandler()}, {vas.Informer(), changes.attachmentHandler()}, {pods.Informer(), changes.podHandler()}} {
		if _, err := h.inf.AddEventHandler(h.handler); err != nil {
			return nil, err
		}
	}
	synced := []cache.InformerSynced{pods.Informer().HasSynced, pvcs.Informer().HasSynced, nodes.Informer().HasSynced,
		pvs.Informer().HasSynced, vas.Informer().HasSynced, drivers.Informer().HasSynced}
	nsFactory.Start(ctx.Done())
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("detector caches did not sync: %w", ctx.Err())
	}
	changes.start()
	w := &strandWatch{stranded: map[string]detector.Finding{}, pods: pods.Lister(), pvcs: pvcs.Lister(), pvs: pvs.Lister(), safety: map[string]report.SafetyFinding{},
		phantoms: map[string]report.SafetyFinding{}, changes: changes, proxied: proxied, csiFaults: csiFaults,
		sampled: make(chan struct{}), factories: []informers.SharedInformerFactory{nsFactory, factory}}
	// A safety violation (and a phantom listing likewise) counts once it
	// holds in two snapshots in a row (longer than safetyHold): the
	// harness's watches of nodes, pods and VolumeAttachments are separate
	// streams, and a snapshot can catch one a few milliseconds ahead of
	// another (e.g. a VolumeAttachment deleted right after the status patch
	// that preceded it); the windows of the bugs last much longer.
	tracker := detector.NewTracker(threshold, safetyHold)
	go func() {
		defer close(w.sampled)
		t := time.NewTicker(snapshotInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// Pods and PVCs are the namespace's: phantom listings are
				// looked for only on volumes claimed from it.
				// The caches' own objects, not copies: the detector
				// only reads them.
				s := detector.Snapshot{Namespace: namespace,
					Pods: must(pods.Lister().List(labels.Everything())), PVCs: must(pvcs.Lister().List(labels.Everything())),
					Nodes: must(nodes.Lister().List(labels.Everything())), PVs: must(pvs.Lister().List(labels.Everything())),
					VolumeAttachments: must(vas.Lister().List(labels.Everything())),
					CSIDrivers:        must(drivers.Lister().List(labels.Everything()))}
				// Timed once read, not at the tick: every change the
				// lists hold was stamped before this (workload.StampSeen),
				// so a finding never begins before its cause.
				s.Time = time.Now()
				w.record(ctx, tracker.Observe(s))
			}
		}
	}()
	return w, nil
}

// must drops a lister error: listing a synced cache with Everything cannot fail.
func must[T any](items []T, _ error) []T { return items }

// safetyLookback is how far before a safety violation its timeline starts:
// the cause comes well before the violation shows. On mirror-safety the
// add patch that the controller's late node view misses is about 16 s
// before it (the empty removal patch, the detach, then a replacement
// scheduled 12 s after the old pod is gone).
const safetyLookback = 25 * time.Second

func (w *strandWatch) record(ctx context.Context, findings []detector.Finding) {
	var fresh []detector.Finding
	w.mu.Lock()
	for _, f := range findings {
		switch {
		case f.Kind == detector.Stranded:
			w.stranded[f.Pod] = f
		case f.Kind == detector.PhantomListing:
			if _, ok := w.phantoms[episode(f)]; !ok {
				fresh = append(fresh, f)
			}
		default:
			if _, ok := w.safety[episode(f)]; !ok {
				fresh = append(fresh, f)
			}
		}
	}
	w.mu.Unlock()
	for _, f := range fresh {
		// A phantom listing has no pod: its timeline is the node's, the
		// volume's and the attachment's.
		focus := timeline.Focus{Pod: f.Pod, Node: f.Node, Volume: f.Volume, PV: f.PV, Attachment: f.VolumeAttachment,
			From: f.Since.Add(-safetyLookback), To: time.Now()}
		sf := report.SafetyFindingOf(f, w.timeline(ctx, focus))
		w.mu.Lock()
		if f.Kind == detector.PhantomListing {
			w.phantoms[episode(f)] = sf
		} else {
			w.safety[episode(f)] = sf
		}
		w.mu.Unlock()
	}
}

// episode identifies one safety violation or phantom listing: the same
// pod, node and volume may be unsafe again in a later cycle, and that
// counts again.
func episode(f detector.Finding) string { return f.Key() + "|" + f.Since.Format(time.RFC3339Nano) }

// StrandedPod returns the latest stranding reported for pod (namespace/name)
// if it is a stranding of the pod that has that name now: one of an earlier
// pod of the same name (a StatefulSet pod since replaced, with another UID)
// is not returned. churn asks by name only; the pod's current UID comes from
// the same informer cache the detector's snapshots are taken from, so it is
// never older than the finding's.
func (w *strandWatch) StrandedPod(pod string) (detector.Finding, bool) {
	w.mu.Lock()
	f, ok := w.stranded[pod]
	w.mu.Unlock()
	if !ok {
		return detector.Finding{}, false
	}
	ns, name, _ := strings.Cut(pod, "/")
	current, err := w.pods.Pods(ns).Get(name)
	if err != nil || string(current.UID) != f.PodUID {
		return detector.Finding{}, false // gone, or replaced since
	}
	return f, true
}

// SafetyViolations are the safety violations seen so far, one per episode.
func (w *strandWatch) SafetyViolations() []report.SafetyFinding {
	w.mu.Lock()
	defer w.mu.Unlock()
	return episodes(w.safety)
}

// PhantomListings are the phantom listings seen so far, one per episode
// (report.AddPhantomListings puts them in a build's report).
func (w *strandWatch) PhantomListings() []report.SafetyFinding {
	w.mu.Lock()
	defer w.mu.Unlock()
	return episodes(w.phantoms)
}

func episodes(m map[string]report.SafetyFinding) []report.SafetyFinding {
	out := make([]report.SafetyFinding, 0, len(m))
	for _, f := range m {
		out = append(out, f)
	}
	return out
}

// Explain is a stranded cycle's timeline: the API changes (and, when the
// cluster has the proxy, what the controller received late and sent) about
// the stranding's pod, node, volume and attachment, from a little before the
// cycle's delete until now.
func (w *strandWatch) Explain(ctx context.Context, c cycle.Cycle) []timeline.Entry {
	f := c.Stranding
	return w.timeline(ctx, timeline.Focus{Pod: f.Pod, Node: f.Node, Volume: f.Volume, PV: f.PV, Attachment: f.VolumeAttachment,
		From: c.DeletedAt.Add(-2 * time.Second), To: time.Now()})
}

// Annotate adds a finished cycle's timings from the transitions the
// watches recorded, as seen within the cycle: how the deleted pod ended
// (timeline.PodEndTimings), when the old node's kubelet released its
// volume (its first claim's) and when the controller requested its detach
// from the old node (timeline.ReleaseTiming, timeline.DetachTimings). A
// volume whose claim or PV is gone or not CSI is left unmeasured.
func (w *strandWatch) Annotate(c *cycle.Cycle, old *corev1.Pod) {
	now := time.Now()
	end := timeline.PodEndTimings(w.changes.since(c.DeletedAt), old.Namespace+"/"+old.Name, c.DeletedAt, now)
	c.DeleteToTerminal, c.DeleteToGone = end.ToTerminal, end.ToGone
	claim := ""
	for _, v := range old.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
			break
		}
	}
	if claim == "" || c.OldNode == "" {
		return
	}
	pvc, err := w.pvcs.PersistentVolumeClaims(old.Namespace).Get(claim)
	if err != nil || pvc.Spec.VolumeName == "" {
		return
	}
	pv, err := w.pvs.Get(pvc.Spec.VolumeName)
	if err != nil || pv.Spec.CSI == nil {
		return
	}
	volume := detector.UniqueVolumeName(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)
	// The volume's listing came before the delete, by up to the pod's
	// life: look back as far as the transitions keep.
	entries := w.changes.since(c.DeletedAt.Add(-w.changes.retention))
	if t, ok := timeline.DetachTimings(entries, c.OldNode, pv.Name, volume, c.DeletedAt, now); ok {
		c.DeleteToDetach = t.DeleteToDetach
		if t.Listed {
			c.ListedToDetach = t.ListedToDetach
		}
	}
	if d, ok := timeline.ReleaseTiming(entries, c.OldNode, volume, c.DeletedAt, now); ok {
		c.DeleteToReleased = d
	}
}

// timeline is what the API and the proxy showed about focus.
func (w *strandWatch) timeline(ctx context.Context, focus timeline.Focus) []timeline.Entry {
	entries := w.changes.since(focus.From)
	if w.proxied != nil {
		journal, err := w.proxied.ProxyJournal(ctx, focus.From)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Reading the proxy's journal failed: the timeline lacks the proxy's side")
		}
		entries = append(entries, timeline.FromProxy(journal)...)
	}
	if w.csiFaults != nil {
		journal, err := w.csiFaults.CSIFaultJournal(ctx)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Reading the CSI driver's fault journal failed: the timeline lacks its side")
		}
		entries = append(entries, timeline.FromCSIDriver(journal)...)
	}
	return focus.Select(entries)
}
