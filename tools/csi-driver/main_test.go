package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// runAsMainEnv makes the test binary act as the command, so the signal
// handling of main itself can be tested in a child process.
const runAsMainEnv = "STRANDLAB_CSI_DRIVER_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsMainEnv) != "" {
		os.Args = append([]string{"csi-driver"}, strings.Fields(os.Getenv(runAsMainEnv))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestFlagErrors(t *testing.T) {
	state := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined: -bogus"},
		{"bad mode", []string{"--mode", "all", "--state-dir", state, "--nodeid", "n1"}, `invalid mode "all"`},
		{"no state dir", []string{"--nodeid", "n1"}, "--state-dir is required"},
		{"no node ID in node mode", []string{"--mode", "node", "--state-dir", state}, "--nodeid is required in node mode"},
		{"no node ID in both mode", []string{"--state-dir", state}, "--nodeid is required in both mode"},
		{"positional argument", []string{"--state-dir", state, "--nodeid", "n1", "extra"}, "unexpected arguments"},
		{"bad verbosity", []string{"-v", "x"}, `invalid value "x" for flag -v`},
		{"csi-errors not JSON", []string{"--state-dir", state, "--nodeid", "n1", "--csi-errors", "call: NodeStageVolume"}, "--csi-errors: invalid character"},
		{"csi-errors unknown field", []string{"--state-dir", state, "--nodeid", "n1", "--csi-errors", `[{"call":"NodeStageVolume","code":"INTERNAL","nth":1,"node":"x"}]`}, `--csi-errors: json: unknown field "node"`},
		{"csi-errors bad code", []string{"--state-dir", state, "--nodeid", "n1", "--csi-errors", `[{"call":"NodeStageVolume","code":"Internal","nth":1}]`}, `--csi-errors: csiErrors[0].code: "Internal" is not one of`},
		{"bad publish mode", []string{"--state-dir", state, "--nodeid", "n1", "--publish-mode", "copy"}, `--publish-mode: invalid publish mode "copy"`},
		{"node flags in controller mode", []string{"--mode", "controller", "--state-dir", state, "--publish-mode", "symlink", "--registration-dir", state},
			"--publish-mode, --registration-dir: only in node or both mode"},
		{"kubelet path without registration dir", []string{"--state-dir", state, "--nodeid", "n1", "--kubelet-registration-path", "/x/csi.sock"},
			"--kubelet-registration-path needs --registration-dir"},
		{"relative kubelet path", []string{"--state-dir", state, "--nodeid", "n1", "--registration-dir", state, "--kubelet-registration-path", "x/csi.sock"},
			`--kubelet-registration-path "x/csi.sock": must be an absolute path`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stderr)
			if !errors.Is(err, errUsage) {
				t.Fatalf("run(%v) = %v, want a usage error", tt.args, err)
			}
			if !strings.Contains(stderr.String(), tt.want) || !strings.Contains(stderr.String(), "Usage: csi-driver") {
				t.Errorf("stderr %q does not contain %q and the usage", stderr.String(), tt.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run(-h) = %v", err)
	}
	for _, f := range []string{"-endpoint", "-drivername", "-nodeid", "-state-dir", "-mode", "-publish-mode", "-registration-dir", "-kubelet-registration-path", "-csi-errors", "-fault-seed", "-v value"} {
		if !strings.Contains(stderr.String(), f) {
			t.Errorf("help does not list %s:\n%s", f, stderr.String())
		}
	}
}

func shortSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "csi.sock")
}

// probe calls Probe, waiting for the server to come up; the timeout only
// bounds a failure.
func probe(t *testing.T, sock string) {
	t.Helper()
	// A short reconnect backoff: the first attempt may come before the
	// server listens, and the default backoff would wait a second.
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond}}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("Probe: %v", err)
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	sock := shortSocket(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--mode", "controller", "--endpoint", "unix://" + sock, "--state-dir", t.TempDir()}, os.Stderr)
	}()
	probe(t, sock)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket not removed: %v", err)
	}
}

func TestSIGTERM(t *testing.T) {
	sock := shortSocket(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runAsMainEnv+"=--nodeid n1 --endpoint unix://"+sock+" --state-dir "+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A Probe answer means main is past signal.NotifyContext.
	probe(t, sock)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("csi-driver did not exit cleanly on SIGTERM: %v\n%s", err, out.String())
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket not removed: %v", err)
	}
}

// TestRegistrationFlags checks that --registration-dir and
// --kubelet-registration-path reach the registration service, and that the
// kubelet's refusal ends run with its message.
func TestRegistrationFlags(t *testing.T) {
	sock := shortSocket(t)
	regDir := filepath.Join(filepath.Dir(sock), "registry")
	const kubeletSock = "/var/lib/kubelet/plugins/strandlab.example.com/csi.sock"
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"--mode", "node", "--nodeid", "n1", "--drivername", "strandlab.example.com",
			"--endpoint", "unix://" + sock, "--state-dir", t.TempDir(), "--publish-mode", "bind",
			"--registration-dir", regDir, "--kubelet-registration-path", kubeletSock}, os.Stderr)
	}()
	conn, err := grpc.NewClient("unix://"+filepath.Join(regDir, "strandlab.example.com-reg.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond}}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := registerapi.NewRegistrationClient(conn)
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{}, grpc.WaitForReady(true))
	if err != nil || info.GetName() != "strandlab.example.com" || info.GetEndpoint() != kubeletSock {
		t.Fatalf("GetInfo = %v, %v; want name strandlab.example.com, endpoint %s", info, err, kubeletSock)
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{Error: "no such node"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no such node") {
			t.Errorf("run = %v, want the kubelet's error", err)
		}
	case <-ctx.Done():
		t.Fatal("run did not return after the kubelet's refusal")
	}
}
