package node

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/strandlab/strandlab/tools/upstream/kubelet-sim/volumes"
)

// VolumeManager is the part of the kubelet that attaches and mounts a pod's
// volumes, as the pod workers and the node status loop see it
// (volumemanager.VolumeManager). kubelet-sim passes upstream's own, through
// volumes.Manager; tests pass fakes.
type VolumeManager interface {
	// AdmitPod tells the volume manager of pod, or of its newer version,
	// when the kubelet admits it (the pod manager's UpdatePod in
	// HandlePodAdditions and HandlePodUpdates): its volumes are desired
	// from then on, before the pod's first sync writes any status.
	AdmitPod(pod *corev1.Pod)
	// PodTerminating tells that the pod's containers are being stopped: no
	// volume is added for it any more (podSyncStatus.IsTerminationStarted).
	PodTerminating(uid types.UID)
	// PodTerminated tells that the pod's containers have stopped (its
	// terminating sync ended): the populator drops its volumes from then
	// on (podSyncStatus.IsTerminated).
	PodTerminated(uid types.UID)
	// WaitForAttachAndMount blocks until every volume of pod is attached and
	// mounted, or the wait times out or ctx ends
	// (VolumeManager.WaitForAttachAndMount).
	WaitForAttachAndMount(ctx context.Context, pod *corev1.Pod) error
	// UnmountPodVolumes marks the pod terminated as PodTerminated does and
	// returns once its volumes are unmounted (VolumeManager.WaitForUnmount
	// after the reconciler unmounts).
	UnmountPodVolumes(ctx context.Context, pod *corev1.Pod) error
	// VolumesInUse are the volumes the node reports in status.volumesInUse
	// (VolumeManager.GetVolumesInUse).
	VolumesInUse() []corev1.UniqueVolumeName
	// ReconcilerStatesHasBeenSynced gates status.volumesInUse: the kubelet
	// sets it only once the reconciler has synced its states
	// (nodestatus.VolumesInUse).
	ReconcilerStatesHasBeenSynced() bool
	// MarkVolumesAsReportedInUse tells which volumes the node status last
	// written (or read) lists in volumesInUse; the reconciler verifies attach
	// only for those (VolumeManager.MarkVolumesAsReportedInUse).
	MarkVolumesAsReportedInUse([]corev1.UniqueVolumeName)
	// Start runs the volume manager's loops until ctx ends; events go to
	// recorder.
	Start(ctx context.Context, recorder record.EventRecorder) error
}

// NoVolumes is the volume manager of a node whose pods need no attachable
// volumes: everything is "mounted" at once.
type NoVolumes struct{}

func (NoVolumes) AdmitPod(*corev1.Pod)                                     {}
func (NoVolumes) PodTerminating(types.UID)                                 {}
func (NoVolumes) PodTerminated(types.UID)                                  {}
func (NoVolumes) WaitForAttachAndMount(context.Context, *corev1.Pod) error { return nil }
func (NoVolumes) UnmountPodVolumes(context.Context, *corev1.Pod) error     { return nil }
func (NoVolumes) VolumesInUse() []corev1.UniqueVolumeName                  { return nil }
func (NoVolumes) ReconcilerStatesHasBeenSynced() bool                      { return true }
func (NoVolumes) MarkVolumesAsReportedInUse([]corev1.UniqueVolumeName)     {}
func (NoVolumes) Start(context.Context, record.EventRecorder) error        { return nil }

// upstream's volume manager, as kubelet-sim runs it, is a VolumeManager.
var _ VolumeManager = (*volumes.Manager)(nil)
