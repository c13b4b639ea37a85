package kindrun

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vladimirvivien/gexe"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/report"
)

// TestCtrlCDuringKindCreate interrupts `strandlab run --provider kind` while
// kind creates the nodes (kind's create takes no context, so the run waits
// for it and then deletes the cluster): exit 130, a report interrupted
// during "cluster start", and none of the run's containers left.
func TestCtrlCDuringKindCreate(t *testing.T) {
	root := suite.RepoRoot(t)
	bin := filepath.Join(t.TempDir(), "strandlab")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "tools/strandlab")).CombinedOutput(); err != nil {
		t.Fatalf("build strandlab: %v\n%s", err, out)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--provider", "kind", "--scenario", "scenarios/smoke.yaml", "--cycles", "1", "--output", out)
	cmd.Dir = root
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	interrupted := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if !interrupted && strings.Contains(sc.Text(), "Preparing nodes") {
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			interrupted = true
		}
	}
	err = cmd.Wait()
	if !interrupted {
		t.Fatalf("kind never started preparing nodes:\n%s", tail(log.String(), 30))
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d (%v), want 130:\n%s", code, err, tail(log.String(), 30))
	}
	rep, err := report.Read(strings.TrimSpace(stdout.String()))
	if err != nil {
		t.Fatalf("report: %v (stdout %q)", err, stdout.String())
	}
	if !rep.Interrupted || rep.Complete || rep.InterruptedDuring != "cluster start" {
		t.Errorf("report: interrupted %t complete %t during %q, want interrupted during cluster start", rep.Interrupted, rep.Complete, rep.InterruptedDuring)
	}
	if left := strings.TrimSpace(gexe.Run("docker ps -a --filter label=io.x-k8s.kind.cluster --format {{.Names}}")); strings.Contains(left, "sl-smoke-stock-") {
		t.Errorf("the interrupted run's nodes are left: %s", left)
	}
}
