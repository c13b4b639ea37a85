package csidriver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

var ctx = context.Background()

func newTestDriver(t *testing.T, dir string, mode Mode, node string) *Driver {
	t.Helper()
	d, err := NewDriver(Config{Mode: mode, NodeID: node, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func volCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

var snw = volCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)

func createReq(name string, size int64, params map[string]string, caps ...*csi.VolumeCapability) *csi.CreateVolumeRequest {
	if len(caps) == 0 {
		caps = []*csi.VolumeCapability{snw}
	}
	return &csi.CreateVolumeRequest{
		Name:               name,
		VolumeCapabilities: caps,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: size},
		Parameters:         params,
	}
}

func pubReq(vol, node string, mode csi.VolumeCapability_AccessMode_Mode, ro bool) *csi.ControllerPublishVolumeRequest {
	return &csi.ControllerPublishVolumeRequest{VolumeId: vol, NodeId: node, VolumeCapability: volCap(mode), Readonly: ro}
}

// env is a controller instance and two node instances (node-a, node-b)
// sharing one state dir, as separate processes would, plus one volume.
type env struct {
	state, work string
	c           csi.ControllerServer
	a, b        csi.NodeServer
	vol         string
}

func newEnv(t *testing.T) *env { return newEnvPublishing(t, PublishSymlink) }

// newEnvPublishing is newEnv with node instances in publish mode pm.
func newEnvPublishing(t *testing.T, pm PublishMode) *env {
	t.Helper()
	e := &env{state: t.TempDir(), work: t.TempDir()}
	e.c = newTestDriver(t, e.state, ModeController, "").ControllerServer()
	for _, n := range []struct {
		srv  *csi.NodeServer
		node string
	}{{&e.a, "node-a"}, {&e.b, "node-b"}} {
		d, err := NewDriver(Config{Mode: ModeNode, NodeID: n.node, StateDir: e.state, PublishMode: pm})
		if err != nil {
			t.Fatal(err)
		}
		*n.srv = d.NodeServer()
	}
	rsp, err := e.c.CreateVolume(ctx, createReq("pvc-1", 1<<20, nil))
	if err != nil {
		t.Fatal(err)
	}
	e.vol = rsp.GetVolume().GetVolumeId()
	return e
}

func (e *env) staging(node string) string { return filepath.Join(e.work, node, "staging") }
func (e *env) target(node string) string  { return filepath.Join(e.work, node, "pods", "vol") }

func (e *env) publish(node string) error {
	_, err := e.c.ControllerPublishVolume(ctx, pubReq(e.vol, node, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, false))
	return err
}

func (e *env) stage(n csi.NodeServer, node string) error {
	_, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: e.vol, StagingTargetPath: e.staging(node), VolumeCapability: snw})
	return err
}

func (e *env) unstage(n csi.NodeServer, node string) error {
	_, err := n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: e.vol, StagingTargetPath: e.staging(node)})
	return err
}

func (e *env) nodePublish(n csi.NodeServer, node string) error {
	_, err := n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: e.vol, StagingTargetPath: e.staging(node), TargetPath: e.target(node), VolumeCapability: snw,
	})
	return err
}

func (e *env) nodeUnpublish(n csi.NodeServer, node string) error {
	_, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: e.vol, TargetPath: e.target(node)})
	return err
}

