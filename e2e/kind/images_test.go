package kind

import (
	"github.com/strandlab/strandlab/e2e/suite"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImagesAnswerHelp runs every program of every image strandlab builds
// for kind with --help: a binary that does not start in its image (a
// dynamic binary in a FROM-scratch image, a missing file) fails here rather
// than as a pod that never runs.
func TestImagesAnswerHelp(t *testing.T) {
	root := suite.RepoRoot(t)
	out, err := exec.Command("bash", filepath.Join(root, "tools/images/build.sh"), filepath.Join(root, "_output")).Output()
	if err != nil {
		t.Fatalf("tools/images/build.sh: %v", err)
	}
	type run struct{ image, entrypoint string }
	var runs []run
	for _, line := range strings.Fields(string(out)) {
		if _, tag, ok := strings.Cut(line, "="); ok {
			runs = append(runs, run{image: tag})
		}
	}
	if len(runs) != 5 {
		t.Fatalf("tools/images/build.sh built %d images, want 5: %s", len(runs), out)
	}
	node := s.ClusterProvider.(interface{ NodeImageTag() string }).NodeImageTag()
	for _, bin := range []string{"/usr/bin/kubelet", "/usr/bin/kubeadm", "/usr/bin/kubectl", "/usr/local/bin/crictl"} {
		runs = append(runs, run{image: node, entrypoint: bin})
	}
	for _, r := range runs {
		args := []string{"run", "--rm", "--network=none"}
		if r.entrypoint != "" {
			args = append(args, "--entrypoint", r.entrypoint)
		}
		args = append(args, r.image, "--help")
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil || !strings.Contains(strings.ToLower(string(out)), "usage") {
			t.Errorf("docker %s: %v\n%s", strings.Join(args, " "), err, firstLines(string(out), 5))
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
