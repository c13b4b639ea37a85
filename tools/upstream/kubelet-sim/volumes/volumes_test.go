package volumes

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

const (
	testNode   = "node-1"
	testNS     = "default"
	testHandle = "vol-1"
	testPV     = "pv-1"
	testClaim  = "claim-1"
	testPodUID = "pod-uid-1"
)

var testPublishContext = map[string]string{"strandlab/attached-to": testNode}

func uniqueName(driver string) corev1.UniqueVolumeName {
	return corev1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^" + testHandle)
}

// vaName is csi_attacher.go getAttachmentName's rule.
func vaName(driver string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(testHandle+driver+testNode)))
}

// cluster is what the API server holds for the tests: a node, the
// CSIDriver, a bound PVC/PV, a pod on the node using it, and the
// VolumeAttachment. listed puts the volume in the node's
// status.volumesAttached (the attach/detach controller's report);
// attached is the VolumeAttachment's status.attached (the external-attacher's).
func cluster(driver string, listed, attached bool) (*corev1.Node, *corev1.Pod, []any) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        testNode,
			UID:         "node-uid-1",
			Labels:      map[string]string{corev1.LabelHostname: testNode},
			Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}},
	}
	if listed {
		node.Status.VolumesAttached = []corev1.AttachedVolume{{Name: uniqueName(driver)}}
	}
	size := resource.MustParse("1Gi")
	fs := corev1.PersistentVolumeFilesystem
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testClaim, UID: "claim-uid-1"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeName:  testPV,
			VolumeMode:  &fs,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
		Status: corev1.PersistentVolumeClaimStatus{
			Phase:       corev1.ClaimBound,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: size},
		},
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: testPV},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: size},
			VolumeMode:  &fs,
			ClaimRef:    &corev1.ObjectReference{Namespace: testNS, Name: testClaim, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: testHandle, FSType: "ext4"},
			},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "pod-1", UID: testPodUID},
		Spec: corev1.PodSpec{
			NodeName: testNode,
			Containers: []corev1.Container{{
				Name: "app", Image: "sim",
				VolumeMounts: []corev1.VolumeMount{
					{Name: "data", MountPath: "/data"},
					{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{
					Name:         "data",
					VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: testClaim}},
				},
				// What the ServiceAccount admission plugin adds to every pod.
				serviceAccountVolume("kube-api-access-x7k2p"),
			},
		},
	}
	csiDriver := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: driver},
		// The API server's defaults (SetDefaults_CSIDriverSpec): the fake
		// clientset applies none, and the CSI plugin dereferences them.
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(false),
			RequiresRepublish: ptr.To(false), StorageCapacity: ptr.To(false),
			FSGroupPolicy:        ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}},
	}
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: vaName(driver)},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: driver, NodeName: testNode,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(testPV)},
		},
		Status: storagev1.VolumeAttachmentStatus{Attached: attached},
	}
	if attached {
		va.Status.AttachmentMetadata = testPublishContext
	}
	return node, pod, []any{node, pvc, pv, pod, csiDriver, va}
}

func serviceAccountVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
		},
	}}}
}

type fixture struct {
	ctx      context.Context
	m        *Manager
	client   *fake.Clientset
	csi      *fakeNodeServer
	recorder *record.FakeRecorder
	rootDir  string
	driver   string
	pod      *corev1.Pod
}

// start runs a Manager for testNode against a fake API server holding
// cluster(driver, listed, attached) and a fake CSI node service, and a
// stand-in for the node status loop that reports whatever the manager
// asks to be in use every 100 ms (kubelet.tryUpdateNodeStatus followed by
// MarkVolumesAsReportedInUse, at a faster pace than the kubelet's 10 s).
func start(t *testing.T, driver string, listed, attached bool) *fixture {
	t.Helper()
	return startWith(t, driver, listed, attached, nil)
}

