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
