package csidriver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// defaultCapacity is the size reported for a volume created without a
// capacity range; nothing enforces it, but Kubernetes wants a size.
const defaultCapacity int64 = 1 << 30

// PublishContextNode is the publish-context key under which
// ControllerPublishVolume reports the node the volume was attached to.
const PublishContextNode = "strandlab.io/attached-node"

// supportedAccessModes are the modes a directory shared through the state dir
// can honour. SINGLE_NODE_SINGLE_WRITER and SINGLE_NODE_MULTI_WRITER need the
// SINGLE_NODE_MULTI_WRITER capability, which the driver does not advertise.
var supportedAccessModes = map[csi.VolumeCapability_AccessMode_Mode]bool{
	csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER:       true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:  true,
	csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:   true,
	csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER: true,
	csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER:  true,
}

func singleNode(mode string) bool {
	switch mode {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER.String(),
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY.String(),
		csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER.String(),
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER.String():
		return true
	}
	return false
}

// checkCapability rejects capabilities the driver cannot serve. Block access
// would need loop devices, i.e. root, so only mount access is offered.
func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return errors.New("volume capability is missing")
	}
	switch {
	case c.GetMount() != nil:
	case c.GetBlock() != nil:
		return errors.New("block access is not supported")
	default:
		return errors.New("volume capability has no access type")
	}
	if c.GetAccessMode() == nil {
		return errors.New("volume capability has no access mode")
	}
	if m := c.GetAccessMode().GetMode(); !supportedAccessModes[m] {
		return fmt.Errorf("access mode %s is not supported", m)
	}
	return nil
}

func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return errors.New("volume capabilities are missing")
	}
	for _, c := range caps {
		if err := checkCapability(c); err != nil {
			return err
		}
	}
	return nil
}

// capacityFor picks the size of a new volume from the requested range.
func capacityFor(r *csi.CapacityRange) (int64, error) {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	switch {
	case req < 0 || lim < 0:
		return 0, errors.New("capacity range must not be negative")
	case lim > 0 && req > lim:
		return 0, fmt.Errorf("required bytes %d exceed limit bytes %d", req, lim)
	case req > 0:
		return req, nil
	case lim > 0 && lim < defaultCapacity:
		return lim, nil
	}
	return defaultCapacity, nil
}

func capacityFits(capacity int64, r *csi.CapacityRange) bool {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	return (req == 0 || capacity >= req) && (lim == 0 || capacity <= lim)
}

type controllerServer struct {
	csi.UnimplementedControllerServer
	d *Driver
}

func (s *controllerServer) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func volumeResponse(v *VolumeState) *csi.CreateVolumeResponse {
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: v.ID, CapacityBytes: v.CapacityBytes}}
}

func (s *controllerServer) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volume content sources (snapshots, clones) are not supported")
	}
	if len(req.GetMutableParameters()) > 0 {
		return nil, status.Error(codes.InvalidArgument, "mutable parameters are not supported")
	}
	capacity, err := capacityFor(req.GetCapacityRange())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}

	id := volumeIDForName(name)
	v, unlock, err := s.d.store.lockVolume(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if v != nil {
		if v.Name != name {
			return nil, status.Errorf(codes.Internal, "volume ID %s of name %q collides with name %q", id, name, v.Name)
		}
		if !capacityFits(v.CapacityBytes, req.GetCapacityRange()) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with capacity %d, outside the requested range", name, v.CapacityBytes)
		}
		if !maps.Equal(v.Parameters, req.GetParameters()) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with different parameters", name)
		}
		return volumeResponse(v), nil
	}

	// Data directory first: a state file always has its data behind it.
	if err := os.MkdirAll(s.d.store.dataDir(id), 0o777); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	v = &VolumeState{ID: id, Name: name, CapacityBytes: capacity, Parameters: req.GetParameters()}
	if len(v.Parameters) == 0 {
		v.Parameters = nil
	}
	if err := s.d.store.save(v); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	klog.V(2).InfoS("Volume created", "volume", id, "name", name, "capacity", capacity)
	return volumeResponse(v), nil
}

func (s *controllerServer) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if !validID(id) {
		// Cannot be one of ours, so it is already gone.
		return &csi.DeleteVolumeResponse{}, nil
	}
	v, unlock, err := s.d.store.lockVolume(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if v != nil && len(v.Published) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still published to %v", id, v.PublishedNodes())
	}
	// Remove even without state, to clean up after a delete cut short.
	if err := s.d.store.remove(id); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if v != nil {
		klog.V(2).InfoS("Volume deleted", "volume", id)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (s *controllerServer) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	id, nodeID := req.GetVolumeId(), req.GetNodeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if nodeID == "" {
		return nil, status.Error(codes.InvalidArgument, "node ID is required")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if !validID(id) {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", id)
	}
	v, unlock, err := s.d.store.lockVolume(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", id)
	}
	known, err := s.d.store.nodeKnown(nodeID)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if !known {
		return nil, status.Errorf(codes.NotFound, "node %s not found: no node instance registered it", nodeID)
	}

	want := Attachment{AccessMode: req.GetVolumeCapability().GetAccessMode().GetMode().String(), Readonly: req.GetReadonly()}
	publishContext := map[string]string{PublishContextNode: nodeID}
	if have, ok := v.Published[nodeID]; ok {
		if have != want {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s is already published to node %s as %+v", id, nodeID, have)
		}
		return &csi.ControllerPublishVolumeResponse{PublishContext: publishContext}, nil
	}
	for other, a := range v.Published {
		if singleNode(want.AccessMode) || singleNode(a.AccessMode) {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is published to node %s (%s)", id, other, a.AccessMode)
		}
	}
	if v.Published == nil {
		v.Published = map[string]Attachment{}
	}
	v.Published[nodeID] = want
	if err := s.d.store.save(v); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	klog.V(2).InfoS("Volume published", "volume", id, "node", nodeID, "accessMode", want.AccessMode, "readonly", want.Readonly)
	return &csi.ControllerPublishVolumeResponse{PublishContext: publishContext}, nil
}

// ControllerUnpublishVolume detaches a volume from a node (from all nodes if
// no node is given). An unknown volume or node counts as already detached.
// It does not insist that the node unstaged the volume first: Kubernetes
// guarantees that ordering, and the harness wants to observe, not enforce it.
func (s *controllerServer) ControllerUnpublishVolume(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	id, nodeID := req.GetVolumeId(), req.GetNodeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if !validID(id) {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	v, unlock, err := s.d.store.lockVolume(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if v == nil {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	var removed []string
	for n := range v.Published {
		if nodeID == "" || n == nodeID {
			removed = append(removed, n)
			delete(v.Published, n)
		}
	}
	if len(removed) == 0 {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if len(v.Published) == 0 {
		v.Published = nil
	}
	if err := s.d.store.save(v); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	for _, n := range removed {
		if u := v.Nodes[n]; u != nil {
			klog.V(1).InfoS("Volume unpublished while still in use on the node", "volume", id, "node", n,
				"stagingPath", u.StagingPath, "targets", len(u.Targets))
		}
		klog.V(2).InfoS("Volume unpublished", "volume", id, "node", n)
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (s *controllerServer) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	if !validID(id) {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", id)
	}
	// No lock: state files are replaced atomically and this only reads.
	v, err := s.d.store.load(id)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", id)
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	if len(req.GetParameters()) > 0 && !maps.Equal(v.Parameters, req.GetParameters()) {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: "parameters differ from the volume's"}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}