// startWith is start with a hook that may add reactors to the fake API
// server before the manager starts.
func startWith(t *testing.T, driver string, listed, attached bool, prepare func(*fake.Clientset)) *fixture {
	t.Helper()
	_, pod, objs := cluster(driver, listed, attached)
	client := newFakeClient(t, objs)
	if prepare != nil {
		prepare(client)
	}
	csiSrv, sock := startFakeNodeServer(t, "id-"+testNode)
	root := t.TempDir()
	m, err := New(Config{NodeName: testNode, Client: client, DriverName: driver, Endpoint: sock, RootDir: root})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rec := record.NewFakeRecorder(1000)
	startCtx, startCancel := context.WithTimeout(ctx, 30*time.Second)
	defer startCancel()
	// Start's ctx is the manager's lifetime; bound only the registration
	// wait here by cancelling everything if it takes too long.
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx, rec) }()
	select {
	case err = <-done:
	case <-startCtx.Done():
		err = errors.New("Start did not return within 30s")
	}
	t.Cleanup(func() {
		m.Release(context.Background())
		cancel()
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				m.MarkVolumesAsReportedInUse(m.VolumesInUse())
			}
		}
	}()
	return &fixture{ctx: ctx, m: m, client: client, csi: csiSrv, recorder: rec, rootDir: root, driver: driver, pod: pod}
}

