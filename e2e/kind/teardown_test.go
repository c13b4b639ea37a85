package kind

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vladimirvivien/gexe"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/kind"
	"github.com/strandlab/strandlab/internal/ownership"
)

// dockerState is what a kind cluster leaves in Docker: containers of
// strandlab's kind clusters and all volumes.
type dockerState struct{ containers, volumes []string }

func snapshot(t *testing.T) dockerState {
	t.Helper()
	lines := func(cmd string) []string {
		p := gexe.RunProc(cmd)
		if !p.IsSuccess() {
			t.Fatalf("%s: %s", cmd, p.Result())
		}
		out := strings.Fields(p.Result())
		slices.Sort(out)
		return out
	}
	return dockerState{
		containers: lines(`docker ps -a --filter label=io.x-k8s.kind.cluster --format {{.Names}}`),
		volumes:    lines(`docker volume ls -q`),
	}
}

// TestTeardown starts clusters of its own beside the suite's and checks that
// each way of ending one leaves Docker as it found it: a kept cluster
// survives Stop and `strandlab down` (kind.Down) removes it; a start that
// fails after the nodes exist removes them; a bad controller build path is
// refused before anything is created.
func TestTeardown(t *testing.T) {
	ctx := context.Background()
	provider := s.Starter
	before := snapshot(t)
	out := t.TempDir()

	t.Run("kept cluster, then down", func(t *testing.T) {
		c, err := provider.Start(ctx, cluster.Spec{Name: "teardown-keep", Nodes: 1, OutputDir: out, Keep: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if during := snapshot(t); len(during.containers) != len(before.containers)+2 {
			t.Errorf("after Stop of a kept cluster: containers %v, want the 2 nodes kept beside %v", during.containers, before.containers)
		}
		dir := c.(cluster.StateDirCluster).StateDir()
		// A directory holding a copy of its marker is not the cluster's:
		// the cluster does not mount it, so down refuses and deletes nothing.
		decoy := t.TempDir()
		marker, err := os.ReadFile(filepath.Join(dir, ownership.MarkerFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(decoy, ownership.MarkerFile), marker, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := kind.Down(ctx, decoy); err == nil || !strings.Contains(err.Error(), "does not mount it") {
			t.Errorf("down of a decoy directory = %v, want a refusal", err)
		}
		if during := snapshot(t); len(during.containers) != len(before.containers)+2 {
			t.Fatalf("down of a decoy directory removed nodes: %v", during.containers)
		}
		if err := kind.Down(ctx, dir); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("state dir %s left after down: %v", dir, err)
		}
		if after := snapshot(t); !slices.Equal(after.containers, before.containers) || !slices.Equal(after.volumes, before.volumes) {
			t.Errorf("after down: %+v, before: %+v", after, before)
		}
	})

	t.Run("start that fails after the nodes exist", func(t *testing.T) {
		p := *s.ClusterProvider.(*kind.Provider)
		p.StartTimeout = time.Millisecond // the nodes cannot be Ready by then
		impatient, err := p.Prepare(ctx)  // its images and tools are cached by now
		if err != nil {
			t.Fatal(err)
		}
		if _, err := impatient.Start(ctx, cluster.Spec{Name: "teardown-fail", Nodes: 1, OutputDir: out}); err == nil || !strings.Contains(err.Error(), "Ready") {
			t.Fatalf("Start = %v, want a failure waiting for Ready nodes", err)
		}
		if after := snapshot(t); !slices.Equal(after.containers, before.containers) || !slices.Equal(after.volumes, before.volumes) {
			t.Errorf("after a failed start: %+v, before: %+v", after, before)
		}
	})

	t.Run("bad controller build refused before anything starts", func(t *testing.T) {
		_, err := provider.Start(ctx, cluster.Spec{Name: "teardown-bad", Nodes: 1, OutputDir: out, ControllerManager: "/nonexistent/kube-controller-manager"})
		if err == nil || !strings.Contains(err.Error(), "/nonexistent/kube-controller-manager") {
			t.Fatalf("Start = %v, want an error naming the controller build", err)
		}
		if _, statErr := os.Stat("/nonexistent"); !os.IsNotExist(statErr) {
			t.Errorf("the bad path was created on the host")
		}
		if after := snapshot(t); !slices.Equal(after.containers, before.containers) {
			t.Errorf("after a refused start: containers %v, before %v", after.containers, before.containers)
		}
	})
}
