package scan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/strandlab/strandlab/internal/detector"
)

const (
	driver = "hostpath.csi.k8s.io"
	volume = "kubernetes.io/csi/hostpath.csi.k8s.io^h0"
)

// world is pod ns/web-0 with PVC data-0-web-0 -> PV pv-0 (CSI handle h0, a
// driver that needs attach) and nodes node-1/node-2 managed by the
// attach/detach controller, adjusted by the fields. Times are ages relative
// to the test's start, since the scan measures against the real clock.
type world struct {
	noPod        bool // the pod is gone (its PVC and PV stay)
	podNode      string
	podRunning   bool
	podPhase     corev1.PodPhase // overrides Pending (podRunning sets Running)
	claimNS      string          // the PV's claimRef namespace; "" = none
	scheduledAgo time.Duration
	listedOn     string        // node listing the volume in volumesAttached
	inUseOn      string        // node reporting the volume in volumesInUse
	nodeWriteAgo time.Duration // when the controller last changed node-1's volumesAttached; 0 = no entry
	unmanaged    bool          // nodes without controller-managed-attach-detach
	va           *vaState
}

type vaState struct {
	node     string
	attached bool
	deleting bool
	writeAgo time.Duration // status.attached last written; 0 = no managedFields
}

func owns(field string) *metav1.FieldsV1 {
	return metav1.NewFieldsV1(`{"f:status":{"f:` + field + `":{}}}`)
}

func (w world) objects(now time.Time) []runtime.Object {
	pvName := "pv-0"
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", UID: "uid-web-0"},
		Spec: corev1.PodSpec{NodeName: w.podNode, Volumes: []corev1.Volume{{Name: "data",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0-web-0"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-w.scheduledAgo))}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}},
	}
	if w.podPhase != "" {
		pod.Status.Phase = w.podPhase
	}
	if w.podRunning {
		pod.Status.Phase = corev1.PodRunning
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "h0"}}}}
	if w.claimNS != "" {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: w.claimNS, Name: "data-0-web-0"}
	}
	objs := []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-0-web-0", Namespace: "ns"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pvName}},
		pv,
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driver}, Spec: storagev1.CSIDriverSpec{AttachRequired: &yes}},
	}
	if !w.noPod {
		objs = append(objs, pod)
	}
	for _, n := range []string{"node-1", "node-2"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if !w.unmanaged {
			node.Annotations = map[string]string{managedAnno: "true"}
		}
		if w.listedOn == n {
			node.Status.VolumesAttached = []corev1.AttachedVolume{{Name: volume, DevicePath: "/dev/x"}}
		}
		if w.inUseOn == n {
			node.Status.VolumesInUse = []corev1.UniqueVolumeName{volume}
		}
		if n == "node-1" && w.nodeWriteAgo > 0 {
			// Another volume keeps the list non-empty, so the controller owns it.
			node.Status.VolumesAttached = append(node.Status.VolumesAttached, corev1.AttachedVolume{Name: "kubernetes.io/csi/other^h9"})
			node.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				Subresource: "status", Time: &metav1.Time{Time: now.Add(-w.nodeWriteAgo)}, FieldsType: "FieldsV1", FieldsV1: owns("volumesAttached")}}
		}
		objs = append(objs, node)
	}
	if w.va != nil {
		va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "csi-x"},
			Spec:   storagev1.VolumeAttachmentSpec{Attacher: driver, NodeName: w.va.node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}},
			Status: storagev1.VolumeAttachmentStatus{Attached: w.va.attached}}
		if w.va.deleting {
			va.DeletionTimestamp = &metav1.Time{Time: now}
			va.Finalizers = []string{"external-attacher/" + driver}
		}
		if w.va.writeAgo > 0 {
			va.ManagedFields = []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
					Time: &metav1.Time{Time: now.Add(-time.Hour)}, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:attacher":{}}}`)},
				{Manager: "csi-attacher", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status",
					Time: &metav1.Time{Time: now.Add(-w.va.writeAgo)}, FieldsType: "FieldsV1", FieldsV1: owns("attached")},
			}
		}
		objs = append(objs, va)
	}
	return objs
}

func scanCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestScan(t *testing.T) {
	old := &vaState{node: "node-1", attached: true, writeAgo: 5 * time.Minute}
	tests := []struct {
		name string
		w    world
		// want is the finding's kind, "" for none; sinceAgo its expected age.
		want     detector.Kind
		sinceAgo time.Duration
	}{
		{"stranded longer than the threshold: since is the attach", world{podNode: "node-1", scheduledAgo: 10 * time.Minute, va: old}, detector.Stranded, 5 * time.Minute},
		{"stranded, pod scheduled after the attach: since is the scheduling", world{podNode: "node-1", scheduledAgo: 2 * time.Minute, va: old}, detector.Stranded, 2 * time.Minute},
		{"stranded, node list changed after the attach: since is that change", world{podNode: "node-1", scheduledAgo: 10 * time.Minute, nodeWriteAgo: 3 * time.Minute, va: old}, detector.Stranded, 3 * time.Minute},
		{"attached and listed: healthy", world{podNode: "node-1", podRunning: true, scheduledAgo: 10 * time.Minute, listedOn: "node-1", va: old}, "", 0},
		{"VolumeAttachment being deleted: not stranded", world{podNode: "node-1", scheduledAgo: 10 * time.Minute,
			va: &vaState{node: "node-1", attached: true, deleting: true, writeAgo: 5 * time.Minute}}, "", 0},
		{"pod on another node: not stranded", world{podNode: "node-2", scheduledAgo: 10 * time.Minute, va: old}, "", 0},
		{"node not managed by the controller: skipped", world{podNode: "node-1", scheduledAgo: 10 * time.Minute, unmanaged: true, va: old}, "", 0},
		{"listed without a VolumeAttachment: safety violation, reported at once", world{podNode: "node-1", scheduledAgo: time.Second, listedOn: "node-1"}, detector.ListedNotAttached, 0},
		{"detached under a running pod: safety violation", world{podNode: "node-1", podRunning: true, scheduledAgo: 10 * time.Minute, inUseOn: "node-1"}, detector.DetachedUnderMount, 0},
		{"attached, not listed, pod Running: not stranded", world{podNode: "node-1", podRunning: true, scheduledAgo: 10 * time.Minute, va: old}, "", 0},
		{"listed without a VolumeAttachment, pod gone: phantom listing, reported at once", world{noPod: true, listedOn: "node-1"}, detector.PhantomListing, 0},
		{"listed while the VolumeAttachment is being deleted, pod gone: phantom listing, not a safety violation", world{noPod: true, listedOn: "node-1",
			va: &vaState{node: "node-1", attached: true, deleting: true, writeAgo: 5 * time.Minute}}, detector.PhantomListing, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now().UTC()
			client := fake.NewClientset(tc.w.objects(start)...)
			// A minute: older than it (2m and more) is reported at once, and
			// nothing here needs the re-check.
			r, err := Scan(scanCtx(t), client, Options{Threshold: time.Minute, Cluster: "test"})
			if err != nil {
				t.Fatal(err)
			}
			wantPods := 1
			if tc.w.noPod {
				wantPods = 0
			}
			if r.Counts.Pods != wantPods || r.Counts.Nodes != 2 || r.Counts.PVs != 1 || r.Counts.PVCs != 1 || r.Counts.CSIDrivers != 1 {
				t.Errorf("counts %+v", r.Counts)
			}
			if tc.want == "" {
				if len(r.Findings) != 0 {
					t.Fatalf("findings %+v, want none", r.Findings)
				}
				return
			}
			if len(r.Findings) != 1 || r.Counts.Findings != 1 {
				t.Fatalf("findings %+v, want one %s", r.Findings, tc.want)
			}
			f := r.Findings[0]
			if f.Kind != tc.want || f.Node != "node-1" || f.Volume != volume || f.PV != "pv-0" || f.Evidence == "" || f.SinceEvidence == "" {
				t.Errorf("finding %+v", f)
			}
			if tc.want == detector.PhantomListing {
				// About no pod, dated by the scan, counted apart from safety violations.
				if f.Pod != "" || f.PodUID != "" || f.Safety() || f.Since.Before(start) || f.Since.After(r.CompletedAt) ||
					r.Counts.PhantomListings != 1 || r.Counts.SafetyViolations != 0 || r.Counts.Stranded != 0 {
					t.Errorf("phantom listing %+v, counts %+v", f, r.Counts)
				}
				return
			}
			if f.Pod != "ns/web-0" || f.PodUID != "uid-web-0" {
				t.Errorf("finding of pod %q (UID %q)", f.Pod, f.PodUID)
			}
			if f.Safety() {
				// Safety violations are dated by the scan that saw them.
				if f.Since.Before(start) || f.Since.After(r.CompletedAt) {
					t.Errorf("since %v, want within the scan [%v, %v]", f.Since, start, r.CompletedAt)
				}
				if r.Counts.SafetyViolations != 1 {
					t.Errorf("counts %+v", r.Counts)
				}
				return
			}
			if want := start.Add(-tc.sinceAgo); !f.Since.Equal(want) {
				t.Errorf("since %v, want %v (%s)", f.Since, want, f.SinceEvidence)
			}
			if f.VolumeAttachment != "csi-x" || r.Counts.Stranded != 1 || f.AgeSeconds < tc.sinceAgo.Seconds() {
				t.Errorf("finding %+v, counts %+v", f, r.Counts)
			}
		})
	}
}

