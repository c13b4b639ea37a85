// Package csidriver is strandlab's own CSI driver with hostpath semantics.
//
// The harness needs a driver whose volumes must be attached before they can be
// used: the attach/detach controller's bookkeeping of attached volumes is the
// thing under test, so a driver without ControllerPublishVolume would never
// exercise it. The driver therefore advertises PUBLISH_UNPUBLISH_VOLUME and its
// node service refuses to stage a volume that is not ControllerPublished to that
// node.
//
// A volume is a directory <state-dir>/volumes/<volume-id>/; staging writes a
// marker file into the staging target path. Publishing makes the target path a
// symlink to the volume's directory by default, so that the harness with
// simulated kubelets needs no root; for real kubelets (a kind cluster) it
// bind-mounts the directory instead (PublishBind), and Run can register the
// driver with the kubelet itself (Config.RegistrationDir), as
// node-driver-registrar would. docs/csi-driver.md describes both.
//
// All state lives in JSON files under a shared state directory, one file per
// volume, so that one controller process and several node processes (one per
// simulated node) see the same volumes:
//
//	<state-dir>/state/<volume-id>.json   volume state (VolumeState)
//	<state-dir>/volumes/<volume-id>/     volume data
//	<state-dir>/locks/<volume-id>.lock   flock(2) target serialising updates
//	<state-dir>/nodes/<node-id>          written by each node instance at start
package csidriver
