// Package detector finds stranded volumes, safety violations and phantom
// listings, exactly as docs/design.md defines them ("Definitions"), in a
// snapshot of API objects. It is pure: no API calls, no clock; callers pass
// snapshots (from informers or a one-off list) and their times.
package detector

import (
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/strandlab/strandlab/internal/csinames"
)

// Kind of finding.
type Kind string

const (
	// Stranded: attached (VolumeAttachment attached) but missing from the
	// node's status.volumesAttached while a pod on the node waits for it
	// (Strandable).
	Stranded Kind = "stranded"
	// ListedNotAttached: safety violation (a) — listed in
	// status.volumesAttached with no attached, live VolumeAttachment, while a
	// pod on the node may mount it.
	ListedNotAttached Kind = "listed_not_attached"
	// DetachedUnderMount: safety violation (b) — the VolumeAttachment is being
	// deleted or gone while a pod on the node still has the volume mounted
	// (a container started, the pod still exists, and the kubelet still
	// reports the volume in the node's status.volumesInUse).
	DetachedUnderMount Kind = "detached_under_mount"
	// PhantomListing: listed in the node's status.volumesAttached with no
	// attached, live VolumeAttachment while no pod on the node needs the
	// volume. Not a safety violation (no pod may mount it), but the node
	// status lies; it becomes violation (a) once a pod on the node needs the
	// volume. Disjoint from (a) by construction. Its finding has no pod.
	PhantomListing Kind = "phantom_listing"
)

// Snapshot is the API state at one time.
//
// The objects are pointers, read and never changed: the runner takes a
// snapshot of its informer caches four times a second, and copying every
// object of a 2,000-pod cluster each time cost the harness more CPU (the
// copies and their garbage) than the check itself.
type Snapshot struct {
	Time              time.Time
	Pods              []*corev1.Pod
	Nodes             []*corev1.Node
	PVCs              []*corev1.PersistentVolumeClaim
	PVs               []*corev1.PersistentVolume
	VolumeAttachments []*storagev1.VolumeAttachment
	CSIDrivers        []*storagev1.CSIDriver
	// Namespace is the namespace Pods and PVCs were read from, "" for all
	// namespaces. A phantom listing needs every pod that could use the
	// volume, so with a namespace only volumes whose PV is claimed from it
	// are checked for one.
	Namespace string
}

// Finding is one condition on one (pod, node, volume); a phantom listing
// has no pod (Pod and PodUID are empty).
type Finding struct {
	Kind Kind   `json:"kind"`
	Pod  string `json:"pod"` // namespace/name, for display
	// PodUID identifies the pod: a StatefulSet replacement has its
	// predecessor's name but a new UID, so its findings are new ones.
	PodUID string `json:"pod_uid"`
	Node   string `json:"node"`
	Volume string `json:"volume"` // unique volume name
	PV     string `json:"pv"`
	// VolumeAttachment is the attachment's name, if one exists.
	VolumeAttachment string `json:"volume_attachment,omitempty"`
	// Since is when the condition was first seen holding continuously
	// (set by a Tracker; equal to the snapshot time from Check).
	Since    time.Time `json:"since"`
	Evidence string    `json:"evidence"`
	// LastListed, on a stranding reported by a Tracker, is the last
	// snapshot before Since in which the node's status.volumesAttached
	// listed the volume; zero when the Tracker never saw it listed. The
	// report uses it to tell a new stranding from the same one persisting
	// onto the pod's replacement (docs/design.md, "Stranding episode").
	LastListed time.Time `json:"last_listed,omitzero"`
}

// Key identifies a finding across snapshots: (kind, pod UID, node,
// volume). The pod's name is in the key too; that changes nothing (a UID
// belongs to one name) except for objects without a UID (fake clients in
// tests), which stay apart by name.
func (f Finding) Key() string {
	return string(f.Kind) + "|" + f.Pod + "|" + f.PodUID + "|" + f.Node + "|" + f.Volume
}

// Strandable reports whether pod can have a stranded volume
// (docs/design.md, "Stranded"): bound to a node, not being deleted, and not
// Running. A Running pod has its volumes mounted already (the kubelet
// mounts only volumes listed in status.volumesAttached), so a volume
// missing from the list does not hold it back. The runner (through Check
// and Tracker) and strandscan (through Check) both decide with it.
func Strandable(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodRunning
}

// AttachmentName is the name the attach/detach controller gives the
// VolumeAttachment of a CSI volume on a node, so that a finding names it
// even while it does not exist (csinames.VolumeAttachmentName).
func AttachmentName(volumeHandle, driver, node string) string {
	return csinames.VolumeAttachmentName(volumeHandle, driver, node)
}

// UniqueVolumeName of a CSI volume: kubernetes.io/csi/<driver>^<handle>
// (csinames.UniqueVolumeName), as a string.
func UniqueVolumeName(driver, handle string) string {
	return string(csinames.UniqueVolumeName(driver, handle))
}

// podVolume is one attachable CSI volume a pod uses.
type podVolume struct {
	pod    *corev1.Pod
	pv     *corev1.PersistentVolume
	unique string
}

