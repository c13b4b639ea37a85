package timeline

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strandlab/strandlab/internal/fault"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func node(attached, inUse []string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	for _, v := range attached {
		n.Status.VolumesAttached = append(n.Status.VolumesAttached, corev1.AttachedVolume{Name: corev1.UniqueVolumeName(v)})
	}
	for _, v := range inUse {
		n.Status.VolumesInUse = append(n.Status.VolumesInUse, corev1.UniqueVolumeName(v))
	}
	return n
}

func events(es []Entry) string {
	var out []string
	for _, e := range es {
		out = append(out, e.Event)
	}
	return strings.Join(out, "; ")
}

func TestNodeChanges(t *testing.T) {
	tests := []struct {
		name     string
		old, cur *corev1.Node
		want     string
		changes  []Change
	}{
		{"heartbeat", node([]string{"v1"}, []string{"v1"}), node([]string{"v1"}, []string{"v1"}), "", nil},
		{"removed from volumesAttached", node([]string{"v1", "v2"}, nil), node([]string{"v2"}, nil), "node node-1 status.volumesAttached - v1 (now 1)", []Change{""}},
		{"added to volumesAttached", nil, node([]string{"v1"}, nil), "node node-1 status.volumesAttached + v1 (now 1)", []Change{VolumeListed}},
		{"added to volumesInUse", node(nil, nil), node(nil, []string{"v1"}), "node node-1 status.volumesInUse + v1 (now 1)", []Change{""}},
		{"both lists", node([]string{"v1"}, []string{"v1"}), node(nil, nil), "node node-1 status.volumesAttached - v1 (now 0); node node-1 status.volumesInUse - v1 (now 0)", []Change{"", VolumeReleased}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NodeChanges(t0, tc.old, tc.cur)
			if events(got) != tc.want {
				t.Errorf("got %q, want %q", events(got), tc.want)
			}
			if len(got) != len(tc.changes) {
				t.Fatalf("got %d entries, want %d", len(got), len(tc.changes))
			}
			for i, e := range got {
				if e.Change != tc.changes[i] {
					t.Errorf("entry %d: change %q, want %q", i, e.Change, tc.changes[i])
				}
			}
			for _, e := range got {
				if e.Node != "node-1" || e.Source != API || !e.Time.Equal(t0) {
					t.Errorf("entry %+v: want node-1, source api, time t0", e)
				}
			}
		})
	}
}

func attachment(attached, deleting bool) *storagev1.VolumeAttachment {
	pv := "pv-1"
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "csi-1"},
		Spec:   storagev1.VolumeAttachmentSpec{NodeName: "node-1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
		Status: storagev1.VolumeAttachmentStatus{Attached: attached}}
	if deleting {
		va.DeletionTimestamp = &metav1.Time{Time: t0}
	}
	return va
}

func TestVolumeAttachmentChanges(t *testing.T) {
	tests := []struct {
		name     string
		old, cur *storagev1.VolumeAttachment
		want     string
		// detach: the entries that are a detach request
		detach int
	}{
		{"created", nil, attachment(false, false), "VolumeAttachment csi-1 (pv-1 on node-1) created", 0},
		{"attached", attachment(false, false), attachment(true, false), "VolumeAttachment csi-1 (pv-1 on node-1) attached=true", 0},
		{"detach requested", attachment(true, false), attachment(true, true), "VolumeAttachment csi-1 (pv-1 on node-1) deletion requested (detach)", 1},
		{"deleted", attachment(false, true), nil, "VolumeAttachment csi-1 (pv-1 on node-1) deleted", 0},
		{"deleted, its deletion timestamp never seen", attachment(true, false), nil, "VolumeAttachment csi-1 (pv-1 on node-1) deleted", 1},
		{"no change", attachment(true, false), attachment(true, false), "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := VolumeAttachmentChanges(t0, tc.old, tc.cur)
			if events(got) != tc.want {
				t.Errorf("got %q, want %q", events(got), tc.want)
			}
			detach := 0
			for _, e := range got {
				if e.Change == DetachRequested {
					detach++
				}
			}
			if detach != tc.detach {
				t.Errorf("%d detach requests, want %d", detach, tc.detach)
			}
			for _, e := range got {
				if e.Attachment != "csi-1" || e.PV != "pv-1" || e.Node != "node-1" {
					t.Errorf("entry %+v lacks its subjects", e)
				}
			}
		})
	}
}

func TestPodChanges(t *testing.T) {
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", UID: "0123456789"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	scheduled := pending.DeepCopy()
	scheduled.Spec.NodeName = "node-1"
	running := scheduled.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	terminating := running.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{Time: t0}
	succeeded := terminating.DeepCopy()
	succeeded.Status.Phase = corev1.PodSucceeded
	failed := terminating.DeepCopy()
	failed.Status.Phase = corev1.PodFailed
	tests := []struct {
		name     string
		old, cur *corev1.Pod
		want     string
		changes  []Change
	}{
		{"created", nil, pending, "pod ns/web-0 (uid 01234567) created; pod ns/web-0 (uid 01234567) phase Pending", []Change{"", ""}},
		{"scheduled", pending, scheduled, "pod ns/web-0 (uid 01234567) scheduled to node-1", []Change{""}},
		{"running", scheduled, running, "pod ns/web-0 (uid 01234567) phase Running", []Change{""}},
		{"terminating", running, terminating, "pod ns/web-0 (uid 01234567) terminating", []Change{""}},
		{"succeeded", terminating, succeeded, "pod ns/web-0 (uid 01234567) phase Succeeded", []Change{PodTerminal}},
		{"failed", terminating, failed, "pod ns/web-0 (uid 01234567) phase Failed", []Change{PodTerminal}},
		{"deleted", succeeded, nil, "pod ns/web-0 (uid 01234567) deleted", []Change{PodGone}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			es := PodChanges(t0, tc.old, tc.cur)
			if got := events(es); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			var changes []Change
			for _, e := range es {
				changes = append(changes, e.Change)
			}
			if !slices.Equal(changes, tc.changes) {
				t.Errorf("changes %q, want %q", changes, tc.changes)
			}
		})
	}
}

