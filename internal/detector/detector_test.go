package detector

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const driver = "hostpath.csi.k8s.io"

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// world builds a snapshot: pod web-0 (UID uid-web-0) with PVC data-0-web-0
// -> PV pv-0 (handle h0), and node-1/node-2, adjusted by the options.
type world struct {
	noPod       bool      // the pod is gone (its PVC and PV stay)
	podUID      types.UID // "" = uid-web-0
	podNode     string
	podDeleting bool
	podRunning  bool
	podPhase    corev1.PodPhase
	listedOn    []string // nodes listing the volume in volumesAttached
	inUseOn     []string // nodes reporting the volume in volumesInUse
	va          *vaState
}

type vaState struct {
	node     string
	attached bool
	deleting bool
}

func (w world) snapshot(at time.Time) Snapshot {
	pvName := "pv-0"
	uid := w.podUID
	if uid == "" {
		uid = "uid-web-0"
	}
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", UID: uid},
		Spec: corev1.PodSpec{NodeName: w.podNode, Volumes: []corev1.Volume{{Name: "data",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0-web-0"}}}}},
		Status: corev1.PodStatus{Phase: w.podPhase},
	}
	if pod.Status.Phase == "" {
		pod.Status.Phase = corev1.PodPending
	}
	if w.podDeleting {
		pod.DeletionTimestamp = &metav1.Time{Time: t0}
	}
	if w.podRunning {
		pod.Status.Phase = corev1.PodRunning
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	} else {
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	}
	s := Snapshot{
		Time: at,
		Pods: []*corev1.Pod{&pod},
		PVCs: []*corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data-0-web-0", Namespace: "ns"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pvName}}},
		PVs: []*corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: pvName},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "h0"}}}}},
	}
	for _, n := range []string{"node-1", "node-2"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
		for _, l := range w.listedOn {
			if l == n {
				node.Status.VolumesAttached = []corev1.AttachedVolume{{Name: corev1.UniqueVolumeName(UniqueVolumeName(driver, "h0"))}}
			}
		}
		for _, l := range w.inUseOn {
			if l == n {
				node.Status.VolumesInUse = []corev1.UniqueVolumeName{corev1.UniqueVolumeName(UniqueVolumeName(driver, "h0"))}
			}
		}
		s.Nodes = append(s.Nodes, node)
	}
	if w.noPod {
		s.Pods = nil
	}
	if w.va != nil {
		va := storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "csi-x"},
			Spec:   storagev1.VolumeAttachmentSpec{Attacher: driver, NodeName: w.va.node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}},
			Status: storagev1.VolumeAttachmentStatus{Attached: w.va.attached}}
		if w.va.deleting {
			va.DeletionTimestamp = &metav1.Time{Time: t0}
		}
		s.VolumeAttachments = []*storagev1.VolumeAttachment{&va}
	}
	return s
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		w    world
		want Kind // "" = no finding
	}{
		{"attached and listed: healthy", world{podNode: "node-1", podRunning: true, listedOn: []string{"node-1"}, va: &vaState{"node-1", true, false}}, ""},
		{"attached, not listed: stranded", world{podNode: "node-1", listedOn: nil, va: &vaState{"node-1", true, false}}, Stranded},
		{"attached, not listed, pod Running: not stranded", world{podNode: "node-1", podRunning: true, va: &vaState{"node-1", true, false}}, ""},
		{"VolumeAttachment being deleted: not stranded", world{podNode: "node-1", va: &vaState{"node-1", true, true}}, ""},
		{"attachment on another node than the pod: not stranded", world{podNode: "node-2", va: &vaState{"node-1", true, false}}, ""},
		{"pod terminating: not stranded", world{podNode: "node-1", podDeleting: true, va: &vaState{"node-1", true, false}}, ""},
		{"attaching (not yet attached), not listed: not stranded", world{podNode: "node-1", va: &vaState{"node-1", false, false}}, ""},
		{"listed with no attachment: safety violation", world{podNode: "node-1", listedOn: []string{"node-1"}}, ListedNotAttached},
		{"listed while the attachment is being deleted: safety violation", world{podNode: "node-1", podRunning: true, listedOn: []string{"node-1"}, va: &vaState{"node-1", true, true}}, ListedNotAttached},
		{"listed, pod finished: phantom listing, no violation", world{podNode: "node-1", podPhase: corev1.PodSucceeded, listedOn: []string{"node-1"}}, PhantomListing},
		{"listed with no attachment, pod gone: phantom listing", world{noPod: true, listedOn: []string{"node-1"}}, PhantomListing},
		{"listed while the attachment is being deleted, pod gone: phantom listing, not (a)", world{noPod: true, listedOn: []string{"node-1"}, va: &vaState{"node-1", true, true}}, PhantomListing},
		{"listed, attachment not attached, pod gone: phantom listing", world{noPod: true, listedOn: []string{"node-1"}, va: &vaState{"node-1", false, false}}, PhantomListing},
		{"listed, pod unscheduled: phantom listing", world{podNode: "", listedOn: []string{"node-1"}}, PhantomListing},
		{"listed and attached, pod gone (detach not started): fine", world{noPod: true, listedOn: []string{"node-1"}, va: &vaState{"node-1", true, false}}, ""},
		{"detached under a running pod: safety violation", world{podNode: "node-1", podRunning: true, inUseOn: []string{"node-1"}}, DetachedUnderMount},
		{"detach being requested under a running pod: safety violation", world{podNode: "node-1", podRunning: true, inUseOn: []string{"node-1"}, va: &vaState{"node-1", true, true}}, DetachedUnderMount},
		{"detached after the kubelet reported the volume unused: fine", world{podNode: "node-1", podPhase: corev1.PodSucceeded, podRunning: false}, ""},
		{"detached, pod still there but volume no longer in use: fine", world{podNode: "node-1", podRunning: true}, ""},
		{"no attachment yet for a pod that never mounted: fine", world{podNode: "node-1"}, ""},
		{"unscheduled pod: nothing", world{podNode: ""}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(tc.w.snapshot(t0))
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("findings %+v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Kind != tc.want {
				t.Fatalf("findings %+v, want one %s", got, tc.want)
			}
			f := got[0]
			if f.Node != "node-1" || f.Volume != "kubernetes.io/csi/hostpath.csi.k8s.io^h0" || f.PV != "pv-0" || f.Evidence == "" {
				t.Errorf("finding %+v", f)
			}
			// A phantom listing is about no pod; the others name theirs.
			if wantPod, wantUID := "ns/web-0", "uid-web-0"; tc.want == PhantomListing && (f.Pod != "" || f.PodUID != "") ||
				tc.want != PhantomListing && (f.Pod != wantPod || f.PodUID != wantUID) {
				t.Errorf("finding of pod %q (UID %q)", f.Pod, f.PodUID)
			}
			// The attachment is named even when it does not exist.
			if wantVA := AttachmentName("h0", driver, "node-1"); tc.w.va == nil && f.VolumeAttachment != wantVA {
				t.Errorf("VolumeAttachment %q, want %q", f.VolumeAttachment, wantVA)
			}
		})
	}
}

