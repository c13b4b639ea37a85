package local

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/upstream"
)

// binaries builds (or finds) the real binaries; these tests start real
// processes and are skipped with -short.
func binaries(t *testing.T) upstream.Binaries {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real control plane")
	}
	wd, _ := os.Getwd()
	root, err := upstream.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	b, err := upstream.Ensure(context.Background(), root, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBadControllerManagerFlagFailsFastAndCleansUp(t *testing.T) {
	p, err := (&Provider{Binaries: binaries(t)}).Prepare(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	before := stateDirs(t)
	start := time.Now()
	c, err := p.Start(context.Background(), cluster.Spec{Name: "badflag", Nodes: 1, OutputDir: out,
		ControllerManagerArgs: []string{"--no-such-flag=1"}})
	elapsed := time.Since(start)
	if err == nil {
		c.Stop(context.Background())
		t.Fatal("start succeeded with a bad kube-controller-manager flag")
	}
	msg := err.Error()
	if !strings.Contains(msg, "kube-controller-manager exited") || !strings.Contains(msg, "no-such-flag") {
		t.Errorf("error does not name the component and carry its log tail:\n%s", msg)
	}
	// etcd and the API server start first (a few seconds); the failure must
	// then be noticed at once, not after the start timeout.
	if elapsed > 45*time.Second {
		t.Errorf("start failed after %v; want a prompt failure", elapsed)
	}
	if after := stateDirs(t); len(after) > len(before) {
		t.Errorf("state directories left behind: before %v, after %v", before, after)
	}
	if _, err := os.Stat(filepath.Join(out, "logs", "kube-controller-manager.log")); err != nil {
		t.Errorf("component log missing: %v", err)
	}
}

func stateDirs(t *testing.T) []string {
	m, err := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"badflag-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A start that fails on a port taken meanwhile is tried again; other
// failures, and a cancelled run, are not.
func TestRetryPortClash(t *testing.T) {
	clash := errors.New("kube-apiserver exited: listen tcp 127.0.0.1:40001: bind: address already in use")
	other := errors.New("etcd exited: no space left on device")
	tests := []struct {
		name      string
		errs      []error // what each attempt returns
		cancelled bool
		wantCalls int
		wantErr   error
	}{
		{"first try", []error{nil}, false, 1, nil},
		{"a clash, then started", []error{clash, nil}, false, 2, nil},
		{"clashes every time", []error{clash, clash, clash, clash}, false, 3, clash},
		{"another failure", []error{other, nil}, false, 1, other},
		{"a clash after Ctrl-C", []error{clash, nil}, true, 1, clash},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			calls := 0
			_, err := retryPortClash(ctx, 3, io.Discard, func() (cluster.Cluster, error) {
				calls++
				return nil, tc.errs[calls-1]
			})
			if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) {
				t.Errorf("%d calls, error %v; want %d, %v", calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
}

// A runtime timings file the simulated kubelets could not draw from is
// refused before anything starts, naming the flag.
func TestCheckSpecRuntimeTimings(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"source":"x","operations":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	builtIn := filepath.Join("..", "..", "..", "tools", "upstream", "kubelet-sim", "containerruntime", "timings.json")
	for _, tc := range []struct {
		file, want string
	}{
		{"", ""},
		{builtIn, ""},
		{filepath.Join(dir, "missing.json"), "--runtime-timings: open "},
		{bad, "--runtime-timings: " + bad + ": operations.run_podsandbox: missing"},
	} {
		err := (&Provider{}).CheckSpec(cluster.Spec{Nodes: 1, RuntimeTimings: tc.file})
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckSpec(runtime timings %q) = %v, want %q", tc.file, err, tc.want)
		}
	}
}
