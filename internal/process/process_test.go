package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

func shell(t *testing.T, name, script string) Spec {
	return Spec{Name: name, Path: "/bin/sh", Args: []string{"-c", script}, LogFile: filepath.Join(t.TempDir(), name+".log")}
}

// allowStarts lifts make unit's guard for a test whose /bin/sh stand-ins
// exercise the supervisor itself: they are not cluster components.
func allowStarts(t *testing.T) { t.Setenv(UnitOnlyEnv, "") }

func TestStartRefusedUnderMakeUnit(t *testing.T) {
	tests := []struct {
		env     string
		wantErr string // "" means the process starts
	}{
		{"1", "STRANDLAB_UNIT_ONLY is set (make unit): starting process etcd is not allowed"},
		{"", ""},
		{"0", ""},
	}
	for _, tc := range tests {
		t.Run("STRANDLAB_UNIT_ONLY="+tc.env, func(t *testing.T) {
			t.Setenv(UnitOnlyEnv, tc.env)
			g := &Group{PIDFile: filepath.Join(t.TempDir(), "pids")}
			defer g.Stop(time.Second)
			spec := shell(t, "etcd", "sleep 30")
			p, err := g.Start(spec)
			if tc.wantErr == "" {
				if err != nil || p == nil || len(g.Running()) != 1 {
					t.Fatalf("Start = %v, %v; running %v", p, err, g.Running())
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("Start error %v, want %q", err, tc.wantErr)
			}
			if p != nil || len(g.Running()) != 0 {
				t.Errorf("a process was started: %v, running %v", p, g.Running())
			}
			// Start writes the command line to the log and the pid file
			// before it returns, so their absence shows nothing was exec'd.
			for _, f := range []string{spec.LogFile, g.PIDFile} {
				if _, err := os.Stat(f); !os.IsNotExist(err) {
					t.Errorf("%s exists (%v): the start went ahead", f, err)
				}
			}
		})
	}
}

func TestWaitReady(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		check   func(context.Context) error
		timeout time.Duration
		wantErr []string // substrings; nil means success
	}{
		{
			name:   "ready check passes",
			script: "sleep 30",
			check:  func(context.Context) error { return nil },
		},
		{
			name:    "process dies first: error names it and carries its log tail",
			script:  "echo 'flag provided but not defined: -bogus'; exit 3",
			check:   func(context.Context) error { return os.ErrNotExist },
			timeout: 30 * time.Second,
			wantErr: []string{"comp exited", "exit status 3", "flag provided but not defined: -bogus"},
		},
		{
			name:    "never ready: times out with the last check error",
			script:  "echo still starting; sleep 30",
			check:   func(context.Context) error { return os.ErrDeadlineExceeded },
			timeout: 300 * time.Millisecond,
			wantErr: []string{"comp not ready", "still starting"},
		},
	}
	allowStarts(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &Group{}
			defer g.Stop(time.Second)
			p, err := g.Start(shell(t, "comp", tc.script))
			if err != nil {
				t.Fatal(err)
			}
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			err = p.WaitReady(ctx, 20*time.Millisecond, tc.check)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			wantErrContaining(t, err, tc.wantErr)
		})
	}
}

func TestWaitReadyRestarting(t *testing.T) {
	// The script fails its first `fails` starts (counted in a file), then
	// becomes ready by creating the ready file.
	tests := []struct {
		name     string
		fails    int
		restarts int
		wantErr  []string // nil: ready
		wantRuns int
	}{
		{name: "ready at once", fails: 0, restarts: 2, wantRuns: 1},
		{name: "exits once, ready after one restart", fails: 1, restarts: 2, wantRuns: 2},
		{name: "exits on every start: the last exit is the error", fails: 5, restarts: 2,
			wantErr: []string{"comp exited", "exit status 1", "capability check"}, wantRuns: 3},
		{name: "no restarts allowed", fails: 1, restarts: 0, wantErr: []string{"comp exited"}, wantRuns: 1},
	}
	allowStarts(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			runs, ready := filepath.Join(dir, "runs"), filepath.Join(dir, "ready")
			script := fmt.Sprintf(`echo x >> %[1]s; n=$(wc -l < %[1]s); if [ "$n" -le %[2]d ]; then echo "failed capability check"; exit 1; fi; touch %[3]s; exec sleep 30`, runs, tc.fails, ready)
			g := &Group{}
			defer g.Stop(time.Second)
			p, err := g.Start(shell(t, "comp", script))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p, err = g.WaitReadyRestarting(ctx, p, 20*time.Millisecond, func(context.Context) error {
				_, err := os.Stat(ready)
				return err
			}, tc.restarts)
			raw, _ := os.ReadFile(runs)
			if got := strings.Count(string(raw), "x"); got != tc.wantRuns {
				t.Errorf("started %d times, want %d", got, tc.wantRuns)
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if running := g.Running(); len(running) != 1 || running[0] != p {
					t.Errorf("running %v, want only the ready process %v", running, p)
				}
				return
			}
			wantErrContaining(t, err, tc.wantErr)
		})
	}
}

func TestStopKillsTheWholeProcessGroup(t *testing.T) {
	allowStarts(t)
	g := &Group{PIDFile: filepath.Join(t.TempDir(), "pids")}
	spec := shell(t, "parent", "sleep 1000 & echo child=$!; trap '' TERM; while :; do sleep 0.05; done")
	p, err := g.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		data, _ := os.ReadFile(spec.LogFile)
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "child="); ok {
				child, _ = strconv.Atoi(v)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal("child pid never logged")
	}
	if _, err := os.Stat(g.PIDFile); err != nil {
		t.Fatalf("pid file not written: %v", err)
	}
	start := time.Now()
	if err := g.Stop(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Stop took %v for a process ignoring SIGTERM with 200ms grace", d)
	}
	select {
	case <-p.Exited():
	default:
		t.Error("parent still running")
	}
	// The grandchild was reparented; give the kernel a moment to deliver.
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return !Alive(child), nil
	})
	if err != nil {
		t.Errorf("grandchild %d survived Stop", child)
	}
	if _, err := os.Stat(g.PIDFile); !os.IsNotExist(err) {
		t.Errorf("pid file left: %v", err)
	}
	if len(g.Running()) != 0 {
		t.Errorf("Running() = %v after Stop", g.Running())
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("a\nb\nc\nd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		n    int
		want string
	}{{2, "c\nd"}, {10, "a\nb\nc\nd"}, {1, "d"}}
	for _, tc := range tests {
		if got := Tail(path, tc.n); got != tc.want {
			t.Errorf("Tail(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := Tail(filepath.Join(t.TempDir(), "missing"), 3); !strings.Contains(got, "cannot read") {
		t.Errorf("Tail of a missing file = %q", got)
	}
}

// wantErrContaining fails t unless err is an error whose text contains
// every one of want.
func wantErrContaining(t *testing.T, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
}
