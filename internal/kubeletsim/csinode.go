package kubeletsim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// nodeIDAnnotation is where the kubelet also records each driver's node ID
// (nodeinfomanager.annotationKeyNodeID).
const nodeIDAnnotation = "csi.volume.kubernetes.io/nodeid"

// registerCSIDriver does what the kubelet's CSI plugin registration does for
// a node plugin (csi_plugin.go RegistrationHandler.RegisterPlugin ->
// nodeinfomanager.InstallCSIDriver): ask the driver for its node ID and
// record it in the node's CSINode object and node annotation, which is where
// the external-attacher looks it up.
func (m *CSIVolumeManager) registerCSIDriver(ctx context.Context) error {
	var info *csi.NodeGetInfoResponse
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 8, Cap: 5 * time.Second},
		func(ctx context.Context) (bool, error) {
			var err error
			info, err = m.node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
			return err == nil, nil
		})
	if err != nil {
		return fmt.Errorf("NodeGetInfo from driver %s: %w", m.driverName, err)
	}
	node, err := m.client.CoreV1().Nodes().Get(ctx, m.nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ids := map[string]string{}
	if raw := node.Annotations[nodeIDAnnotation]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &ids)
	}
	if ids[m.driverName] != info.NodeId {
		ids[m.driverName] = info.NodeId
		raw, _ := json.Marshal(ids)
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{nodeIDAnnotation: string(raw)}}})
		if _, err := m.client.CoreV1().Nodes().Patch(ctx, m.nodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("annotate node with the CSI node ID: %w", err)
		}
	}
	driver := storagev1.CSINodeDriver{Name: m.driverName, NodeID: info.NodeId}
	if n := info.MaxVolumesPerNode; n > 0 {
		c := int32(n)
		driver.Allocatable = &storagev1.VolumeNodeResources{Count: &c}
	}
	csiNode := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.nodeName,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: corev1.SchemeGroupVersion.String(), Kind: "Node", Name: node.Name, UID: node.UID,
			}},
		},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{driver}},
	}
	existing, err := m.client.StorageV1().CSINodes().Get(ctx, m.nodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = m.client.StorageV1().CSINodes().Create(ctx, csiNode, metav1.CreateOptions{})
	case err == nil:
		var drivers []storagev1.CSINodeDriver
		for _, d := range existing.Spec.Drivers {
			if d.Name != m.driverName {
				drivers = append(drivers, d)
			}
		}
		existing.Spec.Drivers = append(drivers, driver)
		_, err = m.client.StorageV1().CSINodes().Update(ctx, existing, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("CSINode %s: %w", m.nodeName, err)
	}
	return nil
}
