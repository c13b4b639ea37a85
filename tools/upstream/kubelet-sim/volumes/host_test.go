package volumes

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/mount-utils"

	"k8s.io/kubernetes/pkg/volume"
	"k8s.io/kubernetes/pkg/volume/util/hostutil"
)

const hostRoot = "/var/lib/kubelet-sim/node-1"

// newTestHost builds a host on a fake API server holding objs, with its
// informers started and synced.
func newTestHost(t *testing.T, objs ...runtime.Object) (*host, *fake.Clientset) {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	// The fake API server has no resource versions to resume a watch
	// from: a change made before the node informer's watch starts is never
	// seen. Its watch reactor tells when it has (client-go's pattern for
	// informers on a fake clientset).
	nodesWatched := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("nodes", func(a clienttesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(a.GetResource(), a.GetNamespace())
		if err != nil {
			return false, nil, err
		}
		once.Do(func() { close(nodesWatched) })
		return true, w, nil
	})
	ctx := t.Context()
	csiFactory := informers.NewSharedInformerFactory(client, 0)
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, testNode).String()
	}))
	h := newHost(hostConfig{
		nodeName: testNode, rootDir: hostRoot, client: client, recorder: &record.FakeRecorder{},
		mounter: mount.NewFakeMounter(nil), hostUtil: hostutil.NewFakeHostUtil(nil),
	}, csiFactory, nodeFactory, ctx.Done())
	csiFactory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	csiFactory.WaitForCacheSync(ctx.Done())
	nodeFactory.WaitForCacheSync(ctx.Done())
	select {
	case <-nodesWatched:
	case <-time.After(10 * time.Second):
		t.Fatal("the node informer's watch never started")
	}
	return h, client
}

func TestHostPaths(t *testing.T) {
	h, _ := newTestHost(t)
	const uid = types.UID("pod-uid")
	tests := []struct {
		name, got, want string
	}{
		// kubelet_getters.go, with kubeletconfig's directory names.
		{"GetPodsDir", h.GetPodsDir(), hostRoot + "/pods"},
		{"GetPluginDir", h.GetPluginDir("kubernetes.io/csi"), hostRoot + "/plugins/kubernetes.io/csi"},
		{"GetVolumeDevicePluginDir", h.GetVolumeDevicePluginDir("kubernetes.io/csi"), hostRoot + "/plugins/kubernetes.io/csi/volumeDevices"},
		{"GetPodVolumeDir", h.GetPodVolumeDir(uid, "kubernetes.io~csi", "pv-1"), hostRoot + "/pods/pod-uid/volumes/kubernetes.io~csi/pv-1"},
		{"GetPodPluginDir", h.GetPodPluginDir(uid, "kubernetes.io~csi"), hostRoot + "/pods/pod-uid/plugins/kubernetes.io~csi"},
		{"GetPodVolumeDeviceDir", h.GetPodVolumeDeviceDir(uid, "kubernetes.io~csi"), hostRoot + "/pods/pod-uid/volumeDevices/kubernetes.io~csi"},
		{"GetNodeName", string(h.GetNodeName()), testNode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("%s = %s, want %s", tc.name, tc.got, tc.want)
			}
		})
	}
}

