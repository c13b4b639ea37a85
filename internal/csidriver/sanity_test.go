package csidriver

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
)

// serve runs d on a fresh unix socket in a short temp dir (socket paths are
// limited to 108 bytes, t.TempDir() paths can be long) and returns the
// endpoint. The driver stops when the test ends.
func serve(t *testing.T, d *Driver) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "csi.sock")
	lis, err := Listen("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := d.Serve(ctx, lis); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		os.RemoveAll(dir)
	})
	return "unix://" + sock
}

func newSanityConfig(t *testing.T) sanity.TestConfig {
	cfg := sanity.NewTestConfig()
	work := t.TempDir()
	// Sanity creates and removes these itself; they must not exist yet.
	cfg.TargetPath = filepath.Join(work, "target")
	cfg.StagingPath = filepath.Join(work, "staging")
	cfg.IDGen = &sanity.DefaultIDGenerator{}
	return cfg
}

// suiteRan records that this process ran the sanity suite: Ginkgo allows one
// suite run per process (and refuses go test -count > 1), so further runs
// re-execute the test binary to get a fresh process.
var suiteRan bool

func runSanity(t *testing.T, cfg sanity.TestConfig) {
	suiteRan = true
	sanity.Test(t, cfg)
}

// rerunInChild runs the current test alone in a new process and reports
// whether it did so; the caller then returns.
func rerunInChild(t *testing.T) bool {
	if !suiteRan && flag.Lookup("test.count").Value.String() == "1" {
		return false
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sanity run in child process failed: %v\n%s", err, out)
	}
	text := ansi.ReplaceAllString(string(out), "")
	// Guard against the child passing without running the suite.
	if !strings.Contains(text, "SUCCESS!") {
		t.Fatalf("sanity run in child process did not report success:\n%s", text)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "Passed") {
			t.Log(strings.TrimSpace(line))
		}
	}
	return true
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// TestSanity runs the kubernetes-csi sanity suite against one driver instance
// serving controller and node.
func TestSanity(t *testing.T) {
	if rerunInChild(t) {
		return
	}
	d, err := NewDriver(Config{NodeID: "sanity-node", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := newSanityConfig(t)
	cfg.Address = serve(t, d)
	runSanity(t, cfg)
	checkCleanAfterSanity(t, cfg, d.Config().StateDir)
}

// TestSanitySplit runs the sanity suite against a controller instance and a
// separate node instance sharing a state directory, as deployed.
func TestSanitySplit(t *testing.T) {
	if rerunInChild(t) {
		return
	}
	state := t.TempDir()
	ctrl, err := NewDriver(Config{Mode: ModeController, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	node, err := NewDriver(Config{Mode: ModeNode, NodeID: "sanity-split-node", StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	cfg := newSanityConfig(t)
	cfg.ControllerAddress = serve(t, ctrl)
	cfg.Address = serve(t, node)
	runSanity(t, cfg)
	checkCleanAfterSanity(t, cfg, state)
}

// checkCleanAfterSanity checks that the driver undid everything: sanity
// removes its target and staging directories with os.Remove, which leaves
// them behind if the driver left a marker or symlink inside, and it deletes
// every volume it created.
func checkCleanAfterSanity(t *testing.T, cfg sanity.TestConfig, stateDir string) {
	t.Helper()
	for _, p := range []string{cfg.TargetPath, cfg.StagingPath} {
		if _, err := os.Lstat(p); err == nil {
			entries, _ := os.ReadDir(p)
			t.Errorf("%s left behind with %d entries", p, len(entries))
		}
	}
	vols, err := LoadVolumeStates(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(vols) != 0 {
		t.Errorf("volumes left behind: %+v", vols)
	}
	data, err := os.ReadDir(filepath.Join(stateDir, "volumes"))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 0 {
		t.Errorf("%d volume data directories left behind", len(data))
	}
}