// A candidate younger than the threshold is re-checked until it has held for
// the threshold, by evidence or by the scan's own observation.
func TestYoungCandidateThatPersistsIsReported(t *testing.T) {
	tests := []struct {
		name       string
		vaWriteAgo time.Duration // 0: no managedFields, only observation counts
	}{
		{"attach just reported", time.Millisecond},
		{"no evidence", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now().UTC()
			w := world{podNode: "node-1", scheduledAgo: time.Minute, va: &vaState{node: "node-1", attached: true, writeAgo: tc.vaWriteAgo}}
			threshold := 300 * time.Millisecond
			r, f := scanOneStranding(t, w, start, threshold)
			if f.Since.Before(start.Add(-tc.vaWriteAgo)) || r.CompletedAt.Sub(f.Since) <= threshold {
				t.Errorf("since %v (%s), completed %v: not held past the threshold", f.Since, f.SinceEvidence, r.CompletedAt)
			}
		})
	}
}

// A candidate that clears during the re-check (the controller catches up and
// lists the volume) is not reported.
func TestYoungCandidateThatResolvesIsNotReported(t *testing.T) {
	ctx := scanCtx(t)
	w := world{podNode: "node-1", scheduledAgo: time.Minute, va: &vaState{node: "node-1", attached: true, writeAgo: time.Millisecond}}
	client := fake.NewClientset(w.objects(time.Now())...)
	rechecking := make(chan struct{})
	var once sync.Once
	client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(rechecking) })
		return false, nil, nil // fall through to the object tracker
	})
	fixed := make(chan error, 1)
	go func() {
		select {
		case <-rechecking:
		case <-ctx.Done():
			fixed <- ctx.Err()
			return
		}
		node, err := client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err == nil {
			node.Status.VolumesAttached = []corev1.AttachedVolume{{Name: volume}}
			_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		}
		fixed <- err
	}()
	// The threshold is long: the scan can only end early by the candidate
	// clearing.
	r, err := Scan(ctx, client, Options{Threshold: time.Minute, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-fixed; err != nil {
		t.Fatal(err)
	}
	if len(r.Findings) != 0 || r.Counts.Resolved != 1 {
		t.Errorf("findings %+v, counts %+v: want none, one resolved", r.Findings, r.Counts)
	}
}

func TestForbiddenNamesTheResource(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", nil)
	})
	_, err := Scan(scanCtx(t), client, Options{Threshold: time.Second})
	var apiErr *APIError
	if err == nil || !apierrors.IsForbidden(err) || !errors.As(err, &apiErr) || apiErr.Resource != "nodes" || !strings.Contains(err.Error(), "cannot list nodes") {
		t.Fatalf("error %v", err)
	}
}

