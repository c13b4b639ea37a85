/*
Copyright 2016 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package statusupdater implements interfaces that enable updating the status
// of API objects.
//
// strandlab fix: the node status updater writes node.status.volumesAttached
// without diffing against the informer cache. Upstream computes a
// strategic-merge patch as the difference between the cached node and the
// desired list; when the cache is stale the difference can be empty, the
// updater sends {} and believes the node is up to date although the server
// is not (kubernetes issue #122413), and in the mirror case a removal is
// never written while the volume is detached. Here, every time a node is
// marked for update:
//   - one PATCH of the status subresource sends the full desired list,
//     {"status":{"volumesAttached":[...]}} ({"status":{"volumesAttached":null}}
//     when it is empty). volumesAttached is listType=atomic without a patch
//     strategy, so the list in the patch replaces the server's whole list,
//     whatever the cache says;
//   - the API server's response is the truth: when its list differs from the
//     desired one the node is marked for update again, and when it still
//     lists a volume that is not desired the update fails, so the reconciler,
//     which detaches only after UpdateNodeStatusForNode succeeds, does not
//     detach before the server has confirmed the volume is gone from the list;
//   - any error marks the node for update again, except NotFound (the node is
//     gone; it is marked again when it is added).
//
// It sends no more requests than upstream: the node lister is still read only
// to skip nodes the controller does not know, and the PATCH is the only
// request, one per marked node per loop, with no GET.
package statusupdater

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/volume/attachdetach/cache"
)

// NodeStatusUpdater defines a set of operations for updating the
// VolumesAttached field in the Node Status.
type NodeStatusUpdater interface {
	// Gets a list of node statuses that should be updated from the actual state
	// of the world and updates them.
	UpdateNodeStatuses(logger klog.Logger) error
	// Update any pending status change for the given node
	UpdateNodeStatusForNode(logger klog.Logger, nodeName types.NodeName) error
}

// NewNodeStatusUpdater returns a new instance of NodeStatusUpdater.
func NewNodeStatusUpdater(
	kubeClient clientset.Interface,
	nodeLister corelisters.NodeLister,
	actualStateOfWorld cache.ActualStateOfWorld) NodeStatusUpdater {
	return &nodeStatusUpdater{
		actualStateOfWorld: actualStateOfWorld,
		nodeLister:         nodeLister,
		kubeClient:         kubeClient,
	}
}

type nodeStatusUpdater struct {
	kubeClient         clientset.Interface
	nodeLister         corelisters.NodeLister
	actualStateOfWorld cache.ActualStateOfWorld
}

func (nsu *nodeStatusUpdater) UpdateNodeStatuses(logger klog.Logger) error {
	var nodeIssues int
	// TODO: investigate right behavior if nodeName is empty
	// kubernetes/kubernetes/issues/37777
	nodesToUpdate := nsu.actualStateOfWorld.GetVolumesToReportAttached(logger)
	for nodeName, attachedVolumes := range nodesToUpdate {
		err := nsu.processNodeVolumes(logger, nodeName, attachedVolumes)
		if err != nil {
			nodeIssues += 1
		}
	}
	if nodeIssues > 0 {
		return fmt.Errorf("unable to update %d nodes", nodeIssues)
	}
	return nil
}

func (nsu *nodeStatusUpdater) UpdateNodeStatusForNode(logger klog.Logger, nodeName types.NodeName) error {
	needsUpdate, attachedVolumes := nsu.actualStateOfWorld.GetVolumesToReportAttachedForNode(logger, nodeName)
	if !needsUpdate {
		return nil
	}
	return nsu.processNodeVolumes(logger, nodeName, attachedVolumes)
}

func (nsu *nodeStatusUpdater) processNodeVolumes(logger klog.Logger, nodeName types.NodeName, attachedVolumes []v1.AttachedVolume) error {
	// strandlab fix: the cached node is only checked for existence (no
	// request is sent for a node the controller does not know, as upstream);
	// its status is not used.
	_, err := nsu.nodeLister.Get(string(nodeName))
	if errors.IsNotFound(err) {
		// If node does not exist, its status cannot be updated.
		// Do nothing so that there is no retry until node is created.
		logger.V(2).Info(
			"Could not update node status. Failed to find node in NodeInformer cache", "node", klog.KRef("", string(nodeName)), "err", err)
		return nil
	} else if err != nil {
		// For all other errors, log error and reset flag statusUpdateNeeded
		// back to true to indicate this node status needs to be updated again.
		logger.V(2).Info("Error retrieving nodes from node lister", "err", err)
		nsu.actualStateOfWorld.SetNodeStatusUpdateNeeded(logger, nodeName)
		return err
	}

	err = nsu.updateNodeStatus(logger, nodeName, attachedVolumes)
	if errors.IsNotFound(err) {
		// If node does not exist, its status cannot be updated.
		// Do nothing so that there is no retry until node is created.
		logger.V(2).Info(
			"Could not update node status, node does not exist - skipping", "node", klog.KRef("", string(nodeName)))
		return nil
	} else if err != nil {
		// If update node status fails, reset flag statusUpdateNeeded back to true
		// to indicate this node status needs to be updated again
		nsu.actualStateOfWorld.SetNodeStatusUpdateNeeded(logger, nodeName)

		logger.V(2).Info("Could not update node status; re-marking for update", "node", klog.KRef("", string(nodeName)), "err", err)

		return err
	}
	return nil
}

// strandlab fix: updateNodeStatus replaces the server's volumesAttached with
// attachedVolumes in one PATCH and checks the server's answer. It returns an
// error (and the caller marks the node again) when the PATCH fails or when
// the server still lists a volume that is not desired; when the server's list
// only lacks a desired volume or differs in a device path, it marks the node
// again itself and returns nil (nothing unsafe can follow from it).
func (nsu *nodeStatusUpdater) updateNodeStatus(logger klog.Logger, nodeName types.NodeName, attachedVolumes []v1.AttachedVolume) error {
	patchBytes, err := volumesAttachedPatch(attachedVolumes)
	if err != nil {
		return err
	}
	updated, err := nsu.kubeClient.CoreV1().Nodes().Patch(context.TODO(), string(nodeName), types.StrategicMergePatchType, patchBytes, metav1.PatchOptions{}, "status")
	if err != nil {
		// strandlab fix: %w (upstream's nodeutil.PatchNodeStatus uses %v) so
		// that the caller's IsNotFound check sees a NotFound from the server.
		return fmt.Errorf("failed to patch status %q for node %q: %w", patchBytes, nodeName, err)
	}

	if updated == nil {
		return fmt.Errorf("patch %q for node %q returned no node", patchBytes, nodeName)
	}
	extra, differs := compareVolumesAttached(attachedVolumes, updated.Status.VolumesAttached)
	if len(extra) > 0 {
		return fmt.Errorf("node %q still lists volumes %v as attached after patch %q; not confirmed as removed", nodeName, extra, patchBytes)
	}
	if differs {
		nsu.actualStateOfWorld.SetNodeStatusUpdateNeeded(logger, nodeName)
		logger.V(2).Info("Node status after patch differs from the desired volumes; re-marking for update", "node", klog.KRef("", string(nodeName)), "patchBytes", patchBytes, "volumesAttached", updated.Status.VolumesAttached)
		return nil
	}

	logger.V(4).Info("Updating status for node succeeded", "node", klog.KRef("", string(nodeName)), "patchBytes", patchBytes, "attachedVolumes", attachedVolumes)
	return nil
}

// strandlab fix: volumesAttachedPatch is the strategic-merge patch that sets
// status.volumesAttached to exactly attachedVolumes; null (which removes the
// field) when there are none.
func volumesAttachedPatch(attachedVolumes []v1.AttachedVolume) ([]byte, error) {
	if len(attachedVolumes) == 0 {
		attachedVolumes = nil
	}
	type status struct {
		VolumesAttached []v1.AttachedVolume `json:"volumesAttached"`
	}
	patch := struct {
		Status status `json:"status"`
	}{status{attachedVolumes}}
	return json.Marshal(patch)
}

// strandlab fix: compareVolumesAttached compares the server's list with the
// desired one, regardless of order: extra are the volumes the server lists
// but that are not desired, differs is true when the lists are not the same
// set of (name, device path).
func compareVolumesAttached(desired, actual []v1.AttachedVolume) (extra []v1.UniqueVolumeName, differs bool) {
	want := make(map[v1.UniqueVolumeName]string, len(desired))
	for _, v := range desired {
		want[v.Name] = v.DevicePath
	}
	seen := make(map[v1.UniqueVolumeName]bool, len(actual))
	for _, v := range actual {
		devicePath, ok := want[v.Name]
		switch {
		case !ok:
			extra = append(extra, v.Name)
			differs = true
		case devicePath != v.DevicePath || seen[v.Name]:
			differs = true
		}
		seen[v.Name] = true
	}
	if len(seen) != len(want) {
		differs = true
	}
	return extra, differs
}
