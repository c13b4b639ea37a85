package scan

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strandlab/strandlab/internal/detector"
)

// estimateSince returns the time from which the API shows a stranded
// condition holding without interruption, and the evidence for it; zero when
// there is no such evidence.
//
// The condition is made of three facts, each with a recorded time after
// which it cannot have changed:
//   - the pod is bound to the node, not terminating and not Running
//     (detector.Strandable): the PodScheduled condition's lastTransitionTime
//     is when it was bound; a binding never changes, deletion cannot be
//     undone, and a pod's phase never returns to Pending, so a pod Pending
//     and not terminating now was neither Running nor terminating before.
//     A pod Succeeded or Failed may have been Running since its binding, at
//     a time not recorded here: no estimate;
//   - the VolumeAttachment is attached and not being deleted: the
//     managedFields entry that owns status.attached (the external-attacher)
//     carries the time of that manager's last change to a field it owns, so
//     the status has not changed since; a VolumeAttachment deleted and
//     re-created under the same name has fresh managedFields;
//   - the volume is absent from the node's status.volumesAttached: likewise,
//     the entry owning that list (the attach/detach controller) was last
//     changed at its time, so the list has not changed since.
//
// The latest of these times starts an interval in which no input changed,
// so the condition held throughout it. managedFields times move only on real
// changes (not on no-op writes or heartbeats); an unrelated change by the
// same manager, such as another volume attached to the same node, moves the
// time later, which makes the estimate younger, never older.
//
// When no manager owns the node's list (it is empty), the time the volume
// left it is unknown and the estimate rests on the other two facts. In the
// stranding docs/design.md describes the volume leaves the list before it is
// attached again, so the attach time bounds it. Without managedFields on the
// VolumeAttachment (stripped by a proxy, or an old server) or a PodScheduled
// time there is no estimate: the caller then relies on its own observation.
func estimateSince(s detector.Snapshot, f detector.Finding) (time.Time, []string) {
	var va *metav1.ObjectMeta
	for i := range s.VolumeAttachments {
		if s.VolumeAttachments[i].Name == f.VolumeAttachment {
			va = &s.VolumeAttachments[i].ObjectMeta
		}
	}
	if va == nil {
		return time.Time{}, nil
	}
	attachedAt, attacher := lastStatusWrite(va.ManagedFields, "attached")
	if attachedAt.IsZero() {
		return time.Time{}, []string{fmt.Sprintf("VolumeAttachment %s has no managedFields for status.attached", f.VolumeAttachment)}
	}
	since := attachedAt
	evidence := []string{fmt.Sprintf("VolumeAttachment status last changed %s by %s", stamp(attachedAt), attacher)}

	scheduledAt, why := podScheduled(s, f)
	if scheduledAt.IsZero() {
		return time.Time{}, []string{why}
	}
	since = later(since, scheduledAt)
	evidence = append(evidence, "pod scheduled "+stamp(scheduledAt))
	for i := range s.Nodes {
		n := s.Nodes[i]
		if n.Name != f.Node {
			continue
		}
		if at, manager := lastStatusWrite(n.ManagedFields, "volumesAttached"); !at.IsZero() {
			evidence = append(evidence, fmt.Sprintf("node volumesAttached last changed %s by %s", stamp(at), manager))
			since = later(since, at)
		}
	}
	return since, evidence
}

// podScheduled is when the finding's pod was bound, if it is still Pending
// (see estimateSince); otherwise zero, and why.
func podScheduled(s detector.Snapshot, f detector.Finding) (time.Time, string) {
	ns, name, _ := strings.Cut(f.Pod, "/")
	for i := range s.Pods {
		p := s.Pods[i]
		if p.Namespace != ns || p.Name != name || f.PodUID != "" && string(p.UID) != f.PodUID {
			continue
		}
		if p.Status.Phase != corev1.PodPending && p.Status.Phase != "" {
			return time.Time{}, fmt.Sprintf("pod %s is %s: no record of since when it is not Running", f.Pod, p.Status.Phase)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				return c.LastTransitionTime.Time, ""
			}
		}
	}
	return time.Time{}, fmt.Sprintf("pod %s has no PodScheduled condition time", f.Pod)
}

// lastStatusWrite is the latest time of a managedFields entry owning
// status.<field>, and its manager.
func lastStatusWrite(entries []metav1.ManagedFieldsEntry, field string) (time.Time, string) {
	var at time.Time
	var manager string
	for _, e := range entries {
		if e.Time == nil || e.FieldsV1 == nil {
			continue
		}
		var owned struct {
			Status map[string]json.RawMessage `json:"f:status"`
		}
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &owned) != nil {
			continue // not the format we know: no evidence rather than wrong evidence
		}
		if _, ok := owned.Status["f:"+field]; ok && e.Time.After(at) {
			at, manager = e.Time.Time, e.Manager
		}
	}
	return at, manager
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
