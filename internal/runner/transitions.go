package runner

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/strandlab/strandlab/internal/timeline"
	"github.com/strandlab/strandlab/internal/workload"
)

// transitions records the API object changes a stranding's timeline needs
// (node volume lists, VolumeAttachments, the churned pods) as the harness's
// informers see them, keeping only the recent past. Each change is timed
// by when its version reached the informer (workload.StampSeen), so that it
// precedes any detector snapshot that saw it.
type transitions struct {
	mu sync.Mutex
	// recording starts once the informers have synced: their initial
	// lists are the starting state, not transitions.
	recording bool
	entries   []timeline.Entry
	retention time.Duration
}

func newTransitions(retention time.Duration) *transitions {
	return &transitions{retention: retention}
}

func (r *transitions) add(es []timeline.Entry) {
	if len(es) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.recording {
		return
	}
	r.entries = append(r.entries, es...)
	// Drop what is older than the retention, in batches so that adding
	// stays cheap.
	if len(r.entries) > 4096 {
		cutoff := time.Now().Add(-r.retention)
		i := 0
		for i < len(r.entries) && r.entries[i].Time.Before(cutoff) {
			i++
		}
		if i > len(r.entries)/2 {
			r.entries = append([]timeline.Entry(nil), r.entries[i:]...)
		}
	}
}

// start records from now on.
func (r *transitions) start() {
	r.mu.Lock()
	r.recording = true
	r.mu.Unlock()
}

// since returns the entries at or after t.
func (r *transitions) since(t time.Time) []timeline.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []timeline.Entry
	for _, e := range r.entries {
		if !e.Time.Before(t) {
			out = append(out, e)
		}
	}
	return out
}

// handlers returns informer handlers for nodes, VolumeAttachments and pods.
func (r *transitions) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if n, ok := o.(*corev1.Node); ok {
				r.add(timeline.NodeChanges(workload.SeenAt(n), nil, n))
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := cur.(*corev1.Node)
			if ok1 && ok2 {
				r.add(timeline.NodeChanges(workload.SeenAt(n), o, n))
			}
		},
	}
}

func (r *transitions) attachmentHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if va, ok := o.(*storagev1.VolumeAttachment); ok {
				r.add(timeline.VolumeAttachmentChanges(workload.SeenAt(va), nil, va))
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*storagev1.VolumeAttachment)
			n, ok2 := cur.(*storagev1.VolumeAttachment)
			if ok1 && ok2 {
				r.add(timeline.VolumeAttachmentChanges(workload.SeenAt(n), o, n))
			}
		},
		DeleteFunc: func(o any) {
			seen := workload.SeenAt(o)
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if va, ok := o.(*storagev1.VolumeAttachment); ok {
				r.add(timeline.VolumeAttachmentChanges(seen, va, nil))
			}
		},
	}
}

func (r *transitions) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				r.add(timeline.PodChanges(workload.SeenAt(p), nil, p))
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Pod)
			n, ok2 := cur.(*corev1.Pod)
			if ok1 && ok2 {
				r.add(timeline.PodChanges(workload.SeenAt(n), o, n))
			}
		},
		DeleteFunc: func(o any) {
			seen := workload.SeenAt(o)
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				r.add(timeline.PodChanges(seen, p, nil))
			}
		},
	}
}
