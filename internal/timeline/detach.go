package timeline

import "time"

// DetachTiming is when a cycle's old volume was detached from its old node,
// measured from the API transitions the harness's watches recorded: the two
// intervals that decide the attach/detach races (docs/kind.md,
// "Calibration"), compared between providers by `strandlab calibrate`.
type DetachTiming struct {
	// DeleteToDetach: from the pod's delete request to the detach request
	// (the VolumeAttachment's deletion) of its volume on its old node.
	DeleteToDetach time.Duration
	// ListedToDetach: from the volume's last addition to the old node's
	// status.volumesAttached (the controller's add patch) before the
	// detach to the detach request; valid when Listed.
	ListedToDetach time.Duration
	Listed         bool
}

// DetachTimings finds, in entries (any order), the first detach request of
// PV pv's attachment on node at or after deletedAt and not after end, and
// the last listing of volume (its unique name) on node before it. ok is
// false when there is no such request: the replacement came back to the
// node before the controller detached, or the attachment is not the pod's.
func DetachTimings(entries []Entry, node, pv, volume string, deletedAt, end time.Time) (DetachTiming, bool) {
	var detach time.Time
	for _, e := range entries {
		if e.Change != DetachRequested || e.Node != node || e.PV != pv || e.Time.Before(deletedAt) || e.Time.After(end) {
			continue
		}
		if detach.IsZero() || e.Time.Before(detach) {
			detach = e.Time
		}
	}
	if detach.IsZero() {
		return DetachTiming{}, false
	}
	t := DetachTiming{DeleteToDetach: detach.Sub(deletedAt)}
	var listed time.Time
	for _, e := range entries {
		if e.Change != VolumeListed || e.Node != node || e.Volume != volume || e.Time.After(detach) {
			continue
		}
		if e.Time.After(listed) {
			listed = e.Time
		}
	}
	if !listed.IsZero() {
		t.ListedToDetach, t.Listed = detach.Sub(listed), true
	}
	return t, true
}

// ReleaseTiming finds, in entries (any order), the first time the kubelet
// of node stopped reporting volume (its unique name) in use at or after
// deletedAt and not after end, and returns how long after deletedAt that
// was. The controller detaches only after it (or after its six-minute
// safety timeout), so this interval against the replacement's return
// decides whether a cycle detaches at all. ok is false when the volume
// stayed in use through the cycle.
func ReleaseTiming(entries []Entry, node, volume string, deletedAt, end time.Time) (time.Duration, bool) {
	return firstAfter(entries, deletedAt, end, func(e Entry) bool {
		return e.Change == VolumeReleased && e.Node == node && e.Volume == volume
	})
}

// PodEnd is how a deleted pod ended, measured from its delete request.
type PodEnd struct {
	// ToTerminal: to its terminal phase (the kubelet stopped its
	// containers and wrote the status); 0 when not seen.
	ToTerminal time.Duration
	// ToGone: to its removal from the API server (the kubelet's final
	// delete, after the volumes' teardown); 0 when not seen.
	ToGone time.Duration
}

// PodEndTimings finds, in entries (any order), the first terminal phase and
// the first removal of pod (namespace/name) at or after deletedAt and not
// after end. A StatefulSet re-creates the pod under its name only after
// the old one is gone, and a replacement does not end within its own
// cycle, so both are the deleted pod's.
func PodEndTimings(entries []Entry, pod string, deletedAt, end time.Time) PodEnd {
	var out PodEnd
	out.ToTerminal, _ = firstAfter(entries, deletedAt, end, func(e Entry) bool { return e.Change == PodTerminal && e.Pod == pod })
	out.ToGone, _ = firstAfter(entries, deletedAt, end, func(e Entry) bool { return e.Change == PodGone && e.Pod == pod })
	return out
}

// firstAfter is how long after from the earliest entry that match accepts
// within [from, end] came; ok is false when there is none.
func firstAfter(entries []Entry, from, end time.Time, match func(Entry) bool) (time.Duration, bool) {
	var first time.Time
	for _, e := range entries {
		if e.Time.Before(from) || e.Time.After(end) || !match(e) {
			continue
		}
		if first.IsZero() || e.Time.Before(first) {
			first = e.Time
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return first.Sub(from), true
}
