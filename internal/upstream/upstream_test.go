package upstream

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/process"
)

// Under make unit, Ensure must refuse before it runs any build. A stand-in
// tools/upstream/build.sh leaves a marker when it runs; Ensure runs it
// synchronously, so the marker shows whether the build went ahead.
func TestEnsureRefusedUnderMakeUnit(t *testing.T) {
	tests := []struct {
		env       string
		wantErr   string
		wantBuilt bool
	}{
		{"1", "STRANDLAB_UNIT_ONLY is set (make unit): building the cluster binaries (upstream.Ensure) is not allowed", false},
		// Allowed: the stand-in build runs, then Ensure fails on its empty output dir.
		{"", "missing or not executable", true},
	}
	for _, tc := range tests {
		t.Run("STRANDLAB_UNIT_ONLY="+tc.env, func(t *testing.T) {
			t.Setenv(process.UnitOnlyEnv, tc.env)
			t.Setenv(BinDirEnv, "") // use build.sh, not prebuilt binaries
			root := t.TempDir()
			marker := filepath.Join(root, "built")
			script := "#!/bin/bash\ntouch " + marker + "\nmkdir -p \"$1\"\necho \"$1\"\n"
			if err := os.MkdirAll(filepath.Join(root, "tools/upstream"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "tools/upstream/build.sh"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			_, err := Ensure(context.Background(), root, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Ensure error %v, want it to contain %q", err, tc.wantErr)
			}
			if _, statErr := os.Stat(marker); (statErr == nil) != tc.wantBuilt {
				t.Errorf("build.sh ran: %v, want %v", statErr == nil, tc.wantBuilt)
			}
		})
	}
}

// prebuiltDir writes a directory as the strandlab image holds it: every
// binary of a local cluster (stand-ins here) and versions.txt.
func prebuiltDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range layout(dir).paths() {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "versions.txt"), []byte("etcd=v3.7.0\nkube-controller-manager=v1.37.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// In prebuilt mode Ensure builds nothing and runs no go command (PATH is
// empty, and make unit's refusal does not apply: nothing is built); it
// returns the directory's binaries, or names the one that is missing.
func TestEnsurePrebuilt(t *testing.T) {
	t.Setenv("PATH", "")
	t.Setenv(process.UnitOnlyEnv, "1")
	t.Setenv(PrebuiltEnv, "1")
	root := t.TempDir() // no tools/upstream/build.sh: a build would fail
	for _, missing := range []string{"", "kubelet-sim", "apiproxy", "etcd"} {
		t.Run("missing="+missing, func(t *testing.T) {
			dir := prebuiltDir(t)
			t.Setenv(BinDirEnv, dir)
			if missing != "" {
				if err := os.Remove(filepath.Join(dir, missing)); err != nil {
					t.Fatal(err)
				}
			}
			b, err := Ensure(context.Background(), root, io.Discard)
			prebuilt, checkErr := CheckPrebuilt()
			if !prebuilt {
				t.Errorf("CheckPrebuilt says the prebuilt mode is off")
			}
			if missing == "" {
				if err != nil || checkErr != nil {
					t.Fatalf("Ensure: %v; CheckPrebuilt: %v", err, checkErr)
				}
				if b.KubeletSim != filepath.Join(dir, "kubelet-sim") || b.Versions["kube-controller-manager"] != "v1.37.2" {
					t.Errorf("Ensure = %+v", b)
				}
				return
			}
			want := "STRANDLAB_PREBUILT=1: " + missing + " is missing or not executable: STRANDLAB_BIN_DIR=" + dir
			for _, e := range []error{err, checkErr} {
				if e == nil || !strings.Contains(e.Error(), want) {
					t.Errorf("error %v, want it to contain %q", e, want)
				}
			}
		})
	}
}

func TestPrebuiltMode(t *testing.T) {
	for _, tc := range []struct {
		prebuilt, binDir string
		wantOK           bool
		wantErr          string
	}{
		{"", "/bins", false, ""},
		{"0", "/bins", false, ""},
		{"1", "/bins", true, ""},
		{"1", "", true, "STRANDLAB_PREBUILT=1: STRANDLAB_BIN_DIR is not set"},
		{"yes", "/bins", true, `STRANDLAB_PREBUILT="yes": want 1`},
	} {
		t.Setenv(PrebuiltEnv, tc.prebuilt)
		t.Setenv(BinDirEnv, tc.binDir)
		dir, ok, err := Prebuilt()
		if ok != tc.wantOK || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s=%q %s=%q: Prebuilt() = %q, %v, %v; want ok %v, error %q", PrebuiltEnv, tc.prebuilt, BinDirEnv, tc.binDir, dir, ok, err, tc.wantOK, tc.wantErr)
		}
		if tc.wantOK && tc.wantErr == "" && dir != tc.binDir {
			t.Errorf("Prebuilt() dir %q, want %q", dir, tc.binDir)
		}
	}
}
