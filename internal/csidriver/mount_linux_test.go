package csidriver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// requireMount skips the test unless this process can bind-mount: root with
// CAP_SYS_ADMIN, outside a sandbox that forbids mount(2).
func requireMount(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	for _, d := range []string{src, dst} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind publish mode not tested: this process cannot bind-mount (%v); run as root where mount(2) works", err)
	}
	if err := unix.Unmount(dst, 0); err != nil {
		t.Fatal(err)
	}
}

var mountinfoUnescape = strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)

// mountsAt counts the mounts whose mount point is path, from
// /proc/self/mountinfo, the kernel's own account (proc(5): field 5).
func mountsAt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && mountinfoUnescape.Replace(f[4]) == path {
			n++
		}
	}
	return n
}

// unmountAtEnd unmounts whatever a failed test left at path, before the
// temp dirs are removed (cleanups run last first) so that removing them
// cannot reach through a mount.
func unmountAtEnd(t *testing.T, path string) {
	t.Cleanup(func() {
		for i := 0; i < 8 && mountsAt(t, path) > 0; i++ {
			if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
}

// TestBindPublish checks NodePublishVolume and NodeUnpublishVolume in bind
// mode on real mounts.
func TestBindPublish(t *testing.T) {
	requireMount(t)
	mkdir := func(t *testing.T, path string) {
		if err := os.MkdirAll(path, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(t *testing.T, src, dst string) {
		mkdir(t, src)
		mkdir(t, dst)
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		readonly bool
		// prepare runs before NodePublishVolume, with the target path and the
		// volume's data directory.
		prepare       func(t *testing.T, target, data string)
		wantPublish   codes.Code
		wantUnpublish codes.Code // after a failed publish
	}{
		{name: "read-write"},
		{name: "read-only", readonly: true},
		{name: "target directory made by the CO", prepare: func(t *testing.T, target, _ string) { mkdir(t, target) }},
		{name: "data mounted read-write already but not recorded, publish read-only", readonly: true,
			prepare: func(t *testing.T, target, data string) { bind(t, data, target) }},
		{name: "target is a mount of another directory",
			prepare: func(t *testing.T, target, _ string) {
				bind(t, filepath.Join(filepath.Dir(target), "other"), target)
			},
			wantPublish: codes.FailedPrecondition, wantUnpublish: codes.FailedPrecondition},
		{name: "target is a file",
			prepare: func(t *testing.T, target, _ string) {
				mkdir(t, filepath.Dir(target))
				if err := os.WriteFile(target, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			wantPublish: codes.FailedPrecondition, wantUnpublish: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnvPublishing(t, PublishBind)
			target, data := e.target("node-a"), filepath.Join(e.state, "volumes", e.vol)
			unmountAtEnd(t, target)
			if err := seq(func() error { return e.publish("node-a") }, func() error { return e.stage(e.a, "node-a") }); err != nil {
				t.Fatal(err)
			}
			if tt.prepare != nil {
				tt.prepare(t, target, data)
			}
			mountsBefore := mountsAt(t, target)
			publish := func() error {
				_, err := e.a.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
					VolumeId: e.vol, StagingTargetPath: e.staging("node-a"), TargetPath: target, VolumeCapability: snw, Readonly: tt.readonly,
				})
				return err
			}
			if err := publish(); status.Code(err) != tt.wantPublish {
				t.Fatalf("NodePublishVolume: %v, want %v", err, tt.wantPublish)
			}
			if tt.wantPublish != codes.OK {
				if err := e.nodeUnpublish(e.a, "node-a"); status.Code(err) != tt.wantUnpublish {
					t.Errorf("NodeUnpublishVolume: %v, want %v", err, tt.wantUnpublish)
				}
				if n := mountsAt(t, target); n != mountsBefore {
					t.Errorf("%d mounts at the target, want the %d there before", n, mountsBefore)
				}
				return
			}
			// The target is the data directory: what one shows, the other has.
			checkContents := func(call string) {
				t.Helper()
				err := os.WriteFile(filepath.Join(target, "via-target"), []byte(call), 0o644)
				if tt.readonly {
					if !errors.Is(err, syscall.EROFS) {
						t.Errorf("after %s: write to read-only target: %v, want EROFS", call, err)
					}
				} else if err != nil {
					t.Fatal(err)
				} else if b, err := os.ReadFile(filepath.Join(data, "via-target")); err != nil || string(b) != call {
					t.Errorf("after %s: file written via the target, read from the data dir: %q, %v", call, b, err)
				}
				if err := os.WriteFile(filepath.Join(data, "via-data"), []byte(call), 0o644); err != nil {
					t.Fatal(err)
				}
				if b, err := os.ReadFile(filepath.Join(target, "via-data")); err != nil || string(b) != call {
					t.Errorf("after %s: file written to the data dir, read via the target: %q, %v", call, b, err)
				}
				if n := mountsAt(t, target); n != 1 {
					t.Errorf("after %s: %d mounts at the target, want 1", call, n)
				}
			}
			checkContents("first publish")
			// Idempotent: a second call succeeds and stacks no second mount.
			if err := publish(); err != nil {
				t.Fatalf("second NodePublishVolume: %v", err)
			}
			checkContents("second publish")
			if ro, ok := loadOne(t, e.state).Nodes["node-a"].Targets[target]; !ok || ro != tt.readonly {
				t.Errorf("state records target readonly=%v (recorded %v), want %v", ro, ok, tt.readonly)
			}

			for i := range 2 {
				if err := e.nodeUnpublish(e.a, "node-a"); err != nil {
					t.Fatalf("NodeUnpublishVolume #%d: %v", i+1, err)
				}
			}
			if n := mountsAt(t, target); n != 0 {
				t.Errorf("%d mounts left at the target", n)
			}
			if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("target not removed: %v", err)
			}
			if u := loadOne(t, e.state).Nodes["node-a"]; u == nil || len(u.Targets) != 0 {
				t.Errorf("node usage after unpublish = %+v, want staged with no targets", u)
			}
			if _, err := os.Stat(filepath.Join(data, "via-data")); err != nil {
				t.Errorf("volume data lost: %v", err)
			}
		})
	}
}

// TestSanityBind runs the sanity suite against a driver in bind publish
// mode, as deployed for real kubelets; it needs to be able to mount.
func TestSanityBind(t *testing.T) {
	// Before the child process: a skip there would fail the parent.
	requireMount(t)
	if rerunInChild(t) {
		return
	}
	d, err := NewDriver(Config{NodeID: "sanity-bind-node", StateDir: t.TempDir(), PublishMode: PublishBind})
	if err != nil {
		t.Fatal(err)
	}
	cfg := newSanityConfig(t)
	unmountAtEnd(t, cfg.TargetPath+"/target")
	cfg.Address = serve(t, d)
	runSanity(t, cfg)
	checkCleanAfterSanity(t, cfg, d.Config().StateDir)
}
