package kind

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// kindCLI runs kind's command line program (built by Prepare from the
// sigs.k8s.io/kind module go.mod pins) as a child process, with kind's
// settings in that child's environment alone. kind's library reads them
// from the process environment only — its Docker network
// (KIND_EXPERIMENTAL_DOCKER_NETWORK, read by the docker provider's
// Provision), the containerd snapshotter it passes to its nodes, and
// `docker` looked up in PATH (its exec package's DefaultCmder has no other
// seam), which must find the unprivileged docker front first on hosts
// where `--privileged` cannot work, since every node command is a `docker
// exec --privileged`. So what runs commands in the nodes (create, loading
// images, exporting logs) runs here; in-process, strandlab uses only the
// parts of kind's library that need neither (listing and deleting nodes).
type kindCLI struct {
	path string
	// env is added to the child's environment (environment).
	env []string
	// progress receives kind's output a line at a time (nil: discarded).
	progress io.Writer
}

// environment is what kind is told through its environment; path is the
// PATH the child would otherwise inherit, front the docker front's
// directory ("" where --privileged works) and realDocker the docker client
// the front runs.
func environment(path, front, realDocker string) []string {
	env := []string{
		"KIND_EXPERIMENTAL_PROVIDER=docker",
		"KIND_EXPERIMENTAL_DOCKER_NETWORK=" + networkName,
		// kind's node entrypoint picks the fuse-overlayfs snapshotter when
		// the node's root is a FUSE mount (Docker's fuse-overlayfs storage
		// driver) and stops for want of it; overlayfs works everywhere kind
		// runs, since the node's /var (containerd's store) is a volume.
		// kind passes this variable on to its nodes.
		"KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=overlayfs",
	}
	if front != "" {
		env = append(env, "STRANDLAB_REAL_DOCKER="+realDocker, "PATH="+front+string(os.PathListSeparator)+path)
	}
	return env
}

// command is `kind args...` with kind's environment.
func (k kindCLI) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.path, args...)
	cmd.Env = append(os.Environ(), k.env...)
	return cmd
}

// run runs `kind args...`; a failure carries the lines of kind's output
// that say what failed (kubeadm's, when a node command failed).
func (k kindCLI) run(ctx context.Context, args ...string) error {
	var output bytes.Buffer
	cmd := k.command(ctx, args...)
	lines := &progressLines{w: k.progress}
	cmd.Stdout = io.MultiWriter(&output, lines)
	cmd.Stderr = cmd.Stdout
	err := cmd.Run()
	lines.flush()
	if err != nil {
		return fmt.Errorf("kind %s: %w; kind said:\n%s", strings.Join(args[:min(2, len(args))], " "), err, failureLines(output.String(), 12))
	}
	return nil
}

// progressLines writes kind's output to w a line at a time, as kind's
// user-facing lines (">> kind: ...").
type progressLines struct {
	w       io.Writer
	partial []byte
}

func (l *progressLines) Write(b []byte) (int, error) {
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		l.line(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
}

func (l *progressLines) flush() {
	if len(l.partial) > 0 {
		l.line(string(l.partial))
		l.partial = nil
	}
}

// line passes one line on, less kind's usage hints and salutation after a
// create (the library's CreateWithDisplayUsage and
// CreateWithDisplaySalutation, which its CLI always shows): they name
// kubectl contexts strandlab does not use.
func (l *progressLines) line(s string) {
	for _, hint := range []string{"Set kubectl context to", "You can now use your cluster with", "kubectl cluster-info --context",
		"Have a question, bug, or feature request?", "Thanks for using kind!", "Not sure what to do next?", "Check out https://kind.sigs.k8s.io/docs/user/quick-start/"} {
		if strings.Contains(s, hint) {
			return
		}
	}
	newKindLogger(l.w).V(0).Info(s)
}

// dockerExec runs a command in a node container. A plain `docker exec`
// (not kind's `--privileged` one) is enough to read and write the node's
// files, and runs on any host.
func dockerExec(ctx context.Context, node string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "docker", append([]string{"exec", "-i", node}, args...)...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("docker exec %s %s: %w: %s", node, strings.Join(args, " "), err, firstLine(stderr.String()))
	}
	return stdout.Bytes(), nil
}