// Check returns the conditions that hold in s, without any threshold.
func Check(s Snapshot) []Finding {
	pvcs := map[string]*corev1.PersistentVolumeClaim{}
	for i := range s.PVCs {
		pvcs[s.PVCs[i].Namespace+"/"+s.PVCs[i].Name] = s.PVCs[i]
	}
	pvs := map[string]*corev1.PersistentVolume{}
	for i := range s.PVs {
		pvs[s.PVs[i].Name] = s.PVs[i]
	}
	noAttach := map[string]bool{}
	for _, d := range s.CSIDrivers {
		if d.Spec.AttachRequired != nil && !*d.Spec.AttachRequired {
			noAttach[d.Name] = true
		}
	}
	nodes := map[string]*corev1.Node{}
	for i := range s.Nodes {
		nodes[s.Nodes[i].Name] = s.Nodes[i]
	}
	// VolumeAttachments by (PV name, node).
	vas := map[[2]string]*storagev1.VolumeAttachment{}
	for i := range s.VolumeAttachments {
		va := s.VolumeAttachments[i]
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil {
			vas[[2]string{*pv, va.Spec.NodeName}] = va
		}
	}

	var uses []podVolume
	for i := range s.Pods {
		pod := s.Pods[i]
		if pod.Spec.NodeName == "" {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			pvc := pvcs[pod.Namespace+"/"+v.PersistentVolumeClaim.ClaimName]
			if pvc == nil || pvc.Spec.VolumeName == "" {
				continue
			}
			pv := pvs[pvc.Spec.VolumeName]
			if pv == nil || pv.Spec.CSI == nil || noAttach[pv.Spec.CSI.Driver] {
				continue // not an attachable CSI volume: nothing to strand
			}
			uses = append(uses, podVolume{pod: pod, pv: pv, unique: UniqueVolumeName(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)})
		}
	}

	// (node, unique volume name) listed in the node's status.volumesAttached:
	// one pass over the lists rather than a search of the node's list per
	// volume, which grew with pods x volumes per node.
	listedOn := map[[2]string]bool{}
	for i := range s.Nodes {
		for _, a := range s.Nodes[i].Status.VolumesAttached {
			listedOn[[2]string{s.Nodes[i].Name, string(a.Name)}] = true
		}
	}

	var out []Finding
	for _, u := range uses {
		node := nodes[u.pod.Spec.NodeName]
		if node == nil {
			continue
		}
		listed := listedOn[[2]string{node.Name, u.unique}]
		va := vas[[2]string{u.pv.Name, node.Name}]
		vaLive := va != nil && va.DeletionTimestamp == nil
		vaAttached := vaLive && va.Status.Attached
		var kind Kind
		switch {
		case Strandable(u.pod) && vaAttached && !listed:
			kind = Stranded
		case listed && !vaAttached && mayMount(u.pod):
			kind = ListedNotAttached
		case !vaLive && hasMounted(u.pod) && inUse(node, u.unique):
			kind = DetachedUnderMount
		default:
			continue // the common case: nothing to build
		}
		f := Finding{Kind: kind, Pod: u.pod.Namespace + "/" + u.pod.Name, PodUID: string(u.pod.UID), Node: node.Name, Volume: u.unique, PV: u.pv.Name, Since: s.Time}
		f.VolumeAttachment = AttachmentName(u.pv.Spec.CSI.VolumeHandle, u.pv.Spec.CSI.Driver, node.Name)
		if va != nil {
			f.VolumeAttachment = va.Name
		}
		switch kind {
		case Stranded:
			f.Evidence = fmt.Sprintf("VolumeAttachment %s attached=true, volume absent from node %s status.volumesAttached %v", va.Name, node.Name, attachedNames(node))
		case ListedNotAttached:
			f.Evidence = fmt.Sprintf("volume listed in node %s status.volumesAttached, but %s", node.Name, attachmentState(va))
		case DetachedUnderMount:
			f.Evidence = fmt.Sprintf("%s while pod %s still has the volume mounted", attachmentState(va), f.Pod)
		}
		out = append(out, f)
	}
	out = append(out, phantoms(s, uses, noAttach, vas)...)
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// phantoms are the phantom listings of s: for every volume listed in a
// node's status.volumesAttached, no attached, live VolumeAttachment for
// (volume, node), and no pod on the node that needs the volume (not
// finished: the same mayMount that makes violation (a), so the two are
// disjoint). A listed volume counts only if the snapshot has its PV (an
// attachable CSI volume, named as in the list) and, when the snapshot is of
// one namespace, the PV is claimed from that namespace.
func phantoms(s Snapshot, uses []podVolume, noAttach map[string]bool, vas map[[2]string]*storagev1.VolumeAttachment) []Finding {
	byUnique := map[string]*corev1.PersistentVolume{}
	for i := range s.PVs {
		pv := s.PVs[i]
		if pv.Spec.CSI == nil || noAttach[pv.Spec.CSI.Driver] {
			continue
		}
		if s.Namespace != "" && (pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != s.Namespace) {
			continue // pods of other namespaces may need it: not in the snapshot
		}
		byUnique[UniqueVolumeName(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)] = pv
	}
	needed := map[[2]string]bool{} // (unique volume name, node)
	for _, u := range uses {
		if mayMount(u.pod) {
			needed[[2]string{u.unique, u.pod.Spec.NodeName}] = true
		}
	}
	var out []Finding
	for i := range s.Nodes {
		node := s.Nodes[i]
		seen := map[string]bool{}
		for _, a := range node.Status.VolumesAttached {
			unique := string(a.Name)
			pv := byUnique[unique]
			if pv == nil || seen[unique] || needed[[2]string{unique, node.Name}] {
				continue
			}
			seen[unique] = true
			va := vas[[2]string{pv.Name, node.Name}]
			if va != nil && va.DeletionTimestamp == nil && va.Status.Attached {
				continue
			}
			f := Finding{Kind: PhantomListing, Node: node.Name, Volume: unique, PV: pv.Name, Since: s.Time,
				VolumeAttachment: AttachmentName(pv.Spec.CSI.VolumeHandle, pv.Spec.CSI.Driver, node.Name),
				Evidence:         fmt.Sprintf("volume listed in node %s status.volumesAttached, but %s and no pod on the node needs it", node.Name, attachmentState(va))}
			if va != nil {
				f.VolumeAttachment = va.Name
			}
			out = append(out, f)
		}
	}
	return out
}

// mayMount: the pod is on its node and not finished, so the kubelet is
// mounting or has mounted its volumes.
func mayMount(pod *corev1.Pod) bool {
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// hasMounted: a container of the pod started (its volumes were mounted
// before), and the pod still exists, so the kubelet has not confirmed
// unmounting (it confirms deletion only after unmounting).
func hasMounted(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return true
		}
	}
	return false
}

