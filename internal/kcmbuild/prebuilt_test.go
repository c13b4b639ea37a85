package kcmbuild

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/process"
	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/upstream"
)

// In prebuilt mode (the strandlab image: no go command) Build finds stock
// and the controller builds that were put into the image, and refuses, naming
// it, a build that was not; nothing runs the go command (PATH is empty).
func TestBuildPrebuilt(t *testing.T) {
	bins := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "csi-attacher", "csi-provisioner",
		"kubelet-sim", "csi-driver", "pin-extender", "apiproxy"} {
		if err := os.WriteFile(filepath.Join(bins, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeTree(t, bins, map[string]string{"versions.txt": "etcd=v3.7.0\nkube-controller-manager=v1.37.2\n"})
	root := t.TempDir()
	writeTree(t, filepath.Join(root, BuildsDir), map[string]string{
		"fix/patch.diff":   "--- a/x\n+++ b/x\n",
		"other/patch.diff": "--- a/y\n+++ b/y\n",
	})
	fix, err := Lookup(root, "fix")
	if err != nil {
		t.Fatal(err)
	}
	sha, err := fix.SHA256()
	if err != nil {
		t.Fatal(err)
	}
	fixBinary := CachePath(root, "v1.37.2", sha)
	writeTree(t, filepath.Dir(fixBinary), map[string]string{"kube-controller-manager": ""})
	if err := os.Chmod(fixBinary, 0o755); err != nil {
		t.Fatal(err)
	}

	t.Setenv("PATH", "")
	t.Setenv(process.UnitOnlyEnv, "1")
	t.Setenv(upstream.PrebuiltEnv, "1")
	t.Setenv(upstream.BinDirEnv, bins)
	ctx := context.Background()
	module := "k8s.io/kubernetes@v1.37.2"

	stock, err := Build(ctx, root, Stock, io.Discard)
	if err != nil {
		t.Fatalf("Build(stock): %v", err)
	}
	if want := (Result{Binary: filepath.Join(bins, "kube-controller-manager"), Provenance: provenance.ControllerBuild{Module: module}, Cached: true}); stock != want {
		t.Errorf("Build(stock) = %+v, want %+v", stock, want)
	}
	got, err := Build(ctx, root, "fix", io.Discard)
	if err != nil {
		t.Fatalf("Build(fix): %v", err)
	}
	if want := (Result{Binary: fixBinary, Provenance: provenance.ControllerBuild{Module: module, Patch: "fix", PatchSHA256: sha}, Cached: true}); got != want {
		t.Errorf("Build(fix) = %+v, want %+v", got, want)
	}
	if _, err := Build(ctx, root, "other", io.Discard); err == nil || !strings.Contains(err.Error(), "controller build other (patch ") ||
		!strings.Contains(err.Error(), "is not prebuilt here") {
		t.Errorf("Build(other) error %v, want it to say other is not prebuilt", err)
	}
	if p, ok, err := Cached(ctx, root, fix); err != nil || !ok || p != fixBinary {
		t.Errorf("Cached(fix) = %q, %v, %v; want %q, true", p, ok, err, fixBinary)
	}
	if err := Test(ctx, root, "fix", io.Discard); err == nil || !strings.Contains(err.Error(), "needs the go command") {
		t.Errorf("Test(fix) error %v, want a refusal", err)
	}

	// A prebuilt directory without the controller's version is an error
	// that says so, not a go command.
	writeTree(t, bins, map[string]string{"versions.txt": "etcd=v3.7.0\n"})
	if _, err := Build(ctx, root, "fix", io.Discard); err == nil || !strings.Contains(err.Error(), "versions.txt gives no version of kube-controller-manager") {
		t.Errorf("Build(fix) without a version: %v", err)
	}
	// Stock needs every binary of a local cluster: the missing one is named.
	writeTree(t, bins, map[string]string{"versions.txt": "kube-controller-manager=v1.37.2\n"})
	if err := os.Remove(filepath.Join(bins, "pin-extender")); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(ctx, root, Stock, io.Discard); err == nil || !strings.Contains(err.Error(), "pin-extender is missing") {
		t.Errorf("Build(stock) without pin-extender: %v", err)
	}
}