// A namespace strandscan cannot confirm is an error, never a clean scan: a
// typo in -n (the namespace does not exist) and a role without get on
// namespaces both fail, naming the namespace.
func TestNamespaceMustExist(t *testing.T) {
	tests := []struct {
		name      string
		namespace string
		forbidden bool
		want      string // "" = the scan succeeds
	}{
		{"exists", "ns", false, ""},
		{"typo", "nss", false, `namespace "nss" does not exist`},
		{"forbidden", "ns", true, "cannot get namespaces ns"},
		{"all namespaces need no get", "", true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := world{podNode: "node-1", podRunning: true, listedOn: "node-1", va: &vaState{node: "node-1", attached: true}}
			client := fake.NewClientset(w.objects(time.Now())...)
			if tc.forbidden {
				client.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, tc.namespace, nil)
				})
			}
			r, err := Scan(scanCtx(t), client, Options{Namespace: tc.namespace, Threshold: time.Second})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.want == "" && len(r.Findings) != 0:
				t.Errorf("findings %+v: want none", r.Findings)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			case tc.forbidden && tc.want != "" && !apierrors.IsForbidden(err):
				t.Errorf("error %v: want the Forbidden status kept, so the RBAC hint is printed", err)
			}
		})
	}
}

// Lists go page by page: a server answering 1 item per page with continue
// tokens yields every item.
func TestSnapshotPaginates(t *testing.T) {
	var pods []runtime.Object
	for _, n := range []string{"a", "b", "c"} {
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "ns"}})
	}
	client := fake.NewClientset(pods...)
	pages := 0
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).ListOptions
		if opts.Limit == 0 {
			t.Error("pods listed without a limit")
		}
		pages++
		i := map[string]int{"": 0, "1": 1, "2": 2}[opts.Continue]
		l := &corev1.PodList{Items: []corev1.Pod{*pods[i].(*corev1.Pod)}}
		if i < 2 {
			l.Continue = string(rune('1' + i))
		}
		return true, l, nil
	})
	s, err := Snapshot(scanCtx(t), client, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 3 || pages != 3 || s.Pods[2].Name != "c" {
		t.Errorf("%d pods in %d pages", len(s.Pods), pages)
	}
}

func TestRender(t *testing.T) {
	start := time.Now().UTC()
	w := world{podNode: "node-1", scheduledAgo: 10 * time.Minute, va: &vaState{node: "node-1", attached: true, writeAgo: 5 * time.Minute}}
	r, err := Scan(scanCtx(t), fake.NewClientset(w.objects(start)...), Options{Threshold: DefaultThreshold, Cluster: "api.example:6443"})
	if err != nil || len(r.Findings) != 1 {
		t.Fatalf("%v %+v", err, r)
	}

	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, r) {
		t.Errorf("JSON round trip:\n got %+v\nwant %+v", back, *r)
	}
	var shape map[string]any
	if err := json.Unmarshal(buf.Bytes(), &shape); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"findings", "scanned_at", "completed_at", "cluster", "counts", "threshold_seconds"} {
		if _, ok := shape[k]; !ok {
			t.Errorf("JSON has no %q: %s", k, buf.String())
		}
	}
	if shape["cluster"] != "api.example:6443" {
		t.Errorf("cluster %v", shape["cluster"])
	}
	if f := shape["findings"].([]any)[0].(map[string]any); f["pod"] != "ns/web-0" || f["pod_uid"] != "uid-web-0" {
		t.Errorf("finding names pod %v (UID %v)", f["pod"], f["pod_uid"])
	}

	buf.Reset()
	if err := WriteTable(&buf, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "KIND ") || !strings.Contains(lines[0], "VOLUMEATTACHMENT") {
		t.Fatalf("table:\n%s", buf.String())
	}
	for _, want := range []string{"stranded", "node-1", "ns/web-0", volume, "csi-x", start.Add(-5 * time.Minute).Format(time.RFC3339), "(5m0s)", "absent from node"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row lacks %q: %s", want, lines[1])
		}
	}

	// An empty report says so, and still marshals a list.
	empty := &Report{Cluster: "c", Findings: []Finding{}}
	buf.Reset()
	if err := WriteJSON(&buf, empty); err != nil || !strings.Contains(buf.String(), `"findings": []`) {
		t.Errorf("%v %s", err, buf.String())
	}
	buf.Reset()
	if err := WriteTable(&buf, empty); err != nil || !strings.HasPrefix(buf.String(), "No stranded volumes") {
		t.Errorf("%v %s", err, buf.String())
	}
}