// TestHostNodeReads: what the host reports about the node comes from the
// node informer, as kubeletVolumeHost's does through Kubelet.GetNode.
func TestHostNodeReads(t *testing.T) {
	vol1, vol2 := corev1.UniqueVolumeName("kubernetes.io/csi/d^a"), corev1.UniqueVolumeName("kubernetes.io/csi/d^b")
	node := func(attached ...corev1.AttachedVolume) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{"zone": "a"}},
			Status: corev1.NodeStatus{
				Allocatable:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
				VolumesAttached: attached,
			},
		}
	}
	tests := []struct {
		name         string
		objs         []runtime.Object
		wantAttached map[corev1.UniqueVolumeName]string
		wantLabels   map[string]string
		wantErr      bool
	}{
		{
			name:         "volumes attached",
			objs:         []runtime.Object{node(corev1.AttachedVolume{Name: vol1, DevicePath: "/dev/a"}, corev1.AttachedVolume{Name: vol2})},
			wantAttached: map[corev1.UniqueVolumeName]string{vol1: "/dev/a", vol2: ""},
			wantLabels:   map[string]string{"zone": "a"},
		},
		{
			name:         "none attached",
			objs:         []runtime.Object{node()},
			wantAttached: map[corev1.UniqueVolumeName]string{},
			wantLabels:   map[string]string{"zone": "a"},
		},
		{
			// The operation generator then skips its precondition and goes
			// to the live GET (GenerateVerifyControllerAttachedVolumeFunc
			// ignores the error and a nil map).
			name:    "node not in the informer",
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newTestHost(t, tc.objs...)
			attached, err := h.GetAttachedVolumesFromNodeStatus()
			if (err != nil) != tc.wantErr {
				t.Fatalf("GetAttachedVolumesFromNodeStatus error %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if attached != nil {
					t.Errorf("GetAttachedVolumesFromNodeStatus = %v with an error, want nil", attached)
				}
				if _, err := h.GetNodeLabels(); err == nil {
					t.Error("GetNodeLabels: no error without a node")
				}
				if _, err := h.GetNodeAllocatable(); err == nil {
					t.Error("GetNodeAllocatable: no error without a node")
				}
				return
			}
			if !maps.Equal(attached, tc.wantAttached) {
				t.Errorf("GetAttachedVolumesFromNodeStatus = %v, want %v", attached, tc.wantAttached)
			}
			labels, err := h.GetNodeLabels()
			if err != nil || !maps.Equal(labels, tc.wantLabels) {
				t.Errorf("GetNodeLabels = %v, %v; want %v", labels, err, tc.wantLabels)
			}
			alloc, err := h.GetNodeAllocatable()
			if err != nil || !alloc.Cpu().Equal(resource.MustParse("8")) {
				t.Errorf("GetNodeAllocatable = %v, %v; want cpu 8", alloc, err)
			}
		})
	}
}

// TestHostReadsInformerNotServer: a status change reaches
// GetAttachedVolumesFromNodeStatus through the watch, not at once.
func TestHostReadsInformerNotServer(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
	h, client := newTestHost(t, n)
	n = n.DeepCopy()
	vol := corev1.UniqueVolumeName("kubernetes.io/csi/d^a")
	n.Status.VolumesAttached = []corev1.AttachedVolume{{Name: vol}}
	if _, err := client.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		got, err := h.GetAttachedVolumesFromNodeStatus()
		_, ok := got[vol]
		return err == nil && ok, nil
	})
	if err != nil {
		t.Fatal("the informer never showed the attached volume")
	}
}

func TestHostKubeletPieces(t *testing.T) {
	driver := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "d.csi.strandlab.io"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "s"}, Data: map[string][]byte{"k": []byte("v")}}
	h, client := newTestHost(t, driver, secret)

	var _ volume.KubeletVolumeHost = h
	if _, ok := any(h).(volume.AttachDetachVolumeHost); ok {
		t.Error("host is an AttachDetachVolumeHost; the CSI plugin would treat it as the attach/detach controller's")
	}
	if h.GetKubeClient() != client {
		t.Error("GetKubeClient is not the node's client")
	}
	if err := h.WaitForCacheSync(); err != nil {
		t.Errorf("WaitForCacheSync: %v", err)
	}
	if got, err := h.CSIDriverLister().Get(driver.Name); err != nil || got.Name != driver.Name {
		t.Errorf("CSIDriverLister().Get = %v, %v", got, err)
	}
	if !h.CSIDriversSynced()() {
		t.Error("CSIDriversSynced false after sync")
	}
	if h.GetInformerFactory() == nil {
		t.Error("GetInformerFactory nil: VolumePluginMgr.Run would not start the CSIDriver informer")
	}
	// csiMountMgr.podServiceAccountTokenAttrs fails on a nil getter.
	if h.GetServiceAccountTokenFunc() == nil || h.DeleteServiceAccountTokenFunc() == nil {
		t.Error("service account token funcs must not be nil")
	}
	if s, err := h.GetSecretFunc()(testNS, "s"); err != nil || string(s.Data["k"]) != "v" {
		t.Errorf("GetSecretFunc = %v, %v", s, err)
	}
	if _, err := h.NewWrapperMounter("v", volume.Spec{}, &corev1.Pod{}); !errors.Is(err, errOnlyCSI) {
		t.Errorf("NewWrapperMounter: %v, want errOnlyCSI", err)
	}
	if h.GetMounter() == nil || h.GetHostUtil() == nil || h.GetSubpather() == nil || h.GetEventRecorder() == nil {
		t.Error("mounter, host utils, subpather and recorder must be set")
	}
	h.SetKubeletError(errors.New("CSINode is not yet initialized"))
	if err := h.kubeletError(); err == nil {
		t.Error("SetKubeletError not kept")
	}
	h.SetKubeletError(nil)
	if err := h.kubeletError(); err != nil {
		t.Errorf("kubeletError after clearing = %v", err)
	}
}