func TestAttachmentNameIsTheControllers(t *testing.T) {
	// sha256("vol-1" + "hostpath.csi.k8s.io" + "node-1"), as upstream's
	// getAttachmentName computes it.
	want := "csi-a5a2e67339ab5660a390dc86be397e784322823ff01f40cf2c01a72c3cab1374"
	if got := AttachmentName("vol-1", "hostpath.csi.k8s.io", "node-1"); got != want {
		t.Errorf("AttachmentName = %q, want %q", got, want)
	}
}

func TestAttachNotRequiredIsIgnored(t *testing.T) {
	s := world{podNode: "node-1", va: &vaState{"node-1", true, false}}.snapshot(t0)
	no := false
	s.CSIDrivers = []*storagev1.CSIDriver{{ObjectMeta: metav1.ObjectMeta{Name: driver}, Spec: storagev1.CSIDriverSpec{AttachRequired: &no}}}
	if got := Check(s); len(got) != 0 {
		t.Errorf("findings for a driver without attach: %+v", got)
	}
}

func TestTrackerThreshold(t *testing.T) {
	stranded := world{podNode: "node-1", va: &vaState{"node-1", true, false}}
	healthy := world{podNode: "node-1", podRunning: true, listedOn: []string{"node-1"}, va: &vaState{"node-1", true, false}}
	steps := []struct {
		at   time.Duration
		w    world
		want int
	}{
		{0, stranded, 0},
		{20 * time.Second, stranded, 0},
		{25 * time.Second, healthy, 0}, // the condition broke: the clock restarts
		{30 * time.Second, stranded, 0},
		{59 * time.Second, stranded, 0},
		{61 * time.Second, stranded, 1}, // held > 30 s since 30 s
	}
	tr := NewTracker(30*time.Second, 0)
	for _, st := range steps {
		got := tr.Observe(st.w.snapshot(t0.Add(st.at)))
		if len(got) != st.want {
			t.Fatalf("at %v: %d findings, want %d", st.at, len(got), st.want)
		}
		if len(got) == 1 && !got[0].Since.Equal(t0.Add(30*time.Second)) {
			t.Errorf("since %v, want the start of the unbroken run", got[0].Since)
		}
	}
	// Safety violations with a zero threshold are reported at once.
	tr = NewTracker(30*time.Second, 0)
	if got := tr.Observe(world{podNode: "node-1", listedOn: []string{"node-1"}}.snapshot(t0)); len(got) != 1 || got[0].Kind != ListedNotAttached {
		t.Errorf("safety violation not reported at once: %+v", got)
	}
}