// inUse: the kubelet still reports the volume in node.status.volumesInUse.
// The kubelet drops a volume from the list only once no pod on the node
// has it mounted, and the controller may detach only after that: a detach
// while the server's list still has the volume is under a mount (a stale
// controller view of the node, docs/design.md), while a pod that outlives its
// already reported unmount (its deletion not confirmed yet) is not.
func inUse(n *corev1.Node, unique string) bool {
	return slices.Contains(n.Status.VolumesInUse, corev1.UniqueVolumeName(unique))
}

func attachmentState(va *storagev1.VolumeAttachment) string {
	switch {
	case va == nil:
		return "no VolumeAttachment exists"
	case va.DeletionTimestamp != nil:
		return fmt.Sprintf("VolumeAttachment %s is being deleted", va.Name)
	case !va.Status.Attached:
		return fmt.Sprintf("VolumeAttachment %s is not attached", va.Name)
	}
	return fmt.Sprintf("VolumeAttachment %s is attached", va.Name)
}

func attachedNames(n *corev1.Node) []string {
	var out []string
	for _, a := range n.Status.VolumesAttached {
		out = append(out, string(a.Name))
	}
	return out
}

// Tracker applies the threshold: a finding is reported once its condition
// has held in every snapshot for longer than the threshold (stranding,
// default 30 s) — the attach/detach controller normally reports within one
// 100 ms loop, so anything longer is not a race of the moment.
type Tracker struct {
	// Threshold for Stranded; safety violations and phantom listings use
	// SafetyThreshold.
	Threshold       time.Duration
	SafetyThreshold time.Duration
	since           map[string]time.Time
	// listed is when each (node, unique volume name) was last seen in the
	// node's status.volumesAttached: a stranding's LastListed.
	listed map[[2]string]time.Time
}

// NewTracker returns a tracker with the given thresholds.
func NewTracker(stranding, safety time.Duration) *Tracker {
	return &Tracker{Threshold: stranding, SafetyThreshold: safety, since: map[string]time.Time{}, listed: map[[2]string]time.Time{}}
}

// Observe takes the next snapshot and returns the findings past their
// threshold, with Since set to when each condition began and, on
// strandings, LastListed to when the volume was last seen listed on the
// node (before Since: a stranded volume is unlisted in every snapshot of
// its condition).
func (t *Tracker) Observe(s Snapshot) []Finding {
	current := Check(s)
	seen := map[string]bool{}
	var out []Finding
	for _, f := range current {
		k := f.Key()
		seen[k] = true
		first, ok := t.since[k]
		if !ok {
			first = s.Time
			t.since[k] = first
		}
		threshold := t.SafetyThreshold
		if f.Kind == Stranded {
			threshold = t.Threshold
		}
		if s.Time.Sub(first) > threshold || threshold == 0 {
			f.Since = first
			if f.Kind == Stranded {
				f.LastListed = t.listed[[2]string{f.Node, f.Volume}]
			}
			out = append(out, f)
		}
	}
	for _, n := range s.Nodes {
		for _, a := range n.Status.VolumesAttached {
			t.listed[[2]string{n.Name, string(a.Name)}] = s.Time
		}
	}
	for k := range t.since {
		if !seen[k] {
			delete(t.since, k) // the condition broke: it must hold continuously
		}
	}
	return out
}