// TestPodSet: the pod manager and pod state provider as the populator reads
// them (findAndAddNewPods, findAndRemoveDeletedPods).
func TestPodSet(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}}
	tests := []struct {
		name string
		do   func(*PodSet)
		// want: known to the pod manager, containers terminating, runtime removable
		known, terminating, removable bool
	}{
		{"unknown pod", func(*PodSet) {}, false, true, true},
		{"added", func(s *PodSet) { s.Add(pod) }, true, false, false},
		{"terminating", func(s *PodSet) { s.Add(pod); s.Terminating(pod.UID) }, true, true, false},
		{"terminated", func(s *PodSet) { s.Add(pod); s.Terminated(pod.UID) }, true, true, true},
		{"re-added after termination keeps the state", func(s *PodSet) { s.Add(pod); s.Terminated(pod.UID); s.Add(pod.DeepCopy()) }, true, true, true},
		{"removed", func(s *PodSet) { s.Add(pod); s.Remove(pod.UID) }, false, true, true},
		{"terminated before added: ignored", func(s *PodSet) { s.Terminated(pod.UID); s.Add(pod) }, true, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewPodSet()
			tc.do(s)
			_, known := s.GetPodByUID(pod.UID)
			if known != tc.known {
				t.Errorf("GetPodByUID known = %v, want %v", known, tc.known)
			}
			if n := len(s.GetPods()); (n == 1) != tc.known {
				t.Errorf("GetPods has %d pods, want known=%v", n, tc.known)
			}
			if got := s.ShouldPodContainersBeTerminating(pod.UID); got != tc.terminating {
				t.Errorf("ShouldPodContainersBeTerminating = %v, want %v", got, tc.terminating)
			}
			if got := s.ShouldPodRuntimeBeRemoved(pod.UID); got != tc.removable {
				t.Errorf("ShouldPodRuntimeBeRemoved = %v, want %v", got, tc.removable)
			}
		})
	}
}

func TestVolumeManagerPod(t *testing.T) {
	pvc := corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}
	eph := corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}
	sa := serviceAccountVolume("kube-api-access-1")
	cm := corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}
	mounts := func(names ...string) []corev1.VolumeMount {
		var out []corev1.VolumeMount
		for _, n := range names {
			out = append(out, corev1.VolumeMount{Name: n, MountPath: "/" + n})
		}
		return out
	}
	pod := func(vols []corev1.Volume, names ...string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", VolumeMounts: mounts(names...)}},
			Containers:     []corev1.Container{{Name: "app", VolumeMounts: mounts(names...)}},
			Volumes:        vols,
		}}
	}
	tests := []struct {
		name       string
		in         *corev1.Pod
		want       *corev1.Pod
		sameObject bool
	}{
		{"only claims: unchanged", pod([]corev1.Volume{pvc, eph}, "data", "scratch"), pod([]corev1.Volume{pvc, eph}, "data", "scratch"), true},
		{"no volumes: unchanged", pod(nil), pod(nil), true},
		{"service account token dropped", pod([]corev1.Volume{pvc, sa}, "data", "kube-api-access-1"), pod([]corev1.Volume{pvc}, "data"), false},
		{"configMap only", pod([]corev1.Volume{cm}, "conf"), pod([]corev1.Volume{}, []string{}...), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := tc.in.DeepCopy()
			got := VolumeManagerPod(tc.in)
			if (got == tc.in) != tc.sameObject {
				t.Errorf("returned the same object: %v, want %v", got == tc.in, tc.sameObject)
			}
			if !reflect.DeepEqual(tc.in, orig) {
				t.Error("input pod modified")
			}
			if len(got.Spec.Volumes) != len(tc.want.Spec.Volumes) {
				t.Fatalf("volumes = %v, want %v", got.Spec.Volumes, tc.want.Spec.Volumes)
			}
			for i := range got.Spec.Volumes {
				if got.Spec.Volumes[i].Name != tc.want.Spec.Volumes[i].Name {
					t.Errorf("volume %d = %s, want %s", i, got.Spec.Volumes[i].Name, tc.want.Spec.Volumes[i].Name)
				}
			}
			for _, c := range [][2][]corev1.Container{{got.Spec.InitContainers, tc.want.Spec.InitContainers}, {got.Spec.Containers, tc.want.Spec.Containers}} {
				if len(c[0][0].VolumeMounts) != len(c[1][0].VolumeMounts) {
					t.Errorf("%s mounts = %v, want %v", c[0][0].Name, c[0][0].VolumeMounts, c[1][0].VolumeMounts)
				}
			}
		})
	}
}
