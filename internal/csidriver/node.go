package csidriver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// StageMarker is the file NodeStageVolume writes into the staging target path
// in place of a mount; it holds the volume ID.
const StageMarker = ".strandlab-csi-staged"

type nodeServer struct {
	csi.UnimplementedNodeServer
	d *Driver
}

func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{
			Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		}},
	}}}, nil
}

func (s *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	if s.d.cfg.NodeID == "" {
		return nil, status.Error(codes.FailedPrecondition, "driver has no node ID")
	}
	return &csi.NodeGetInfoResponse{NodeId: s.d.cfg.NodeID}, nil
}

// stagedVolume returns the volume ID recorded in the stage marker at path, or
// "" if there is none.
func stagedVolume(stagingPath string) (string, error) {
	b, err := os.ReadFile(filepath.Join(stagingPath, StageMarker))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the stage marker: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// lockedVolume locks and loads a volume for a node operation; a missing
// volume is NotFound.
func (s *nodeServer) lockedVolume(id string) (*VolumeState, func(), error) {
	if !validID(id) {
		return nil, nil, status.Errorf(codes.NotFound, "volume %s not found", id)
	}
	v, unlock, err := s.d.store.lockVolume(id)
	if err != nil {
		return nil, nil, err
	}
	if v == nil {
		unlock()
		return nil, nil, status.Errorf(codes.NotFound, "volume %s not found", id)
	}
	return v, unlock, nil
}

// NodeStageVolume stands in for attaching and formatting: it refuses unless
// the controller published the volume to this node, which is what makes the
// Kubernetes attach flow matter for this driver.
func (s *nodeServer) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	id, path := req.GetVolumeId(), req.GetStagingTargetPath()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if path == "" {
		return nil, status.Error(codes.InvalidArgument, "staging target path is required")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	v, unlock, err := s.lockedVolume(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	node := s.d.cfg.NodeID
	if _, ok := v.Published[node]; !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not published to node %s", id, node)
	}
	if u := v.Nodes[node]; u != nil && u.StagingPath != "" && u.StagingPath != path {
		return nil, status.Errorf(codes.AlreadyExists, "volume %s is already staged on node %s at %s", id, node, u.StagingPath)
	}
	if err := os.MkdirAll(path, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	staged, err := stagedVolume(path)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	switch staged {
	case id:
	case "":
		if err := writeFileAtomic(filepath.Join(path, StageMarker), []byte(id+"\n")); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	default:
		return nil, status.Errorf(codes.FailedPrecondition, "staging path %s holds volume %s", path, staged)
	}
	if u := v.usage(node); u.StagingPath != path {
		u.StagingPath = path
		if err := s.d.store.save(v); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		klog.V(2).InfoS("Volume staged", "volume", id, "node", node, "path", path)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// NodeUnstageVolume removes the stage marker. The staging directory itself
// belongs to the CO, which removes it.
func (s *nodeServer) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	id, path := req.GetVolumeId(), req.GetStagingTargetPath()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if path == "" {
		return nil, status.Error(codes.InvalidArgument, "staging target path is required")
	}
	if !validID(id) {
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	v, unlock, err := s.d.store.lockVolume(id)
	if err != nil {
		return nil, err
	}
	defer unlock()

	staged, err := stagedVolume(path)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if staged == id {
		if err := os.Remove(filepath.Join(path, StageMarker)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	// v is nil when the volume is gone already: no state to update.
	node := s.d.cfg.NodeID
	if u := v.nodeUsage(node); u != nil && u.StagingPath == path {
		if len(u.Targets) > 0 {
			klog.V(1).InfoS("Volume unstaged while still published", "volume", id, "node", node, "targets", len(u.Targets))
		}
		u.StagingPath = ""
		v.pruneUsage(node)
		if err := s.d.store.save(v); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		klog.V(2).InfoS("Volume unstaged", "volume", id, "node", node, "path", path)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume makes the volume's data directory appear at the target
// path, as a symlink or a bind mount (Config.PublishMode). It requires the
// volume to be attached to and staged on this node.
func (s *nodeServer) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, target, staging := req.GetVolumeId(), req.GetTargetPath(), req.GetStagingTargetPath()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target path is required")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if staging == "" {
		// The CSI spec's code for STAGE_UNSTAGE_VOLUME without a staging path.
		return nil, status.Error(codes.FailedPrecondition, "staging target path is required")
	}
	v, unlock, err := s.lockedVolume(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	node := s.d.cfg.NodeID
	if _, ok := v.Published[node]; !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not published to node %s", id, node)
	}
	staged, err := stagedVolume(staging)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if u := v.nodeUsage(node); u == nil || u.StagingPath != staging || staged != id {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s on node %s", id, staging, node)
	}
	if ro, ok := v.Nodes[node].Targets[target]; ok && ro != req.GetReadonly() {
		return nil, status.Errorf(codes.AlreadyExists, "volume %s is already published at %s with readonly=%v", id, target, ro)
	}

	data := s.d.store.dataDir(id)
	publish := publishSymlink
	if s.d.cfg.PublishMode == PublishBind {
		publish = publishBind
	}
	if err := publish(data, target, req.GetReadonly()); err != nil {
		return nil, err
	}

	u := v.usage(node)
	if ro, ok := u.Targets[target]; !ok || ro != req.GetReadonly() {
		if u.Targets == nil {
			u.Targets = map[string]bool{}
		}
		u.Targets[target] = req.GetReadonly()
		if err := s.d.store.save(v); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		klog.V(2).InfoS("Volume published on node", "volume", id, "node", node, "target", target, "readonly", req.GetReadonly())
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume removes the target symlink or bind mount (and the
// directory it was mounted on).
func (s *nodeServer) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target path is required")
	}
	if !validID(id) {
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	v, unlock, err := s.d.store.lockVolume(id)
	if err != nil {
		return nil, err
	}
	defer unlock()

	unpublish := unpublishSymlink
	if s.d.cfg.PublishMode == PublishBind {
		unpublish = unpublishBind
	}
	if err := unpublish(s.d.store.dataDir(id), target); err != nil {
		return nil, err
	}

	node := s.d.cfg.NodeID
	if u := v.nodeUsage(node); u != nil {
		if _, ok := u.Targets[target]; ok {
			delete(u.Targets, target)
			if len(u.Targets) == 0 {
				u.Targets = nil
			}
			v.pruneUsage(node)
			if err := s.d.store.save(v); err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
			klog.V(2).InfoS("Volume unpublished on node", "volume", id, "node", node, "target", target)
		}
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// publishSymlink makes target a symlink to the volume's data directory. The
// symlink cannot be read-only: ro is not enforced.
func publishSymlink(data, target string, _ bool) error {
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	case err != nil:
		return status.Error(codes.Internal, err.Error())
	case fi.Mode().Type() == fs.ModeSymlink:
		if dest, _ := os.Readlink(target); dest != data {
			return status.Errorf(codes.FailedPrecondition, "target path %s is a symlink to %s", target, dest)
		}
		return nil
	case fi.IsDir():
		// A CO may pre-create the target directory, as for a mount point.
		// Only an empty one can be replaced by the symlink.
		if err := os.Remove(target); err != nil {
			return status.Errorf(codes.FailedPrecondition, "target path %s is in use: %v", target, err)
		}
	default:
		return status.Errorf(codes.FailedPrecondition, "target path %s exists and is not a directory", target)
	}
	if err := os.Symlink(data, target); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

// unpublishSymlink removes target if it is a symlink to the volume's data
// directory. It removes nothing it did not create: anything else is left
// alone.
func unpublishSymlink(data, target string) error {
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return status.Error(codes.Internal, err.Error())
	case fi.Mode().Type() == fs.ModeSymlink:
		if dest, _ := os.Readlink(target); dest == data {
			if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return status.Error(codes.Internal, err.Error())
			}
		}
	}
	return nil
}

// publishBind creates the target directory and bind-mounts the volume's data
// directory onto it, read-only if ro. A target that shows the data directory
// already (a repeated call, or a driver restarted between mount and state
// update) is only brought to the requested read-only state.
func publishBind(data, target string, ro bool) error {
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(target, 0o750); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	case err != nil:
		return status.Error(codes.Internal, err.Error())
	case !fi.IsDir():
		// Symlinks too: mount(2) would follow one anywhere.
		return status.Errorf(codes.FailedPrecondition, "target path %s exists and is not a directory", target)
	}
	mounted, err := isMountPoint(target)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if !mounted {
		if err := bindMount(data, target, ro); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return nil
	}
	if err := checkMountOf(data, target); err != nil {
		return err
	}
	isRO, err := readOnly(target)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if isRO != ro {
		if err := remount(target, ro); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	}
	return nil
}

// unpublishBind unmounts the volume from target and removes the directory.
// It unmounts only the volume's data directory: a mount of anything else is
// an error, and is left alone.
func unpublishBind(data, target string) error {
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return status.Error(codes.Internal, err.Error())
	case fi.Mode().Type() == fs.ModeSymlink:
		// Published by an instance in symlink mode.
		return unpublishSymlink(data, target)
	case !fi.IsDir():
		return nil
	}
	// Loop: a mount stacked on the same target (two racing publishes from
	// another instance) needs one unmount each.
	for {
		mounted, err := isMountPoint(target)
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		if !mounted {
			break
		}
		if err := checkMountOf(data, target); err != nil {
			return err
		}
		if err := unmount(target); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	}
	// Only an empty directory goes: files in an unmounted target were written
	// to the node's disk instead of the volume, and are not ours to delete.
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return status.Errorf(codes.FailedPrecondition, "target path %s is not a mount point and cannot be removed: %v", target, err)
	}
	return nil
}

// checkMountOf checks that the mount point target shows the directory data:
// a bind mount's root is the very inode of its source.
func checkMountOf(data, target string) error {
	tfi, err := os.Stat(target)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	dfi, err := os.Stat(data)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if !os.SameFile(tfi, dfi) {
		return status.Errorf(codes.FailedPrecondition, "target path %s is a mount point of something other than %s", target, data)
	}
	return nil
}