func newFakeClient(t *testing.T, objs []any) *fake.Clientset {
	t.Helper()
	client := fake.NewSimpleClientset()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Node:
			_, err = client.CoreV1().Nodes().Create(context.Background(), o, metav1.CreateOptions{})
		case *corev1.PersistentVolumeClaim:
			_, err = client.CoreV1().PersistentVolumeClaims(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		case *corev1.PersistentVolume:
			_, err = client.CoreV1().PersistentVolumes().Create(context.Background(), o, metav1.CreateOptions{})
		case *corev1.Pod:
			_, err = client.CoreV1().Pods(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		case *storagev1.CSIDriver:
			_, err = client.StorageV1().CSIDrivers().Create(context.Background(), o, metav1.CreateOptions{})
		case *storagev1.VolumeAttachment:
			_, err = client.StorageV1().VolumeAttachments().Create(context.Background(), o, metav1.CreateOptions{})
		default:
			t.Fatalf("unexpected object %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return client
}

func (f *fixture) stagingPath() string {
	return filepath.Join(f.rootDir, "plugins", "kubernetes.io", "csi", f.driver, fmt.Sprintf("%x", sha256.Sum256([]byte(testHandle))), "globalmount")
}

func (f *fixture) targetPath() string {
	return filepath.Join(f.rootDir, "pods", testPodUID, "volumes", "kubernetes.io~csi", testPV, "mount")
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestWaitForAttachAndMount is the stranding test: the kubelet mounts a
// CSI volume only once the node's status.volumesAttached lists it, however
// attached its VolumeAttachment is.
func TestWaitForAttachAndMount(t *testing.T) {
	tests := []struct {
		name             string
		listed, attached bool
		wait             time.Duration
		wantMounted      bool
		// wantErr are substrings of the error when not mounted.
		wantErr []string
		// wantEvent is a substring every recorded event has; "" means
		// no event at all.
		wantEvent string
	}{
		{
			name:   "attached and listed in volumesAttached",
			listed: true, attached: true,
			wait:        30 * time.Second,
			wantMounted: true,
		},
		{
			// The VolumeAttachment says attached, the node does not list
			// the volume: verification never passes its precondition and,
			// as in v1.37.2, nothing records an event.
			name:   "attached but not listed in volumesAttached (stranded)",
			listed: false, attached: true,
			wait:    3 * time.Second,
			wantErr: []string{"unmounted volumes=[data], unattached volumes=[data], failed to process volumes=[]: ", context.DeadlineExceeded.Error()},
		},
		{
			// Listed but the VolumeAttachment is not attached: verification
			// passes, csiAttacher.WaitForAttach fails, FailedMount events.
			name:   "listed but VolumeAttachment not attached",
			listed: true, attached: false,
			wait:      3 * time.Second,
			wantErr:   []string{"unmounted volumes=[data], unattached volumes=[], failed to process volumes=[]: "},
			wantEvent: `FailedMount MountVolume.WaitForAttach failed for volume "pv-1"`,
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, fmt.Sprintf("t%d.csi.strandlab.io", i), tc.listed, tc.attached)
			ctx, cancel := context.WithTimeout(f.ctx, tc.wait)
			defer cancel()
			began := time.Now()
			err := f.m.WaitForAttachAndMount(ctx, f.pod)
			elapsed := time.Since(began)

			if tc.wantMounted {
				if err != nil {
					t.Fatalf("WaitForAttachAndMount: %v (CSI calls %v)", err, f.csi.Calls(""))
				}
				stage, publish := f.csi.Calls("NodeStageVolume"), f.csi.Calls("NodePublishVolume")
				if len(stage) != 1 || len(publish) != 1 {
					t.Fatalf("CSI calls = %v, want one NodeStageVolume and one NodePublishVolume", f.csi.Calls(""))
				}
				if got, want := stage[0].path, f.stagingPath(); got != want {
					t.Errorf("staging path = %s, want %s", got, want)
				}
				if got, want := publish[0].path, f.targetPath(); got != want {
					t.Errorf("target path = %s, want %s", got, want)
				}
				// MountDevice and SetUp each read the publish context from
				// the VolumeAttachment (csiPlugin.getPublishContext).
				for _, c := range []csiCall{stage[0], publish[0]} {
					if !reflect.DeepEqual(c.publishContext, testPublishContext) {
						t.Errorf("%s publish context = %v, want %v", c.method, c.publishContext, testPublishContext)
					}
				}
				if got := f.m.VolumesInUse(); !slices.Equal(got, []corev1.UniqueVolumeName{uniqueName(f.driver)}) {
					t.Errorf("VolumesInUse = %v, want [%s]", got, uniqueName(f.driver))
				}
				return
			}

			if err == nil {
				t.Fatalf("WaitForAttachAndMount returned nil after %v; want no return before the %v deadline", elapsed, tc.wait)
			}
			if elapsed < tc.wait-500*time.Millisecond {
				t.Errorf("WaitForAttachAndMount returned after %v, before the %v deadline: %v", elapsed, tc.wait, err)
			}
			if !errors.Is(err, context.DeadlineExceeded) || !wait.Interrupted(err) {
				t.Errorf("error %q: want it to wrap the wait's context.DeadlineExceeded (wait.Interrupted)", err)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			for _, m := range []string{"NodeStageVolume", "NodePublishVolume"} {
				if calls := f.csi.Calls(m); len(calls) != 0 {
					t.Errorf("%s called: %v", m, calls)
				}
			}
			// The node asks for the volume all along: in use, so the
			// attach/detach controller keeps it attached.
			if got := f.m.VolumesInUse(); !slices.Equal(got, []corev1.UniqueVolumeName{uniqueName(f.driver)}) {
				t.Errorf("VolumesInUse = %v, want [%s]", got, uniqueName(f.driver))
			}
			events := f.events()
			if tc.wantEvent == "" && len(events) > 0 {
				t.Errorf("events %q, want none", events)
			}
			if tc.wantEvent != "" {
				if len(events) == 0 {
					t.Errorf("no events, want %q", tc.wantEvent)
				}
				for _, e := range events {
					if !strings.Contains(e, tc.wantEvent) {
						t.Errorf("event %q does not contain %q", e, tc.wantEvent)
					}
				}
			}
		})
	}
}

// TestStrandedVolumeMountsOnceListed: the stranded wait ends as soon as the
// node lists the volume; the verification was a failed precondition, not a
// failed operation, so no backoff delays it (GenerateVerifyControllerAttachedVolumeFunc
// reads the node informer first).
func TestStrandedVolumeMountsOnceListed(t *testing.T) {
	f := start(t, "listed-later.csi.strandlab.io", false, true)
	ctx, cancel := context.WithTimeout(f.ctx, 3*time.Second)
	err := f.m.WaitForAttachAndMount(ctx, f.pod)
	cancel()
	if err == nil {
		t.Fatal("WaitForAttachAndMount returned nil while the node does not list the volume")
	}

	node, err := f.client.CoreV1().Nodes().Get(f.ctx, testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.VolumesAttached = []corev1.AttachedVolume{{Name: uniqueName(f.driver)}}
	if _, err := f.client.CoreV1().Nodes().UpdateStatus(f.ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	listedAt := time.Now()
	// kubelet-sim's pod worker retries the start; so does this test.
	ctx, cancel = context.WithTimeout(f.ctx, 20*time.Second)
	defer cancel()
	if err := f.m.WaitForAttachAndMount(ctx, f.pod); err != nil {
		t.Fatalf("WaitForAttachAndMount after the node listed the volume: %v", err)
	}
	t.Logf("mounted %v after the node listed the volume", time.Since(listedAt))
	if n := len(f.csi.Calls("NodePublishVolume")); n != 1 {
		t.Errorf("NodePublishVolume calls = %d, want 1", n)
	}
}

// TestUnmountPodVolumes: tearing a mounted pod down unpublishes it before
// UnmountPodVolumes returns; the device is unstaged afterwards and the
// volume then leaves volumesInUse.
func TestUnmountPodVolumes(t *testing.T) {
	f := start(t, "teardown.csi.strandlab.io", true, true)
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	if err := f.m.WaitForAttachAndMount(ctx, f.pod); err != nil {
		t.Fatalf("WaitForAttachAndMount: %v", err)
	}
	if err := f.m.UnmountPodVolumes(ctx, f.pod); err != nil {
		t.Fatalf("UnmountPodVolumes: %v", err)
	}
	unpublish := f.csi.Calls("NodeUnpublishVolume")
	if len(unpublish) != 1 || unpublish[0].path != f.targetPath() {
		t.Errorf("NodeUnpublishVolume calls = %v, want one for %s", unpublish, f.targetPath())
	}
	if _, ok := f.m.Pods().GetPodByUID(testPodUID); ok {
		t.Error("pod still in the pod set after its volumes were unmounted")
	}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return len(f.csi.Calls("NodeUnstageVolume")) == 1 && len(f.m.VolumesInUse()) == 0, nil
	})
	if err != nil {
		t.Fatalf("volume not unstaged and out of use: unstage calls %v, in use %v", f.csi.Calls("NodeUnstageVolume"), f.m.VolumesInUse())
	}
	if got := f.csi.Calls("NodeUnstageVolume")[0].path; got != f.stagingPath() {
		t.Errorf("NodeUnstageVolume path = %s, want %s", got, f.stagingPath())
	}
}

// TestRegistration: Start registers the driver as the kubelet's plugin
// manager would, and the CSI plugin records the node ID where the
// external-attacher reads it (CSINode, node annotation) by the time Start
// returns. The API server answers the CSI plugin's first CSINode read
// slowly, as a loaded one does: registering before the plugin's CSINode
// initialisation finishes would leave a CSINode owned by no node, which
// the initialisation deletes and recreates without the driver.
func TestRegistration(t *testing.T) {
	var slowed atomic.Bool
	f := startWith(t, "reg.csi.strandlab.io", true, true, func(c *fake.Clientset) {
		c.PrependReactor("get", "csinodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			if slowed.CompareAndSwap(false, true) {
				time.Sleep(300 * time.Millisecond) // latency injected into the fake API server, not a wait
			}
			return false, nil, nil
		})
	})
	if n := len(f.csi.Calls("NodeGetInfo")); n == 0 {
		t.Error("NodeGetInfo not called")
	}
	csiNode, err := f.client.StorageV1().CSINodes().Get(f.ctx, testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CSINode: %v", err)
	}
	var ids []string
	for _, d := range csiNode.Spec.Drivers {
		if d.Name == f.driver {
			ids = append(ids, d.NodeID)
		}
	}
	if !slices.Equal(ids, []string{"id-" + testNode}) {
		t.Errorf("CSINode drivers = %+v, want %s with node ID id-%s", csiNode.Spec.Drivers, f.driver, testNode)
	}
	node, err := f.client.CoreV1().Nodes().Get(f.ctx, testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := node.Annotations["csi.volume.kubernetes.io/nodeid"]; !strings.Contains(a, `"`+f.driver+`":"id-`+testNode+`"`) {
		t.Errorf("node annotation csi.volume.kubernetes.io/nodeid = %q, want it to map %s to id-%s", a, f.driver, testNode)
	}
	err = wait.PollUntilContextTimeout(f.ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return f.m.KubeletError() == nil, nil
	})
	if err != nil {
		t.Errorf("KubeletError = %v, want nil once CSINode is initialised", f.m.KubeletError())
	}
}

// TestOneNodePerProcess: a second Manager in the same process is refused
// (the CSI plugin's package variables hold one node's state).
func TestOneNodePerProcess(t *testing.T) {
	start(t, "first.csi.strandlab.io", true, true)
	client := fake.NewSimpleClientset()
	m, err := New(Config{NodeName: "node-2", Client: client, DriverName: "second.csi.strandlab.io", Endpoint: "/nonexistent.sock", RootDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Start(t.Context(), &record.FakeRecorder{})
	if err == nil || !strings.Contains(err.Error(), "one process serves one node") {
		t.Fatalf("second Start: %v, want the one-node-per-process error", err)
	}
}

func TestNotStarted(t *testing.T) {
	m, err := New(Config{NodeName: testNode, Client: fake.NewSimpleClientset(), DriverName: "d", Endpoint: "/x.sock", RootDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The node registers (and writes status) before the volume manager
	// starts: these must be harmless then.
	if got := m.VolumesInUse(); got != nil {
		t.Errorf("VolumesInUse before Start = %v", got)
	}
	m.MarkVolumesAsReportedInUse([]corev1.UniqueVolumeName{"x"})
	if m.ReconcilerStatesHasBeenSynced() {
		t.Error("ReconcilerStatesHasBeenSynced before Start")
	}
	if err := m.WaitForAttachAndMount(t.Context(), &corev1.Pod{}); !errors.Is(err, errNotStarted) {
		t.Errorf("WaitForAttachAndMount before Start: %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	client := fake.NewSimpleClientset()
	ok := Config{NodeName: "n", Client: client, DriverName: "d", Endpoint: "/e.sock", RootDir: "/r"}
	tests := []struct {
		name   string
		modify func(*Config)
		valid  bool
	}{
		{"complete", func(*Config) {}, true},
		{"no node name", func(c *Config) { c.NodeName = "" }, false},
		{"no client", func(c *Config) { c.Client = nil }, false},
		{"no driver", func(c *Config) { c.DriverName = "" }, false},
		{"no endpoint", func(c *Config) { c.Endpoint = "" }, false},
		{"no root dir", func(c *Config) { c.RootDir = "" }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.modify(&c)
			_, err := New(c)
			if (err == nil) != tc.valid {
				t.Errorf("New: %v, want valid=%v", err, tc.valid)
			}
		})
	}
}

func TestLegacyTimeoutMessage(t *testing.T) {
	upstream := func(cause error) error {
		return fmt.Errorf("unmounted volumes=%v, unattached volumes=%v, failed to process volumes=%v: %w",
			[]string{"data"}, []string{"data"}, []string{}, cause)
	}
	tests := []struct {
		name string
		err  error
		want string
		ok   bool
	}{
		{"timeout", upstream(context.DeadlineExceeded),
			"unmounted volumes=[data], unattached volumes=[data], failed to process volumes=[]: timed out waiting for the condition", true},
		{"cancelled (pod deleted)", upstream(context.Canceled), "", false},
		{"volume error", errors.New("error processing PVC default/c: PVC is not bound"), "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := LegacyTimeoutMessage(tc.err)
			if got != tc.want || ok != tc.ok {
				t.Errorf("LegacyTimeoutMessage = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