func TestFromProxyShowsTheEmptyPatch(t *testing.T) {
	journal := []fault.JournalEntry{
		{Time: t0, Kind: "event_delayed", Resource: "nodes", Name: "node-1", Verb: "MODIFIED", Release: t0.Add(3 * time.Second), Body: "[]"},
		{Time: t0.Add(time.Second), Kind: "request", Resource: "nodes/status", Name: "node-1", Verb: "PATCH", Body: "{}", Code: 200},
		{Time: t0.Add(time.Second), Kind: "request", Resource: "volumeattachments", Name: "csi-1", Verb: "DELETE", Code: 200},
		{Time: t0.Add(time.Second), Kind: "api_error", Resource: "nodes/status", Name: "node-1", Verb: "PATCH", Body: `{"status":{}}`, Code: 500},
	}
	// A heartbeat held behind it, with the same list, adds nothing.
	journal = append(journal, fault.JournalEntry{Time: t0.Add(2 * time.Second), Kind: "event_delayed", Resource: "nodes", Name: "node-1", Verb: "MODIFIED", Release: t0.Add(5 * time.Second), Body: "[]"})
	got := FromProxy(journal)
	want := []string{
		"watch MODIFIED event for node-1 (status.volumesAttached []) held back from kube-controller-manager for 3s",
		"watch MODIFIED event for node-1 (status.volumesAttached []) delivered to kube-controller-manager",
		"kube-controller-manager PATCH nodes/node-1/status {} -> 200",
		"kube-controller-manager DELETE volumeattachments/csi-1 -> 200",
		`kube-controller-manager PATCH nodes/node-1/status {"status":{}} -> 500 injected by the proxy (apiErrors), never reached the API server`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries %q, want %d", len(got), events(got), len(want))
	}
	for i := range want {
		if got[i].Event != want[i] {
			t.Errorf("entry %d = %q, want %q", i, got[i].Event, want[i])
		}
	}
	if !got[1].Time.Equal(t0.Add(3*time.Second)) || got[3].Attachment != "csi-1" || got[2].Node != "node-1" || got[4].Node != "node-1" {
		t.Errorf("times or subjects wrong: %+v", got)
	}
}

// The CSI driver's journal becomes one entry per affected call, about its
// PV on its node, so that a stranding's timeline on that PV keeps it and
// another node's call stays out.
func TestFromCSIDriver(t *testing.T) {
	journal := []fault.JournalEntry{
		{Time: t0, Kind: fault.JournalCSIError, Resource: "csi", Verb: "ControllerUnpublishVolume", Name: "pv-1", Node: "node-1", Code: 4, Body: "csiErrors[0] volume=v1 code=DEADLINE_EXCEEDED latency=15s"},
		{Time: t0.Add(time.Second), Kind: fault.JournalCSIError, Resource: "csi", Verb: "NodeStageVolume", Name: "pv-1", Node: "node-2", Body: "csiErrors[1] volume=v1 code= latency=2s"},
		{Time: t0, Kind: fault.JournalRequest, Resource: "nodes/status", Name: "node-1", Verb: "PATCH", Code: 200},
	}
	got := FromCSIDriver(journal)
	want := []string{
		"ControllerUnpublishVolume for node-1 failed by strandlab's CSI driver (csiErrors[0] volume=v1 code=DEADLINE_EXCEEDED latency=15s)",
		"NodeStageVolume for node-2 slowed by strandlab's CSI driver (csiErrors[1] volume=v1 code= latency=2s)",
	}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", events(got), want)
	}
	for i := range want {
		if got[i].Event != want[i] || got[i].Source != CSI || got[i].PV != "pv-1" {
			t.Errorf("entry %d = %+v, want %q about pv-1 from %s", i, got[i], want[i], CSI)
		}
	}
	f := Focus{Node: "node-1", PV: "pv-1", From: t0, To: t0.Add(time.Minute)}
	if sel := f.Select(got); len(sel) != 1 || sel[0].Node != "node-1" {
		t.Errorf("a stranding of pv-1 on node-1 keeps %q, want only node-1's call", events(sel))
	}
}

func TestFocusSelect(t *testing.T) {
	f := Focus{Pod: "ns/web-0", Node: "node-1", Volume: "v1", PV: "pv-1", Attachment: "csi-1", From: t0, To: t0.Add(10 * time.Second)}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	entries := []Entry{
		{Time: at(5), Event: "later", Node: "node-1"},
		{Time: at(1), Event: "own pod", Pod: "ns/web-0"},
		{Time: at(1), Event: "other pod", Pod: "ns/web-1"},
		{Time: at(2), Event: "other node", Node: "node-2"},
		{Time: at(2), Event: "own attachment", Attachment: "csi-1", PV: "pv-1", Node: "node-1"},
		{Time: at(2), Event: "other attachment on the node", Attachment: "csi-2", PV: "pv-2", Node: "node-1"},
		{Time: at(3), Event: "own volume listed", Node: "node-1", Volume: "v1"},
		{Time: at(3), Event: "other volume listed", Node: "node-1", Volume: "v2"},
		{Time: at(-1), Event: "before the window", Node: "node-1"},
		{Time: at(11), Event: "after the window", Node: "node-1"},
	}
	if got, want := events(f.Select(entries)), "own pod; own attachment; own volume listed; later"; got != want {
		t.Errorf("Select = %q, want %q", got, want)
	}
}
