package csilatency

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// driver is a CSI node service that records the volumes of its calls and
// refuses to unpublish an unknown one, as a driver would.
type driver struct {
	csi.UnimplementedNodeServer
	mu    sync.Mutex
	calls []string
}

func (d *driver) record(c string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, c)
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	d.record("NodeGetCapabilities")
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}},
	}}}, nil
}

func (d *driver) NodeUnstageVolume(_ context.Context, r *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	d.record("NodeUnstageVolume " + r.VolumeId)
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	d.record("NodeUnpublishVolume " + r.VolumeId)
	return nil, status.Errorf(codes.NotFound, "volume %s not found", r.VolumeId)
}

// draws holds NodeUnstageVolume and NodeUnpublishVolume for a minute each
// and has no time for any other method.
type draws struct{}

func (draws) CSICall(method string) (time.Duration, bool) {
	switch method {
	case "NodeUnstageVolume", "NodeUnpublishVolume":
		return time.Minute, true
	}
	return 0, false
}

// The proxy forwards each call to the driver, its reply or its error as
// the driver gave it, and holds the drawn methods for the draw less the
// call's own time.
func TestProxyForwardsAndHolds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := &driver{}
	name := fmt.Sprintf("@csilatency-test-%d", os.Getpid())
	l, err := net.Listen("unix", name+"-driver")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterNodeServer(srv, d)
	go srv.Serve(l) //nolint:errcheck
	defer srv.Stop()

	var mu sync.Mutex
	var held []time.Duration
	record := func(_ context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, d)
		return nil
	}
	p, err := start(ctx, name, name+"-driver", draws{}, record)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///"+p.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := csi.NewNodeClient(conn)

	tests := []struct {
		name     string
		call     func() error
		wantCode codes.Code
		wantCall string
		wantHeld bool
	}{
		{"a drawn call is forwarded and held", func() error {
			_, err := client.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging"})
			return err
		}, codes.OK, "NodeUnstageVolume vol-1", true},
		{"a call that is not drawn is forwarded, not held, its reply intact", func() error {
			r, err := client.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
			if err == nil && r.GetCapabilities()[0].GetRpc().GetType() != csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME {
				return fmt.Errorf("capabilities %v", r)
			}
			return err
		}, codes.OK, "NodeGetCapabilities", false},
		{"the driver's error comes back, held as the call would be", func() error {
			_, err := client.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-2", TargetPath: "/target"})
			return err
		}, codes.NotFound, "NodeUnpublishVolume vol-2", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			held = nil
			mu.Unlock()
			err := tc.call()
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("code %v (err %v), want %v", got, err, tc.wantCode)
			}
			d.mu.Lock()
			last := d.calls[len(d.calls)-1]
			d.mu.Unlock()
			if last != tc.wantCall {
				t.Errorf("driver's last call %q, want %q", last, tc.wantCall)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tc.wantHeld && (len(held) != 1 || held[0] <= 0 || held[0] > time.Minute):
				t.Errorf("held %v, want one hold in (0, 1m]", held)
			case !tc.wantHeld && len(held) != 0:
				t.Errorf("held %v, want none", held)
			}
		})
	}
}
