package kubeletsim

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// VolumeManager is the part of the kubelet that attaches and mounts a pod's
// volumes, as the pod workers see it (upstream: volumemanager.VolumeManager).
type VolumeManager interface {
	// WaitForAttachAndMount blocks until every volume of pod is attached and
	// mounted, or ctx ends (upstream: VolumeManager.WaitForAttachAndMount).
	WaitForAttachAndMount(ctx context.Context, pod *corev1.Pod) error
	// UnmountPodVolumes tears down the pod's volumes and returns once they are
	// unmounted (upstream: WaitForUnmount after the reconciler unmounts).
	UnmountPodVolumes(ctx context.Context, pod *corev1.Pod) error
	// VolumesInUse are the volumes the node reports in status.volumesInUse
	// (upstream: VolumeManager.GetVolumesInUse).
	VolumesInUse() []corev1.UniqueVolumeName
	// Changed is signalled when VolumesInUse changed and the node status
	// should be written now rather than at the next status update tick.
	Changed() <-chan struct{}
}

// NoVolumes is the volume manager of a node whose pods need no attachable
// volumes: everything is "mounted" at once.
type NoVolumes struct{}

func (NoVolumes) WaitForAttachAndMount(context.Context, *corev1.Pod) error { return nil }
func (NoVolumes) UnmountPodVolumes(context.Context, *corev1.Pod) error     { return nil }
func (NoVolumes) VolumesInUse() []corev1.UniqueVolumeName                  { return nil }
func (NoVolumes) Changed() <-chan struct{}                                 { return nil }