func TestStrandable(t *testing.T) {
	tests := []struct {
		name string
		w    world
		want bool
	}{
		{"bound, waiting for its volumes", world{podNode: "node-1"}, true},
		{"bound, Running", world{podNode: "node-1", podRunning: true}, false},
		{"bound, being deleted", world{podNode: "node-1", podDeleting: true}, false},
		{"not bound", world{podNode: ""}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.w.snapshot(t0).Pods[0]
			if got := Strandable(pod); got != tc.want {
				t.Errorf("Strandable = %v, want %v", got, tc.want)
			}
		})
	}
}

// Every volume that node-1 lists without an attached, live VolumeAttachment
// is reported exactly once: as violation (a) when a pod on node-1 needs it,
// as a phantom listing otherwise; never both.
func TestListedWithoutAttachmentIsAViolationOrAPhantom(t *testing.T) {
	vaStates := []*vaState{nil, {"node-1", true, false}, {"node-1", false, false}, {"node-1", true, true}, {"node-2", true, false}}
	for _, noPod := range []bool{false, true} {
		for _, podNode := range []string{"", "node-1", "node-2"} {
			for _, phase := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed} {
				for _, deleting := range []bool{false, true} {
					for _, va := range vaStates {
						w := world{noPod: noPod, podNode: podNode, podPhase: phase, podDeleting: deleting, listedOn: []string{"node-1"}, va: va}
						vaAttached := va != nil && va.node == "node-1" && va.attached && !va.deleting
						podNeeds := !noPod && podNode == "node-1" && (phase == corev1.PodPending || phase == corev1.PodRunning)
						var want Kind
						switch {
						case vaAttached:
						case podNeeds:
							want = ListedNotAttached
						default:
							want = PhantomListing
						}
						var got []Kind
						for _, f := range Check(w.snapshot(t0)) {
							if f.Node == "node-1" && (f.Kind == ListedNotAttached || f.Kind == PhantomListing) {
								got = append(got, f.Kind)
							}
						}
						if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || got[0] != want) {
							t.Errorf("%+v (attachment %+v): listing findings %v, want %q", w, va, got, want)
						}
					}
				}
			}
		}
	}
}

func TestPhantomListingScope(t *testing.T) {
	tests := []struct {
		name      string
		namespace string // the snapshot's
		claimNS   string // the PV's claimRef namespace; "" = no claimRef
		want      int
	}{
		{"all namespaces: every listed volume is checked", "", "other", 1},
		{"all namespaces, unclaimed PV", "", "", 1},
		{"one namespace, PV claimed from it", "ns", "ns", 1},
		{"one namespace, PV claimed from another: its pods are not in the snapshot", "ns", "other", 0},
		{"one namespace, unclaimed PV: cannot tell", "ns", "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := world{noPod: true, listedOn: []string{"node-1"}}.snapshot(t0)
			s.Namespace = tc.namespace
			if tc.claimNS != "" {
				s.PVs[0].Spec.ClaimRef = &corev1.ObjectReference{Namespace: tc.claimNS, Name: "data-0-web-0"}
			}
			if got := Check(s); len(got) != tc.want {
				t.Errorf("findings %+v, want %d phantom listing(s)", got, tc.want)
			}
		})
	}
}

// The volume listed on node-2 too, where nothing needs it: a phantom on
// node-2, while node-1 (attached, listed, pod Running there) is healthy.
func TestPhantomListingOnAnotherNode(t *testing.T) {
	got := Check(world{podNode: "node-1", podRunning: true, listedOn: []string{"node-1", "node-2"}, va: &vaState{"node-1", true, false}}.snapshot(t0))
	if len(got) != 1 || got[0].Kind != PhantomListing || got[0].Node != "node-2" || got[0].VolumeAttachment != AttachmentName("h0", driver, "node-2") {
		t.Errorf("findings %+v, want one phantom listing on node-2 naming its (missing) attachment", got)
	}
}

// A phantom listing, like a safety violation, is reported once it holds in
// two consecutive snapshots of the runner (250 ms apart, hold 200 ms).
func TestTrackerPhantomListingHold(t *testing.T) {
	phantom := world{noPod: true, listedOn: []string{"node-1"}, va: &vaState{"node-1", true, true}}
	healthy := world{noPod: true}
	ms := time.Millisecond
	steps := []struct {
		at   time.Duration
		w    world
		want int
	}{
		{0, phantom, 0},        // seen once: not yet
		{250 * ms, healthy, 0}, // broke: the clock restarts
		{500 * ms, phantom, 0},
		{750 * ms, phantom, 1}, // two snapshots in a row
		{1000 * ms, phantom, 1},
	}
	tr := NewTracker(30*time.Second, 200*ms)
	for _, st := range steps {
		got := tr.Observe(st.w.snapshot(t0.Add(st.at)))
		if len(got) != st.want {
			t.Fatalf("at %v: findings %+v, want %d", st.at, got, st.want)
		}
		if len(got) == 1 && (got[0].Kind != PhantomListing || !got[0].Since.Equal(t0.Add(500*ms))) {
			t.Errorf("at %v: %+v, want a phantom listing since 500ms", st.at, got[0])
		}
	}
}

