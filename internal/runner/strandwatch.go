package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/churn"
	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/detector"
	"github.com/strandlab/strandlab/internal/timeline"
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
	mu       sync.Mutex
	stranded map[string]detector.Finding // by pod (namespace/name), latest
	safety   map[string]detector.Finding // by finding key, first report
	// changes feeds strandings' timelines.
	changes *transitions
}

// startStrandWatch runs until ctx ends.
func startStrandWatch(ctx context.Context, client kubernetes.Interface, namespace string, threshold time.Duration) (*strandWatch, error) {
	nsFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	factory := informers.NewSharedInformerFactory(client, 0)
	pods, pvcs := nsFactory.Core().V1().Pods(), nsFactory.Core().V1().PersistentVolumeClaims()
	nodes, pvs := factory.Core().V1().Nodes(), factory.Core().V1().PersistentVolumes()
	vas, drivers := factory.Storage().V1().VolumeAttachments(), factory.Storage().V1().CSIDrivers()
	changes := newTransitions(10 * time.Minute)
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
	w := &strandWatch{stranded: map[string]detector.Finding{}, safety: map[string]detector.Finding{}, changes: changes}
	// A safety violation counts once it holds in two snapshots in a row
	// (longer than safetyHold): the harness's watches of nodes, pods and
	// VolumeAttachments are separate streams, and a snapshot can catch one a
	// few milliseconds ahead of another (e.g. a VolumeAttachment deleted
	// right after the status patch that preceded it); the windows of the
	// bugs last much longer.
	tracker := detector.NewTracker(threshold, safetyHold)
	go func() {
		t := time.NewTicker(snapshotInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				s := detector.Snapshot{Time: now}
				for _, p := range must(pods.Lister().List(labels.Everything())) {
					s.Pods = append(s.Pods, *p)
				}
				for _, o := range must(pvcs.Lister().List(labels.Everything())) {
					s.PVCs = append(s.PVCs, *o)
				}
				for _, o := range must(nodes.Lister().List(labels.Everything())) {
					s.Nodes = append(s.Nodes, *o)
				}
				for _, o := range must(pvs.Lister().List(labels.Everything())) {
					s.PVs = append(s.PVs, *o)
				}
				for _, o := range must(vas.Lister().List(labels.Everything())) {
					s.VolumeAttachments = append(s.VolumeAttachments, *o)
				}
				for _, o := range must(drivers.Lister().List(labels.Everything())) {
					s.CSIDrivers = append(s.CSIDrivers, *o)
				}
				w.record(tracker.Observe(s))
			}
		}
	}()
	return w, nil
}

// must drops a lister error: listing a synced cache with Everything cannot fail.
func must[T any](items []T, _ error) []T { return items }

func (w *strandWatch) record(findings []detector.Finding) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range findings {
		if f.Kind == detector.Stranded {
			w.stranded[f.Pod] = f
		} else if _, ok := w.safety[f.Key()]; !ok {
			w.safety[f.Key()] = f
		}
	}
}

// StrandedPod returns the latest stranding reported for pod.
func (w *strandWatch) StrandedPod(pod string) (detector.Finding, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f, ok := w.stranded[pod]
	return f, ok
}

// SafetyViolations are the distinct safety violations seen so far.
func (w *strandWatch) SafetyViolations() []detector.Finding {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]detector.Finding, 0, len(w.safety))
	for _, f := range w.safety {
		out = append(out, f)
	}
	return out
}

// Explain is a stranded cycle's timeline: the API changes (and, when the
// cluster has the proxy, what the controller received late and sent) about
// the stranding's pod, node, volume and attachment, from a little before the
// cycle's delete until now.
func (w *strandWatch) Explain(ctx context.Context, proxied cluster.ProxiedCluster, c churn.Cycle) []timeline.Entry {
	f := c.Stranding
	focus := timeline.Focus{Pod: f.Pod, Node: f.Node, Volume: f.Volume, PV: f.PV, Attachment: f.VolumeAttachment,
		From: c.DeletedAt.Add(-2 * time.Second), To: time.Now()}
	entries := w.changes.since(focus.From)
	if proxied != nil {
		journal, err := proxied.ProxyJournal(ctx, focus.From)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Reading the proxy's journal failed: the timeline lacks the proxy's side")
		}
		entries = append(entries, timeline.FromProxy(journal)...)
	}
	return focus.Select(entries)
}
