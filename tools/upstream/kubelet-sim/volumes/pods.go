package volumes

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/kubernetes/pkg/kubelet/volumemanager"
)

// PodSet is the node's pods as the volume manager sees them. It stands in
// for two kubelet components NewVolumeManager takes:
//
//   - the pod manager (pkg/kubelet/pod.basicManager, volumemanager.PodManager):
//     every pod bound to the node that the API server still has, whatever its
//     state; upstream adds a pod when the config source reports it
//     (Kubelet.HandlePodAdditions) and removes it when the API server deletes
//     it (HandlePodRemoves);
//   - the pod workers' state (pkg/kubelet/pod_workers.go podWorkers,
//     volumemanager.PodStateProvider): whether a pod's containers are being
//     or have been stopped.
//
// The Manager feeds it: the pod workers admit a pod when the informer
// delivers it (AdmitPod, as the kubelet's HandlePodAdditions adds it to
// the pod manager before its first sync), mark it terminating when its
// deletion arrives, and UnmountPodVolumes marks it terminated and, once its
// volumes are unmounted, removes it. A removed pod is never added again:
// an update the informer delivers after the removal would otherwise bring
// a terminated pod back as new, and the populator would mount its volume
// again (the kubelet's pod workers refuse a terminated UID the same way,
// podWorkers.UpdatePod's "pod is finished processing" check).
type PodSet struct {
	mu   sync.Mutex
	pods map[types.UID]*podState
	// removed are the UIDs of pods that left the set (a few bytes per
	// cycle: 100,000 cycles hold a few MB).
	removed map[types.UID]struct{}
}

type podState struct {
	pod *corev1.Pod
	// terminating: termination started; no new containers, so the populator
	// adds no volumes for the pod (podSyncStatus.IsTerminationStarted).
	terminating bool
	// terminated: every container stopped; the populator removes the pod's
	// volumes from the desired state (podSyncStatus.IsTerminated).
	terminated bool
}

var (
	_ volumemanager.PodManager       = (*PodSet)(nil)
	_ volumemanager.PodStateProvider = (*PodSet)(nil)
)

// NewPodSet returns an empty pod set.
func NewPodSet() *PodSet {
	return &PodSet{pods: map[types.UID]*podState{}, removed: map[types.UID]struct{}{}}
}

// Add records pod, or its newer version, keeping its termination state
// (pod.basicManager.UpdatePod: pods are keyed by UID); a pod removed before
// is not added again. The volume manager sees the pod as VolumeManagerPod
// returns it.
func (s *PodSet) Add(pod *corev1.Pod) {
	pod = VolumeManagerPod(pod)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, gone := s.removed[pod.UID]; gone {
		return
	}
	if st, ok := s.pods[pod.UID]; ok {
		st.pod = pod
		return
	}
	s.pods[pod.UID] = &podState{pod: pod}
}

// Terminating marks that the pod's containers are being stopped.
func (s *PodSet) Terminating(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.pods[uid]; ok {
		st.terminating = true
	}
}

// Terminated marks that every container of the pod has stopped, which lets
// the populator drop the pod's volumes from the desired state.
func (s *PodSet) Terminated(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.pods[uid]; ok {
		st.terminating, st.terminated = true, true
	}
}

// Remove forgets the pod (pod.basicManager.RemovePod) for good.
func (s *PodSet) Remove(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, uid)
	s.removed[uid] = struct{}{}
}

// GetPodByUID implements volumemanager.PodManager.
func (s *PodSet) GetPodByUID(uid types.UID) (*corev1.Pod, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.pods[uid]
	if !ok {
		return nil, false
	}
	return st.pod, true
}

// GetPods implements volumemanager.PodManager.
func (s *PodSet) GetPods() []*corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(s.pods))
	for _, st := range s.pods {
		out = append(out, st.pod)
	}
	return out
}

// ShouldPodContainersBeTerminating implements
// volumemanager.PodStateProvider as podWorkers.ShouldPodContainersBeTerminating
// does: a known pod once its termination started; an unknown pod always,
// since kubelet-sim's pods are "synced" from the start (podsSynced).
func (s *PodSet) ShouldPodContainersBeTerminating(uid types.UID) bool {
	return s.known(uid, func(st *podState) bool { return st.terminating })
}

// ShouldPodRuntimeBeRemoved implements volumemanager.PodStateProvider as
// podWorkers.ShouldPodRuntimeBeRemoved does: a known pod once it is
// terminated; an unknown pod always (podsSynced).
func (s *PodSet) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	return s.known(uid, func(st *podState) bool { return st.terminated })
}

// known is flag of the pod with uid, or true for a pod the set does not
// know (podWorkers answers so once its pods are synced).
func (s *PodSet) known(uid types.UID, flag func(*podState) bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.pods[uid]; ok {
		return flag(st)
	}
	return true
}

// VolumeManagerPod returns pod as kubelet-sim's volume manager is given it:
// with only the volumes the CSI plugin serves (persistentVolumeClaim,
// ephemeral, csi) and the container mounts of those. The plugin manager
// holds the CSI plugin only, and every pod created through the API server
// has at least the projected service account token volume
// (kube-api-access-*, added by the ServiceAccount admission plugin), which
// would otherwise fail the pod's volume processing ("no volume plugin
// matched") and keep WaitForAttachAndMount from ever succeeding. Those
// volumes are node-local and never attached, so leaving them out changes
// nothing the attach/detach controller sees; the kubelet's own projected,
// secret, configMap, downwardAPI and emptyDir handling is not simulated
// (the hand-written mirror ignored them too). pod itself is returned when
// nothing needs dropping.
func VolumeManagerPod(pod *corev1.Pod) *corev1.Pod {
	keep := make(map[string]bool, len(pod.Spec.Volumes))
	for _, v := range pod.Spec.Volumes {
		keep[v.Name] = v.PersistentVolumeClaim != nil || v.Ephemeral != nil || v.CSI != nil
	}
	dropped := false
	for _, k := range keep {
		dropped = dropped || !k
	}
	if !dropped {
		return pod
	}
	p := pod.DeepCopy()
	p.Spec.Volumes = slices.DeleteFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return !keep[v.Name] })
	filter := func(mounts []corev1.VolumeMount, devices []corev1.VolumeDevice) ([]corev1.VolumeMount, []corev1.VolumeDevice) {
		mounts = slices.DeleteFunc(mounts, func(m corev1.VolumeMount) bool { return !keep[m.Name] })
		devices = slices.DeleteFunc(devices, func(d corev1.VolumeDevice) bool { return !keep[d.Name] })
		return mounts, devices
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			cs[i].VolumeMounts, cs[i].VolumeDevices = filter(cs[i].VolumeMounts, cs[i].VolumeDevices)
		}
	}
	for i := range p.Spec.EphemeralContainers {
		c := &p.Spec.EphemeralContainers[i].EphemeralContainerCommon
		c.VolumeMounts, c.VolumeDevices = filter(c.VolumeMounts, c.VolumeDevices)
	}
	return p
}