// A StatefulSet replacement (same name, new UID) whose volume is stranded
// too is a new finding: its clock starts when it is first seen, not when
// its predecessor's stranding began.
func TestTrackerReplacementIsANewFinding(t *testing.T) {
	old := world{podNode: "node-1", va: &vaState{"node-1", true, false}}
	replacement := old
	replacement.podUID = "uid-web-0-new"
	steps := []struct {
		at      time.Duration
		w       world
		wantUID string // "" = nothing reported
	}{
		{0, old, ""},
		{31 * time.Second, old, "uid-web-0"},
		{32 * time.Second, replacement, ""}, // same name: not the old finding
		{60 * time.Second, replacement, ""},
		{63 * time.Second, replacement, "uid-web-0-new"},
	}
	tr := NewTracker(30*time.Second, 0)
	for _, st := range steps {
		got := tr.Observe(st.w.snapshot(t0.Add(st.at)))
		if st.wantUID == "" {
			if len(got) != 0 {
				t.Fatalf("at %v: findings %+v, want none", st.at, got)
			}
			continue
		}
		if len(got) != 1 || got[0].PodUID != st.wantUID || got[0].Pod != "ns/web-0" {
			t.Fatalf("at %v: findings %+v, want the stranding of %s", st.at, got, st.wantUID)
		}
	}
	if got := tr.Observe(replacement.snapshot(t0.Add(64 * time.Second))); len(got) != 1 || !got[0].Since.Equal(t0.Add(32*time.Second)) {
		t.Errorf("replacement's stranding %+v, want it since 32s", got)
	}
}

// A stranding names the last snapshot in which its volume was listed on
// its node: what the report needs to tell one stranding episode that
// carries over to the pod's replacement from two (docs/design.md,
// "Stranding episode").
func TestTrackerLastListed(t *testing.T) {
	attached := &vaState{"node-1", true, false}
	stranded := world{podNode: "node-1", va: attached}
	replacement := stranded
	replacement.podUID = "uid-web-0-new"
	listed := world{podNode: "node-1", podRunning: true, listedOn: []string{"node-1"}, va: attached}
	listedElsewhere := world{podNode: "node-2", podRunning: true, listedOn: []string{"node-2"}, va: &vaState{"node-2", true, false}}
	type step struct {
		at         time.Duration
		w          world
		lastListed time.Duration // of the reported stranding; -1: never listed
	}
	const none, unreported = -1, -2
	tests := []struct {
		name  string
		steps []step
	}{
		{"never listed", []step{{0, stranded, unreported}, {11 * time.Second, stranded, none}}},
		{"listed, then stranded", []step{{0, listed, unreported}, {time.Second, stranded, unreported}, {12 * time.Second, stranded, 0}}},
		{"the replacement strands with no listing in between: the same last listing", []step{
			{0, listed, unreported}, {time.Second, stranded, unreported}, {12 * time.Second, stranded, 0},
			{13 * time.Second, replacement, unreported}, {24 * time.Second, replacement, 0}}},
		{"listed in between: the later listing", []step{
			{0, listed, unreported}, {time.Second, stranded, unreported}, {12 * time.Second, stranded, 0},
			{13 * time.Second, listed, unreported}, {14 * time.Second, replacement, unreported}, {25 * time.Second, replacement, 13 * time.Second}}},
		{"a listing on another node does not count", []step{
			{0, listedElsewhere, unreported}, {time.Second, stranded, unreported}, {12 * time.Second, stranded, none}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker(10*time.Second, 0)
			for _, st := range tc.steps {
				got := tr.Observe(st.w.snapshot(t0.Add(st.at)))
				var strandings []Finding
				for _, f := range got {
					if f.Kind == Stranded {
						strandings = append(strandings, f)
					}
				}
				if st.lastListed == unreported {
					if len(strandings) != 0 {
						t.Fatalf("at %v: %+v, want no stranding reported", st.at, strandings)
					}
					continue
				}
				want := time.Time{}
				if st.lastListed != none {
					want = t0.Add(st.lastListed)
				}
				if len(strandings) != 1 || !strandings[0].LastListed.Equal(want) {
					t.Fatalf("at %v: %+v, want one stranding last listed at %v", st.at, strandings, want)
				}
			}
		})
	}
}
