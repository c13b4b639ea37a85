package timeline

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// NodeChanges are the changes between two versions of a node that matter
// to attachment: volumes added to or removed from status.volumesAttached
// and status.volumesInUse. Heartbeats produce none. old is nil for an add.
func NodeChanges(t time.Time, old, cur *corev1.Node) []Entry {
	var oldAttached, oldInUse []string
	if old != nil {
		oldAttached, oldInUse = attached(old), inUse(old)
	}
	var out []Entry
	add := func(field string, before, after []string) {
		for _, v := range after {
			if !slices.Contains(before, v) {
				var change Change
				if field == "volumesAttached" {
					change = VolumeListed
				}
				out = append(out, Entry{Time: t, Source: API, Node: cur.Name, Volume: v, Change: change,
					Event: fmt.Sprintf("node %s status.%s + %s (now %d)", cur.Name, field, v, len(after))})
			}
		}
		for _, v := range before {
			if !slices.Contains(after, v) {
				var change Change
				if field == "volumesInUse" {
					change = VolumeReleased
				}
				out = append(out, Entry{Time: t, Source: API, Node: cur.Name, Volume: v, Change: change,
					Event: fmt.Sprintf("node %s status.%s - %s (now %d)", cur.Name, field, v, len(after))})
			}
		}
	}
	add("volumesAttached", oldAttached, attached(cur))
	add("volumesInUse", oldInUse, inUse(cur))
	return out
}

func attached(n *corev1.Node) []string {
	var out []string
	for _, v := range n.Status.VolumesAttached {
		out = append(out, string(v.Name))
	}
	return out
}

func inUse(n *corev1.Node) []string {
	var out []string
	for _, v := range n.Status.VolumesInUse {
		out = append(out, string(v))
	}
	return out
}

// VolumeAttachmentChanges: created, attached, detach requested (deletion
// timestamp), detached, deleted. cur is nil for a delete.
func VolumeAttachmentChanges(t time.Time, old, cur *storagev1.VolumeAttachment) []Entry {
	obj := cur
	if obj == nil {
		obj = old
	}
	pv := ""
	if obj.Spec.Source.PersistentVolumeName != nil {
		pv = *obj.Spec.Source.PersistentVolumeName
	}
	entry := func(what string) Entry {
		return Entry{Time: t, Source: API, Attachment: obj.Name, PV: pv, Node: obj.Spec.NodeName,
			Event: fmt.Sprintf("VolumeAttachment %s (%s on %s) %s", obj.Name, pv, obj.Spec.NodeName, what)}
	}
	switch {
	case cur == nil:
		e := entry("deleted")
		if old.DeletionTimestamp == nil {
			// The watch never showed the deletion timestamp (the
			// finalizer went at once): the delete is the detach request.
			e.Change = DetachRequested
		}
		return []Entry{e}
	case old == nil:
		out := []Entry{entry("created")}
		if cur.Status.Attached {
			out = append(out, entry("attached=true"))
		}
		return out
	}
	var out []Entry
	if old.DeletionTimestamp == nil && cur.DeletionTimestamp != nil {
		e := entry("deletion requested (detach)")
		e.Change = DetachRequested
		out = append(out, e)
	}
	if old.Status.Attached != cur.Status.Attached {
		out = append(out, entry(fmt.Sprintf("attached=%t", cur.Status.Attached)))
	}
	return out
}

// PodChanges: created, scheduled, Running, terminating, deleted. cur is nil
// for a delete.
func PodChanges(t time.Time, old, cur *corev1.Pod) []Entry {
	obj := cur
	if obj == nil {
		obj = old
	}
	key := obj.Namespace + "/" + obj.Name
	entry := func(what string) Entry {
		return Entry{Time: t, Source: API, Pod: key, Event: fmt.Sprintf("pod %s (uid %.8s) %s", key, obj.UID, what)}
	}
	if cur == nil {
		e := entry("deleted")
		e.Change = PodGone
		return []Entry{e}
	}
	var out []Entry
	if old == nil {
		out = append(out, entry("created"))
		old = &corev1.Pod{}
	}
	if old.Spec.NodeName == "" && cur.Spec.NodeName != "" {
		out = append(out, entry("scheduled to "+cur.Spec.NodeName))
	}
	if old.Status.Phase != cur.Status.Phase && cur.Status.Phase != "" {
		e := entry("phase " + string(cur.Status.Phase))
		if cur.Status.Phase == corev1.PodSucceeded || cur.Status.Phase == corev1.PodFailed {
			e.Change = PodTerminal
		}
		out = append(out, e)
	}
	if old.DeletionTimestamp == nil && cur.DeletionTimestamp != nil {
		out = append(out, entry("terminating"))
	}
	return out
}