// A pod that finished after its volume went missing from the node's list
// may have been Running in between: its scheduling time is no evidence,
// and the scan dates the condition by its own observation.
func TestFinishedPodIsDatedByObservation(t *testing.T) {
	start := time.Now().UTC()
	w := world{podNode: "node-1", podPhase: corev1.PodSucceeded, scheduledAgo: 10 * time.Minute, va: &vaState{node: "node-1", attached: true, writeAgo: 5 * time.Minute}}
	threshold := 300 * time.Millisecond
	if _, f := scanOneStranding(t, w, start, threshold); f.Since.Before(start) || !strings.Contains(f.SinceEvidence, "is Succeeded") {
		t.Errorf("since %v (%s): want the scan's own observation, not the 5m-old attach", f.Since, f.SinceEvidence)
	}
}

// With --namespace, a phantom listing is reported only for a volume claimed
// from that namespace: pods of other namespaces, which may need the volume,
// are not read.
func TestPhantomListingWithNamespace(t *testing.T) {
	tests := []struct {
		claimNS string
		want    int
	}{
		{"ns", 1},
		{"other", 0},
	}
	for _, tc := range tests {
		t.Run(tc.claimNS, func(t *testing.T) {
			w := world{noPod: true, listedOn: "node-1", claimNS: tc.claimNS}
			r, err := Scan(scanCtx(t), fake.NewClientset(w.objects(time.Now())...), Options{Namespace: "ns", Threshold: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if r.Counts.PhantomListings != tc.want || len(r.Findings) != tc.want {
				t.Errorf("findings %+v, counts %+v: want %d phantom listing(s)", r.Findings, r.Counts, tc.want)
			}
		})
	}
}

func TestRenderPhantomListing(t *testing.T) {
	w := world{noPod: true, listedOn: "node-1"}
	r, err := Scan(scanCtx(t), fake.NewClientset(w.objects(time.Now())...), Options{Threshold: DefaultThreshold, Cluster: "c"})
	if err != nil || len(r.Findings) != 1 {
		t.Fatalf("%v %+v", err, r)
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "phantom_listing ") || !strings.Contains(lines[1], " node-1 ") ||
		!strings.Contains(lines[1], " - ") || !strings.Contains(lines[1], "no pod on the node needs it") {
		t.Errorf("table:\n%s", buf.String())
	}
	buf.Reset()
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	var shape struct {
		Counts   map[string]int   `json:"counts"`
		Findings []map[string]any `json:"findings"`
	}
	if err := json.Unmarshal(buf.Bytes(), &shape); err != nil {
		t.Fatal(err)
	}
	if shape.Counts["phantom_listings"] != 1 || shape.Counts["safety_violations"] != 0 || shape.Counts["findings"] != 1 ||
		shape.Findings[0]["kind"] != "phantom_listing" || shape.Findings[0]["pod"] != "" {
		t.Errorf("JSON: %s", buf.String())
	}
}

// scanOneStranding scans w's objects with threshold and returns the one
// finding, which must be a stranding, with the scan's report.
func scanOneStranding(t *testing.T, w world, start time.Time, threshold time.Duration) (*Report, Finding) {
	t.Helper()
	r, err := Scan(scanCtx(t), fake.NewClientset(w.objects(start)...), Options{Threshold: threshold, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Findings) != 1 || r.Findings[0].Kind != detector.Stranded {
		t.Fatalf("findings %+v", r.Findings)
	}
	return r, r.Findings[0]
}
