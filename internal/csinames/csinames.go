// Package csinames computes the names Kubernetes gives a CSI volume and its
// attachment, and the node annotation that hands attaching to the
// attach/detach controller: what the e2e suites need to find a volume in
// node status and its VolumeAttachment, without linking the kubelet code
// (that lives in the kubelet-sim module, tools/upstream/kubelet-sim).
package csinames

import (
	"crypto/sha256"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// csiPluginName is pkg/volume/csi.CSIPluginName.
const csiPluginName = "kubernetes.io/csi"

// ControllerManagedAttachAnnotation tells the attach/detach controller that
// it, not the kubelet, attaches this node's volumes
// (volumehelper.ControllerManagedAttachAnnotation). The controller ignores
// nodes without it, and their pods.
const ControllerManagedAttachAnnotation = "volumes.kubernetes.io/controller-managed-attach-detach"

// UniqueVolumeName is the name the attach/detach controller and the kubelet
// agree on for a CSI volume (util.GetUniqueVolumeName with
// csiPlugin.GetVolumeName): kubernetes.io/csi/<driver>^<volumeHandle>. It
// is what node.status.volumesAttached and volumesInUse list.
func UniqueVolumeName(driver, handle string) corev1.UniqueVolumeName {
	return corev1.UniqueVolumeName(csiPluginName + "/" + driver + "^" + handle)
}

// VolumeAttachmentName mirrors pkg/volume/csi getAttachmentName:
// "csi-" + hex(sha256(volumeHandle + driverName + nodeName)).
func VolumeAttachmentName(handle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driver+node)))
}
