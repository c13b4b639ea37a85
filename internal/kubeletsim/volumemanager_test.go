package kubeletsim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

const (
	testDriver = "hostpath.csi.k8s.io"
	testNode   = "node-1"
)

// fakeNodePlugin records the CSI node calls the volume manager makes.
type fakeNodePlugin struct {
	csi.NodeClient
	mu    sync.Mutex
	calls []string
	// onCall, if set, is called with each call as it is made, to check
	// what holds at that moment.
	onCall func(call string)
}

func (f *fakeNodePlugin) record(call string) {
	if f.onCall != nil {
		f.onCall(call)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeNodePlugin) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeNodePlugin) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest, ...grpc.CallOption) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: testNode}, nil
}
func (f *fakeNodePlugin) NodeStageVolume(_ context.Context, r *csi.NodeStageVolumeRequest, _ ...grpc.CallOption) (*csi.NodeStageVolumeResponse, error) {
	f.record("stage " + r.VolumeId)
	return &csi.NodeStageVolumeResponse{}, nil
}
func (f *fakeNodePlugin) NodeUnstageVolume(_ context.Context, r *csi.NodeUnstageVolumeRequest, _ ...grpc.CallOption) (*csi.NodeUnstageVolumeResponse, error) {
	f.record("unstage " + r.VolumeId)
	return &csi.NodeUnstageVolumeResponse{}, nil
}
func (f *fakeNodePlugin) NodePublishVolume(_ context.Context, r *csi.NodePublishVolumeRequest, _ ...grpc.CallOption) (*csi.NodePublishVolumeResponse, error) {
	f.record("publish " + r.VolumeId + " " + podOfTarget(r.TargetPath))
	return &csi.NodePublishVolumeResponse{}, nil
}
func (f *fakeNodePlugin) NodeUnpublishVolume(_ context.Context, r *csi.NodeUnpublishVolumeRequest, _ ...grpc.CallOption) (*csi.NodeUnpublishVolumeResponse, error) {
	f.record("unpublish " + r.VolumeId + " " + podOfTarget(r.TargetPath))
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// podOfTarget extracts the pod UID from .../pods/<uid>/volumes/...
func podOfTarget(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if p == "pods" && i+1 < len(parts) {
			return parts[i+1]
		}
	}
	return "?"
}

// cluster holds the API objects of one volume test.
type cluster struct {
	client   *fake.Clientset
	plugin   *fakeNodePlugin
	vm       *CSIVolumeManager
	recorder *record.FakeRecorder
}

func newCluster(t *testing.T, claims ...string) *cluster {
	t.Helper()
	c := unstartedCluster(t, claims...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := c.vm.Start(ctx, c.recorder); err != nil {
		t.Fatal(err)
	}
	return c
}

// unstartedCluster is newCluster without starting the volume manager.
func unstartedCluster(t *testing.T, claims ...string) *cluster {
	t.Helper()
	objs := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}}
	for _, c := range claims {
		objs = append(objs,
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: c, Namespace: "ns", UID: types.UID("pvc-uid-" + c)},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + c}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}},
			&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + c},
				Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{UID: types.UID("pvc-uid-" + c)},
					PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: testDriver, VolumeHandle: "h-" + c}}}},
		)
	}
	c := &cluster{client: fake.NewClientset(objs...), plugin: &fakeNodePlugin{}, recorder: record.NewFakeRecorder(100)}
	c.vm = NewCSIVolumeManager(testNode, testDriver, t.TempDir(), c.client, c.plugin)
	return c
}

func podUsing(name string, claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}, Spec: corev1.PodSpec{NodeName: testNode}}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "vol-" + c,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

// attach plays the attach/detach controller and csi-attacher: the volume
// is listed in node status and its VolumeAttachment is attached.
func (c *cluster) attach(t *testing.T, claim string) {
	t.Helper()
	ctx := context.Background()
	name := UniqueVolumeName(testDriver, "h-"+claim)
	node, _ := c.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	node.Status.VolumesAttached = append(node.Status.VolumesAttached, corev1.AttachedVolume{Name: name})
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: VolumeAttachmentName("h-"+claim, testDriver, testNode)},
		Status: storagev1.VolumeAttachmentStatus{Attached: true}}
	if _, err := c.client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// reportInUse plays one node status write.
func (c *cluster) reportInUse() { c.vm.MarkVolumesAsReportedInUse(c.vm.VolumesInUse()) }

// mountAsync runs WaitForAttachAndMount in the background.
func (c *cluster) mountAsync(ctx context.Context, pod *corev1.Pod) <-chan error {
	done := make(chan error, 1)
	go func() { done <- c.vm.WaitForAttachAndMount(ctx, pod) }()
	return done
}

func eventuallyTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// step runs one reconciler pass and waits until the operations it started
// have ended (each runs in a goroutine of its own, as upstream's).
func (c *cluster) step(t *testing.T, ctx context.Context) {
	t.Helper()
	c.vm.reconcile(ctx)
	eventuallyTrue(t, "the reconciler pass's operations to end", func() bool {
		c.vm.mu.Lock()
		defer c.vm.mu.Unlock()
		for _, v := range c.vm.volumes {
			if v.pending {
				return false
			}
		}
		return true
	})
}

// A volume is staged and published only after a node status write listed it
// in volumesInUse, even when it is attached already: the attach/detach
// controller must not detach a volume the kubelet may be mounting. The test
// runs the reconciler's passes itself, so "before" is every pass it ran
// before the status write.
func TestNoMountBeforeNodeStatusListsTheVolumeInUse(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := unstartedCluster(t, "c1")
	if err := c.vm.startWithoutReconciler(ctx, c.recorder); err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.vm.nodeSynced) {
		t.Fatal("node informer never synced")
	}
	kubelet, err := NewNode(Config{NodeName: testNode, Client: c.client, KubeletVersion: "v1.37.2", Volumes: c.vm})
	if err != nil {
		t.Fatal(err)
	}
	vol := UniqueVolumeName(testDriver, "h-c1")
	inUseInNodeStatus := func() bool {
		node, err := c.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
		if err != nil {
			t.Errorf("get node: %v", err)
			return false
		}
		return slices.Contains(node.Status.VolumesInUse, vol)
	}
	c.plugin.onCall = func(call string) {
		if !inUseInNodeStatus() {
			t.Errorf("%s while node status does not list %s in volumesInUse", call, vol)
		}
	}

	pod := podUsing("p", "c1")
	done := c.mountAsync(ctx, pod)
	eventuallyTrue(t, "the pod's volume in the desired state", func() bool {
		return slices.Equal(c.vm.VolumesInUse(), []corev1.UniqueVolumeName{vol})
	})
	// Attached, and seen so by the reconciler's node cache: only the in-use
	// report is missing.
	c.attach(t, "c1")
	eventuallyTrue(t, "volumesAttached in the node informer", func() bool { return c.vm.inNodeStatusFromInformer(vol) })
	const passes = 5 // a mount takes two: verify the attach, then mount
	for range passes {
		c.step(t, ctx)
	}
	if calls := c.plugin.Calls(); len(calls) != 0 {
		t.Fatalf("CSI calls before the volume was reported in use: %v", calls)
	}
	select {
	case err := <-done:
		t.Fatalf("WaitForAttachAndMount returned before the volume was reported in use: %v", err)
	default:
	}
	if inUseInNodeStatus() {
		t.Fatal("node status lists the volume in use before any node status write")
	}

	// The kubelet's node status write reports the volume in use.
	if err := kubelet.updateNodeStatus(ctx, true); err != nil {
		t.Fatal(err)
	}
	if !inUseInNodeStatus() {
		t.Fatalf("node status write did not list %s in volumesInUse", vol)
	}
	for i := 0; i < passes && len(c.plugin.Calls()) < 2; i++ {
		c.step(t, ctx)
	}
	want := []string{"stage h-c1", "publish h-c1 uid-p"}
	if got := c.plugin.Calls(); !slices.Equal(got, want) {
		t.Fatalf("CSI calls after the volume was reported in use: %v, want %v", got, want)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("WaitForAttachAndMount did not return after the mount")
	}
}

func TestUniqueNameAndAttachmentName(t *testing.T) {
	if got := UniqueVolumeName("d", "h"); got != "kubernetes.io/csi/d^h" {
		t.Errorf("unique name %q", got)
	}
	// csi-<sha256("h"+"d"+"n")>
	if got := VolumeAttachmentName("h", "d", "n"); got != "csi-9072ed11cc1acb5fa433a877ff339b6311d013f33bddd1d0092711a8ace5b16d" {
		t.Errorf("attachment name %q", got)
	}
}

