package workload

import (
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// annotationSeenAt holds, on the harness's cached copy of an object only
// (never written to the API), when the harness received that version.
const annotationSeenAt = "strandlab.io/seen-at"

// StampSeen is an informer transform that stamps each object version with
// the time it reached the informer, before it enters the cache.
//
// An informer updates its cache first and calls its handlers afterwards,
// from another goroutine, so a handler's time.Now() can come after a
// detector snapshot of the cache that already held the change: a timeline
// then showed a safety violation beginning a few milliseconds before the
// pod scheduling that made it. A stamp taken here precedes every read of
// the cache that can see the version. (The FIFO calls transforms as an
// object enters it: client-go tools/cache RealFIFO.addToItems_locked.)
func StampSeen(obj any) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil // not an object (a tombstone is never transformed)
	}
	a := m.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[annotationSeenAt] = strconv.FormatInt(time.Now().UnixNano(), 10)
	m.SetAnnotations(a)
	return obj, nil
}

// SeenAt is when the harness received obj's version (StampSeen's stamp),
// or now if obj carries none (an informer without the transform, or a
// tombstone's last known state, which the harness learns of now).
func SeenAt(obj any) time.Time {
	if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return time.Now()
	}
	if m, err := meta.Accessor(obj); err == nil {
		if ns, err := strconv.ParseInt(m.GetAnnotations()[annotationSeenAt], 10, 64); err == nil {
			return time.Unix(0, ns)
		}
	}
	return time.Now()
}
