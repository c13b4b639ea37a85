package csidriver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// dial connects to a unix socket with a short reconnect backoff: the first
// attempt may precede the server's Listen.
func dial(t *testing.T, sock string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// shortTempDir returns a temp dir short enough for unix socket paths (108
// bytes), which t.TempDir() may exceed.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestRegistration plays the kubelet's plugin watcher against Run: it finds
// the registration socket, asks GetInfo and reports the outcome.
func TestRegistration(t *testing.T) {
	const kubeletSock = "/var/lib/kubelet/plugins/hostpath.csi.k8s.io/csi.sock"
	tests := []struct {
		name        string
		kubeletPath string // Config.KubeletRegistrationPath
		registered  bool   // what NotifyRegistrationStatus reports
		kubeletErr  string
		wantErr     string // of Run; "" for a clean stop by cancel
	}{
		{name: "kubelet registers the driver", kubeletPath: kubeletSock, registered: true},
		{name: "endpoint defaults to the CSI socket", registered: true},
		{name: "kubelet refuses the driver", kubeletPath: kubeletSock, kubeletErr: "plugin name already registered", wantErr: "plugin name already registered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := shortTempDir(t)
			sock := filepath.Join(dir, "csi.sock")
			regDir := filepath.Join(dir, "registry")
			d, err := NewDriver(Config{Mode: ModeNode, NodeID: "n1", StateDir: t.TempDir(),
				RegistrationDir: regDir, KubeletRegistrationPath: tt.kubeletPath})
			if err != nil {
				t.Fatal(err)
			}
			regSock := d.RegistrationSocket()
			if want := filepath.Join(regDir, DefaultName+"-reg.sock"); regSock != want {
				t.Fatalf("RegistrationSocket() = %s, want %s", regSock, want)
			}
			// A socket left by an earlier instance must not stop this one.
			if err := os.MkdirAll(regDir, 0o755); err != nil {
				t.Fatal(err)
			}
			stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: regSock, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			stale.SetUnlinkOnClose(false)
			stale.Close()

			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			// The timeout only bounds a failure; calls waiting for the server
			// end as soon as Run returns.
			callCtx, callCancel := context.WithTimeout(ctx, time.Minute)
			defer callCancel()
			done := make(chan error, 1)
			go func() {
				done <- d.Run(runCtx, "unix://"+sock)
				callCancel()
			}()
			// returnedEarly reports an error of Run that ended a call.
			returnedEarly := func() error {
				select {
				case err := <-done:
					return fmt.Errorf("Run returned early: %v", err)
				default:
					return nil
				}
			}

			reg := registerapi.NewRegistrationClient(dial(t, regSock))
			info, err := reg.GetInfo(callCtx, &registerapi.InfoRequest{}, grpc.WaitForReady(true))
			if err != nil {
				t.Fatalf("GetInfo: %v %v", err, returnedEarly())
			}
			wantEndpoint := tt.kubeletPath
			if wantEndpoint == "" {
				wantEndpoint = sock
			}
			if info.GetType() != registerapi.CSIPlugin || info.GetName() != DefaultName ||
				info.GetEndpoint() != wantEndpoint || strings.Join(info.GetSupportedVersions(), ",") != "1.0.0" {
				t.Errorf("GetInfo = %v; want type %s, name %s, endpoint %s, versions [1.0.0]", info, registerapi.CSIPlugin, DefaultName, wantEndpoint)
			}
			// The kubelet calls NodeGetInfo on the endpoint before it reports.
			if _, err := csi.NewNodeClient(dial(t, sock)).NodeGetInfo(callCtx, &csi.NodeGetInfoRequest{}, grpc.WaitForReady(true)); err != nil {
				t.Fatalf("NodeGetInfo on the CSI endpoint: %v %v", err, returnedEarly())
			}
			if _, err := reg.NotifyRegistrationStatus(callCtx, &registerapi.RegistrationStatus{PluginRegistered: tt.registered, Error: tt.kubeletErr}); err != nil {
				t.Fatalf("NotifyRegistrationStatus: %v %v", err, returnedEarly())
			}
			if tt.registered {
				// A registered driver keeps serving until stopped.
				if _, err := reg.GetInfo(callCtx, &registerapi.InfoRequest{}); err != nil {
					t.Fatalf("GetInfo after registration: %v %v", err, returnedEarly())
				}
				if err := returnedEarly(); err != nil {
					t.Fatal(err)
				}
				cancel()
			}
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("Run did not return")
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Run = %v, want nil", err)
			case tt.wantErr != "" && (!errors.Is(err, ErrRegistrationFailed) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Run = %v, want ErrRegistrationFailed naming %q", err, tt.wantErr)
			}
			for _, p := range []string{regSock, sock} {
				if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("socket %s not removed: %v", p, err)
				}
			}
		})
	}
}

// TestNoRegistrationByDefault checks that without a registration directory
// Run serves the CSI socket and nothing else.
func TestNoRegistrationByDefault(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "csi.sock")
	d := newTestDriver(t, t.TempDir(), ModeNode, "n1")
	if d.RegistrationSocket() != "" {
		t.Errorf("RegistrationSocket() = %q without a registration dir", d.RegistrationSocket())
	}
	runCtx, cancel := context.WithCancel(ctx)
	callCtx, callCancel := context.WithTimeout(ctx, time.Minute)
	defer callCancel()
	done := make(chan error, 1)
	go func() {
		done <- d.Run(runCtx, "unix://"+sock)
		callCancel()
	}()
	if _, err := csi.NewIdentityClient(dial(t, sock)).Probe(callCtx, &csi.ProbeRequest{}, grpc.WaitForReady(true)); err != nil {
		select {
		case runErr := <-done:
			t.Fatalf("Probe: %v; Run returned: %v", err, runErr)
		default:
			t.Fatalf("Probe: %v", err)
		}
	}
	var files []string
	filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
		if p != dir {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 1 || files[0] != sock {
		t.Errorf("files in the endpoint's dir = %v, want only %s", files, sock)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