func TestVolumeManagerStateTransitions(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, c *cluster)
	}{
		{
			name: "not in volumesAttached: never mounted, no FailedMount event (upstream emits none), error lists it unattached",
			run: func(t *testing.T, c *cluster) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				pod := podUsing("p", "c1")
				done := c.mountAsync(ctx, pod)
				eventuallyTrue(t, "in use", func() bool { return len(c.vm.VolumesInUse()) == 1 })
				c.reportInUse()
				err := <-done
				if err == nil || !strings.Contains(err.Error(), "unmounted volumes=[vol-c1], unattached volumes=[vol-c1]") {
					t.Fatalf("error %v", err)
				}
				if len(c.recorder.Events) != 0 {
					t.Errorf("unexpected event %q", <-c.recorder.Events)
				}
				if calls := c.plugin.Calls(); len(calls) != 0 {
					t.Errorf("CSI calls for an unattached volume: %v", calls)
				}
			},
		},
		{
			name: "listed in node status but VolumeAttachment not attached: FailedMount WaitForAttach, retried",
			run: func(t *testing.T, c *cluster) {
				pod := podUsing("p", "c1")
				c.attach(t, "c1")
				va, _ := c.client.StorageV1().VolumeAttachments().Get(context.Background(), VolumeAttachmentName("h-c1", testDriver, testNode), metav1.GetOptions{})
				va.Status.Attached = false
				c.client.StorageV1().VolumeAttachments().Update(context.Background(), va, metav1.UpdateOptions{})
				done := c.mountAsync(context.Background(), pod)
				eventuallyTrue(t, "in use", func() bool { return len(c.vm.VolumesInUse()) == 1 })
				c.reportInUse()
				ev := <-c.recorder.Events
				if !strings.HasPrefix(ev, `Warning FailedMount MountVolume.WaitForAttach failed for volume "pv-c1" : volume h-c1 is not attached for volume attachment csi-`) {
					t.Errorf("event %q", ev)
				}
				va.Status.Attached = true
				c.client.StorageV1().VolumeAttachments().Update(context.Background(), va, metav1.UpdateOptions{})
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "API errors reading the node are retried with backoff",
			run: func(t *testing.T, c *cluster) {
				pod := podUsing("p", "c1")
				c.attach(t, "c1")
				var mu sync.Mutex
				failures := 2
				c.client.PrependReactor("get", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
					mu.Lock()
					defer mu.Unlock()
					if failures > 0 {
						failures--
						return true, nil, apierrors.NewServiceUnavailable("injected")
					}
					return false, nil, nil
				})
				done := c.mountAsync(context.Background(), pod)
				eventuallyTrue(t, "in use", func() bool { return len(c.vm.VolumesInUse()) == 1 })
				c.reportInUse()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if failures != 0 {
					t.Errorf("%d injected failures not hit", failures)
				}
			},
		},
		{
			name: "volume shared by two pods: staged once, published per pod, unstaged after the last",
			run: func(t *testing.T, c *cluster) {
				a, b := podUsing("a", "c1"), podUsing("b", "c1")
				c.attach(t, "c1")
				da, db := c.mountAsync(context.Background(), a), c.mountAsync(context.Background(), b)
				eventuallyTrue(t, "in use", func() bool { return len(c.vm.VolumesInUse()) == 1 })
				c.reportInUse()
				if err := errors.Join(<-da, <-db); err != nil {
					t.Fatal(err)
				}
				if err := c.vm.UnmountPodVolumes(context.Background(), a); err != nil {
					t.Fatal(err)
				}
				if got := strings.Join(c.plugin.Calls(), ","); strings.Count(got, "stage h-c1") != 1 || strings.Contains(got, "unstage") ||
					!strings.Contains(got, "unpublish h-c1 uid-a") || strings.Contains(got, "unpublish h-c1 uid-b") {
					t.Fatalf("after the first pod left: %s", got)
				}
				if err := c.vm.UnmountPodVolumes(context.Background(), b); err != nil {
					t.Fatal(err)
				}
				eventuallyTrue(t, "unstage after the last pod", func() bool {
					return strings.Contains(strings.Join(c.plugin.Calls(), ","), "unstage h-c1")
				})
				eventuallyTrue(t, "volume leaves volumesInUse", func() bool { return len(c.vm.VolumesInUse()) == 0 })
			},
		},
		{
			name: "pod deleted while its volume is still attaching: nothing mounted, volume released",
			run: func(t *testing.T, c *cluster) {
				ctx, cancel := context.WithCancel(context.Background())
				pod := podUsing("p", "c1")
				done := c.mountAsync(ctx, pod)
				eventuallyTrue(t, "in use", func() bool { return len(c.vm.VolumesInUse()) == 1 })
				cancel() // the pod worker stops waiting when the pod is deleted
				if err := <-done; err == nil {
					t.Fatal("mounted without attach")
				}
				if err := c.vm.UnmountPodVolumes(context.Background(), pod); err != nil {
					t.Fatal(err)
				}
				eventuallyTrue(t, "volume leaves volumesInUse", func() bool { return len(c.vm.VolumesInUse()) == 0 })
				if calls := c.plugin.Calls(); len(calls) != 0 {
					t.Errorf("CSI calls: %v", calls)
				}
			},
		},
		{
			name: "unbound PVC fails at once with the populator's error",
			run: func(t *testing.T, c *cluster) {
				pvc, _ := c.client.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "c1", metav1.GetOptions{})
				pvc.Status.Phase = corev1.ClaimPending
				c.client.CoreV1().PersistentVolumeClaims("ns").UpdateStatus(context.Background(), pvc, metav1.UpdateOptions{})
				err := c.vm.WaitForAttachAndMount(context.Background(), podUsing("p", "c1"))
				if err == nil || !strings.Contains(err.Error(), "failed to process volumes=[vol-c1]: error processing PVC ns/c1: PVC is not bound") {
					t.Errorf("error %v", err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newCluster(t, "c1")) })
	}
}