// seq runs steps until one fails.
func seq(steps ...func() error) error {
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

func TestRules(t *testing.T) {
	mnmw := csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	tests := []struct {
		name string
		run  func(e *env) error
		want codes.Code
	}{
		// Attach gating: the node only works with volumes attached to it.
		{"stage before controller publish", func(e *env) error { return e.stage(e.a, "node-a") }, codes.FailedPrecondition},
		{"stage on a node the volume is not published to", func(e *env) error {
			return seq(func() error { return e.publish("node-b") }, func() error { return e.stage(e.a, "node-a") })
		}, codes.FailedPrecondition},
		{"stage after controller unpublish", func(e *env) error {
			return seq(
				func() error { return e.publish("node-a") },
				func() error { return e.stage(e.a, "node-a") },
				func() error { return e.unstage(e.a, "node-a") },
				func() error {
					_, err := e.c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: e.vol, NodeId: "node-a"})
					return err
				},
				func() error { return e.stage(e.a, "node-a") })
		}, codes.FailedPrecondition},
		{"node publish before stage", func(e *env) error {
			return seq(func() error { return e.publish("node-a") }, func() error { return e.nodePublish(e.a, "node-a") })
		}, codes.FailedPrecondition},
		{"full node lifecycle, every step twice", func(e *env) error {
			var steps []func() error
			for _, s := range []func() error{
				func() error { return e.publish("node-a") },
				func() error { return e.stage(e.a, "node-a") },
				func() error { return e.nodePublish(e.a, "node-a") },
				func() error { return e.nodeUnpublish(e.a, "node-a") },
				func() error { return e.unstage(e.a, "node-a") },
			} {
				steps = append(steps, s, s)
			}
			return seq(steps...)
		}, codes.OK},
		{"unstage and node unpublish of what was never done", func(e *env) error {
			return seq(func() error { return e.unstage(e.a, "node-a") }, func() error { return e.nodeUnpublish(e.a, "node-a") })
		}, codes.OK},
		{"node stage of unknown volume", func(e *env) error {
			e.vol = "vol-unknown"
			return e.stage(e.a, "node-a")
		}, codes.NotFound},
		{"node stage of invalid volume ID", func(e *env) error {
			e.vol = "../../etc"
			return e.stage(e.a, "node-a")
		}, codes.NotFound},
		{"node stage without capability", func(e *env) error {
			_, err := e.a.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: e.vol, StagingTargetPath: e.staging("node-a")})
			return err
		}, codes.InvalidArgument},

		// ControllerPublishVolume.
		{"controller publish twice to the same node", func(e *env) error {
			r1, err := e.c.ControllerPublishVolume(ctx, pubReq(e.vol, "node-a", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, false))
			if err != nil {
				return err
			}
			r2, err := e.c.ControllerPublishVolume(ctx, pubReq(e.vol, "node-a", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, false))
			if err != nil {
				return err
			}
			if !maps.Equal(r1.GetPublishContext(), r2.GetPublishContext()) || r1.GetPublishContext()[PublishContextNode] != "node-a" {
				return fmt.Errorf("publish contexts %v and %v", r1.GetPublishContext(), r2.GetPublishContext())
			}
			return nil
		}, codes.OK},
		{"controller publish to the same node with different readonly", func(e *env) error {
			return seq(func() error { return e.publish("node-a") }, func() error {
				_, err := e.c.ControllerPublishVolume(ctx, pubReq(e.vol, "node-a", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, true))
				return err
			})
		}, codes.AlreadyExists},
		{"controller publish single-node volume to a second node", func(e *env) error {
			return seq(func() error { return e.publish("node-a") }, func() error { return e.publish("node-b") })
		}, codes.FailedPrecondition},
		{"controller publish multi-node volume to a second node", func(e *env) error {
			for _, n := range []string{"node-a", "node-b"} {
				if _, err := e.c.ControllerPublishVolume(ctx, pubReq(e.vol, n, mnmw, false)); err != nil {
					return err
				}
			}
			return nil
		}, codes.OK},
		{"controller publish of unknown volume", func(e *env) error {
			e.vol = "vol-unknown"
			return e.publish("node-a")
		}, codes.NotFound},
		{"controller publish to unknown node", func(e *env) error { return e.publish("node-z") }, codes.NotFound},
		{"controller publish of block volume", func(e *env) error {
			_, err := e.c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: e.vol, NodeId: "node-a",
				VolumeCapability: &csi.VolumeCapability{
					AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
					AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
				}})
			return err
		}, codes.InvalidArgument},
		{"controller unpublish of a volume not published", func(e *env) error {
			_, err := e.c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: e.vol, NodeId: "node-a"})
			return err
		}, codes.OK},
		{"controller unpublish of unknown volume", func(e *env) error {
			_, err := e.c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-unknown", NodeId: "node-a"})
			return err
		}, codes.OK},

		// CreateVolume and DeleteVolume.
		{"create with same name and size", func(e *env) error {
			rsp, err := e.c.CreateVolume(ctx, createReq("pvc-1", 1<<20, nil))
			if err == nil && rsp.GetVolume().GetVolumeId() != e.vol {
				return fmt.Errorf("got volume %s, want %s", rsp.GetVolume().GetVolumeId(), e.vol)
			}
			return err
		}, codes.OK},
		{"create with same name and different size", func(e *env) error {
			_, err := e.c.CreateVolume(ctx, createReq("pvc-1", 2<<20, nil))
			return err
		}, codes.AlreadyExists},
		{"create with same name and different parameters", func(e *env) error {
			_, err := e.c.CreateVolume(ctx, createReq("pvc-1", 1<<20, map[string]string{"k": "v"}))
			return err
		}, codes.AlreadyExists},
		{"create with unsupported access mode", func(e *env) error {
			_, err := e.c.CreateVolume(ctx, createReq("pvc-2", 1<<20, nil, volCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER)))
			return err
		}, codes.InvalidArgument},
		{"create with required above limit", func(e *env) error {
			req := createReq("pvc-2", 2<<20, nil)
			req.CapacityRange.LimitBytes = 1 << 20
			_, err := e.c.CreateVolume(ctx, req)
			return err
		}, codes.InvalidArgument},
		{"delete of unknown volume", func(e *env) error {
			_, err := e.c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-unknown"})
			return err
		}, codes.OK},
		{"delete of invalid volume ID", func(e *env) error {
			_, err := e.c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "../state"})
			return err
		}, codes.OK},
		{"delete of a published volume", func(e *env) error {
			return seq(func() error { return e.publish("node-a") }, func() error {
				_, err := e.c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: e.vol})
				return err
			})
		}, codes.FailedPrecondition},
		{"delete twice", func(e *env) error {
			for range 2 {
				if _, err := e.c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: e.vol}); err != nil {
					return err
				}
			}
			return nil
		}, codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run(newEnv(t))
			if got := status.Code(err); got != tt.want {
				t.Errorf("got %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}

// TestNodeFiles checks what staging and publishing leave on disk and in the
// volume state, and that undoing them removes it again.
func TestNodeFiles(t *testing.T) {
	e := newEnv(t)
	if err := seq(
		func() error { return e.publish("node-a") },
		func() error { return e.stage(e.a, "node-a") },
		func() error { return e.nodePublish(e.a, "node-a") },
	); err != nil {
		t.Fatal(err)
	}
	marker, err := os.ReadFile(filepath.Join(e.staging("node-a"), StageMarker))
	if err != nil || strings.TrimSpace(string(marker)) != e.vol {
		t.Errorf("stage marker = %q, %v; want %s", marker, err, e.vol)
	}
	dest, err := os.Readlink(e.target("node-a"))
	if want := filepath.Join(e.state, "volumes", e.vol); err != nil || dest != want {
		t.Errorf("target symlink = %q, %v; want %s", dest, err, want)
	}
	// Data written through the target lands in the volume.
	if err := os.WriteFile(filepath.Join(e.target("node-a"), "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	v := loadOne(t, e.state)
	if !slices.Equal(v.PublishedNodes(), []string{"node-a"}) {
		t.Errorf("published nodes = %v", v.PublishedNodes())
	}
	u := v.Nodes["node-a"]
	if u == nil || u.StagingPath != e.staging("node-a") || len(u.Targets) != 1 {
		t.Errorf("node usage = %+v", u)
	}

	if err := seq(
		func() error { return e.nodeUnpublish(e.a, "node-a") },
		func() error { return e.unstage(e.a, "node-a") },
	); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(e.target("node-a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target still exists: %v", err)
	}
	if entries, _ := os.ReadDir(e.staging("node-a")); len(entries) != 0 {
		t.Errorf("staging dir not empty: %v", entries)
	}
	if v := loadOne(t, e.state); len(v.Nodes) != 0 || len(v.Published) != 1 {
		t.Errorf("state after unstage: %+v", v)
	}
	if _, err := os.Stat(filepath.Join(e.state, "volumes", e.vol, "f")); err != nil {
		t.Errorf("volume data lost: %v", err)
	}
}

func loadOne(t *testing.T, state string) VolumeState {
	t.Helper()
	vols, err := LoadVolumeStates(state)
	if err != nil || len(vols) != 1 {
		t.Fatalf("LoadVolumeStates = %+v, %v; want one volume", vols, err)
	}
	return vols[0]
}

// TestSharedState checks that instances on one state dir act as one driver,
// including one started after the state was written (a restart).
func TestSharedState(t *testing.T) {
	state := t.TempDir()
	c1 := newTestDriver(t, state, ModeController, "").ControllerServer()
	c2 := newTestDriver(t, state, ModeController, "").ControllerServer()
	newTestDriver(t, state, ModeNode, "node-a")

	r1, err := c1.CreateVolume(ctx, createReq("pvc-1", 1<<20, nil))
	if err != nil {
		t.Fatal(err)
	}
	vol := r1.GetVolume().GetVolumeId()
	r2, err := c2.CreateVolume(ctx, createReq("pvc-1", 1<<20, nil))
	if err != nil || r2.GetVolume().GetVolumeId() != vol {
		t.Fatalf("second instance CreateVolume = %v, %v; want volume %s", r2, err, vol)
	}
	if _, err := c1.ControllerPublishVolume(ctx, pubReq(vol, "node-a", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, false)); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("delete of volume published by the other instance: %v", err)
	}
	n := newTestDriver(t, state, ModeNode, "node-a").NodeServer()
	if _, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: filepath.Join(t.TempDir(), "s"), VolumeCapability: snw}); err != nil {
		t.Fatalf("restarted node instance cannot stage: %v", err)
	}
}

// TestConcurrentPublish attaches one multi-node volume to many nodes at once
// through two controller instances; a lost update would drop a node.
func TestConcurrentPublish(t *testing.T) {
	state := t.TempDir()
	cs := []csi.ControllerServer{
		newTestDriver(t, state, ModeController, "").ControllerServer(),
		newTestDriver(t, state, ModeController, "").ControllerServer(),
	}
	mnmw := csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	rsp, err := cs[0].CreateVolume(ctx, createReq("shared", 1<<20, nil, volCap(mnmw)))
	if err != nil {
		t.Fatal(err)
	}
	vol := rsp.GetVolume().GetVolumeId()
	var nodes []string
	for i := range 16 {
		nodes = append(nodes, fmt.Sprintf("node-%02d", i))
		newTestDriver(t, state, ModeNode, nodes[i])
	}

	run := func(op func(c csi.ControllerServer, node string) error) {
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := op(cs[i%2], n); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	run(func(c csi.ControllerServer, n string) error {
		_, err := c.ControllerPublishVolume(ctx, pubReq(vol, n, mnmw, false))
		return err
	})
	if got := loadOne(t, state).PublishedNodes(); !slices.Equal(got, nodes) {
		t.Errorf("published nodes = %v, want %v", got, nodes)
	}
	run(func(c csi.ControllerServer, n string) error {
		_, err := c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: n})
		return err
	})
	if got := loadOne(t, state).PublishedNodes(); len(got) != 0 {
		t.Errorf("published nodes after unpublish = %v", got)
	}
}

