package volumes

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
)

// fakeNodeServer is a CSI node service on a unix socket, standing in for
// strandlab's driver (internal/csidriver in the harness module, which this
// module does not import; see go.mod). It records the calls the kubelet's
// CSI plugin makes and answers like the driver in symlink mode: staging is
// bookkeeping, publishing creates the target.
type fakeNodeServer struct {
	csi.UnimplementedNodeServer
	nodeID string

	mu    sync.Mutex
	calls []csiCall
}

type csiCall struct {
	method         string
	volumeID       string
	path           string // staging path (stage/unstage) or target path (publish/unpublish)
	stagingPath    string // publish only
	publishContext map[string]string
}

func (f *fakeNodeServer) record(c csiCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

// Calls returns the recorded calls of method ("" for all).
func (f *fakeNodeServer) Calls(method string) []csiCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []csiCall
	for _, c := range f.calls {
		if method == "" || c.method == method {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeNodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	f.record(csiCall{method: "NodeGetInfo"})
	return &csi.NodeGetInfoResponse{NodeId: f.nodeID}, nil
}

func (f *fakeNodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}},
	}}}, nil
}

func (f *fakeNodeServer) NodeStageVolume(_ context.Context, r *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	f.record(csiCall{method: "NodeStageVolume", volumeID: r.VolumeId, path: r.StagingTargetPath, publishContext: r.PublishContext})
	return &csi.NodeStageVolumeResponse{}, nil
}

func (f *fakeNodeServer) NodeUnstageVolume(_ context.Context, r *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	f.record(csiCall{method: "NodeUnstageVolume", volumeID: r.VolumeId, path: r.StagingTargetPath})
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (f *fakeNodeServer) NodePublishVolume(_ context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	f.record(csiCall{method: "NodePublishVolume", volumeID: r.VolumeId, path: r.TargetPath, stagingPath: r.StagingTargetPath, publishContext: r.PublishContext})
	if err := os.MkdirAll(r.TargetPath, 0o750); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (f *fakeNodeServer) NodeUnpublishVolume(_ context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	f.record(csiCall{method: "NodeUnpublishVolume", volumeID: r.VolumeId, path: r.TargetPath})
	if err := os.RemoveAll(r.TargetPath); err != nil {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// startFakeNodeServer serves a fake node service and returns it and its
// socket path. The socket lives in a short temp dir: unix socket paths are
// limited to 108 bytes.
func startFakeNodeServer(t *testing.T, nodeID string) (*fakeNodeServer, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "node.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen on %s: %v", sock, err)
	}
	f := &fakeNodeServer{nodeID: nodeID}
	srv := grpc.NewServer()
	csi.RegisterNodeServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return f, sock
}

func (c csiCall) String() string {
	return fmt.Sprintf("%s(%s, %s)", c.method, c.volumeID, c.path)
}
