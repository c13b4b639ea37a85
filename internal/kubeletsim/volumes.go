package kubeletsim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
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
	// MarkVolumesAsReportedInUse tells which volumes the node status last
	// written (or read) lists in volumesInUse; the reconciler verifies attach
	// only for those (upstream: VolumeManager.MarkVolumesAsReportedInUse).
	MarkVolumesAsReportedInUse([]corev1.UniqueVolumeName)
	// Start runs the volume manager's loops until ctx ends; events go to
	// recorder.
	Start(ctx context.Context, recorder record.EventRecorder) error
}

// NoVolumes is the volume manager of a node whose pods need no attachable
// volumes: everything is "mounted" at once.
type NoVolumes struct{}

func (NoVolumes) WaitForAttachAndMount(context.Context, *corev1.Pod) error { return nil }
func (NoVolumes) UnmountPodVolumes(context.Context, *corev1.Pod) error     { return nil }
func (NoVolumes) VolumesInUse() []corev1.UniqueVolumeName                  { return nil }
func (NoVolumes) MarkVolumesAsReportedInUse([]corev1.UniqueVolumeName)     {}
func (NoVolumes) Start(context.Context, record.EventRecorder) error        { return nil }

// VolumeWaitError is WaitForAttachAndMount's error when a pod's volumes were
// not all mounted: by the wait's end (Err is then context.DeadlineExceeded or
// context.Canceled, so wait.Interrupted reports it) or because resolving a
// volume failed. Its text is upstream's (volumeManager.WaitForAttachAndMount).
type VolumeWaitError struct {
	// Unmounted, Unattached and Unprocessed name volumes as the pod spec does.
	Unmounted, Unattached, Unprocessed []string
	Err                                error
}

func (e *VolumeWaitError) Error() string {
	return e.message(e.Err.Error())
}

func (e *VolumeWaitError) Unwrap() error { return e.Err }

func (e *VolumeWaitError) message(cause string) string {
	return fmt.Sprintf("unmounted volumes=%v, unattached volumes=%v, failed to process volumes=%v: %s",
		orEmpty(e.Unmounted), orEmpty(e.Unattached), orEmpty(e.Unprocessed), cause)
}

// orEmpty prints a nil list as [] like upstream's non-nil empty lists.
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