func TestNewDriverValidation(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{NodeID: "n1", StateDir: dir}, true},
		{"controller without node ID", Config{Mode: ModeController, StateDir: dir}, true},
		{"node without node ID", Config{Mode: ModeNode, StateDir: dir}, false},
		{"both without node ID", Config{StateDir: dir}, false},
		{"node ID with slash", Config{NodeID: "a/b", StateDir: dir}, false},
		{"no state dir", Config{NodeID: "n1"}, false},
		{"bad mode", Config{Mode: "all", NodeID: "n1", StateDir: dir}, false},
		{"bad name", Config{Name: "-x", NodeID: "n1", StateDir: dir}, false},
		{"bind publish mode", Config{NodeID: "n1", StateDir: dir, PublishMode: PublishBind}, true},
		{"bad publish mode", Config{NodeID: "n1", StateDir: dir, PublishMode: "copy"}, false},
		{"registration", Config{NodeID: "n1", StateDir: dir, RegistrationDir: dir, KubeletRegistrationPath: "/var/lib/kubelet/plugins/x/csi.sock"}, true},
		{"registration in controller mode", Config{Mode: ModeController, StateDir: dir, RegistrationDir: dir}, false},
		{"kubelet path without registration", Config{NodeID: "n1", StateDir: dir, KubeletRegistrationPath: "/x/csi.sock"}, false},
		{"relative kubelet path", Config{NodeID: "n1", StateDir: dir, RegistrationDir: dir, KubeletRegistrationPath: "x/csi.sock"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewDriver(tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("NewDriver(%+v) error = %v, want ok=%v", tt.cfg, err, tt.ok)
			}
			if err == nil && (d.Config().Name != DefaultName || d.Config().Mode == "" || d.Config().PublishMode == "") {
				t.Errorf("defaults not applied: %+v", d.Config())
			}
		})
	}
}

// TestRun checks that Run replaces a stale socket, serves, and removes the
// socket when its context ends.
func TestRun(t *testing.T) {
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "csi.sock")
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()

	d := newTestDriver(t, t.TempDir(), ModeNode, "n1")
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx, "unix://"+sock) }()

	// Short reconnect backoff: the first attempt may precede Listen.
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond}}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// WaitForReady rides out the moment before Run listens; the timeout only
	// bounds a failure.
	callCtx, callCancel := context.WithTimeout(ctx, time.Minute)
	defer callCancel()
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(callCtx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
	if err != nil || info.GetName() != DefaultName || info.GetVendorVersion() != VendorVersion {
		t.Fatalf("GetPluginInfo = %v, %v", info, err)
	}
	// A node-mode instance does not serve the controller service.
	_, err = csi.NewControllerClient(conn).ControllerGetCapabilities(callCtx, &csi.ControllerGetCapabilitiesRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("ControllerGetCapabilities on node instance: %v", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket not removed: %v", err)
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen("unix://" + path); err == nil {
		t.Fatal("Listen replaced a regular file")
	}
	if _, err := Listen("tcp://127.0.0.1:0"); err == nil {
		t.Fatal("Listen accepted a tcp endpoint")
	}
}
