package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/cluster/existing"
	"github.com/strandlab/strandlab/internal/ownership"
	"github.com/strandlab/strandlab/internal/process"
)

// decoyProcess is a process that is not strandlab's: down must never signal it.
func decoyProcess(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// strandlab down on a directory it cannot prove it created, or on processes
// whose pids no longer name what it recorded, removes nothing and kills
// nothing.
func TestDownTouchesOnlyWhatIsOurs(t *testing.T) {
	decoy := decoyProcess(t)
	dead := ownership.ProcessID{PID: 1 << 22, StartTime: 1, Executable: "/bin/strandlab"} // above pid_max: never alive
	decoyID, err := ownership.Identify(decoy.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	marker := func(provider string, kept bool, creator ownership.ProcessID, kindCluster string) ownership.Marker {
		return ownership.Marker{Token: strings.Repeat("ab", 16), Provider: provider, Creator: creator, CreatedAt: time.Now(), Kept: kept, KindCluster: kindCluster}
	}
	tests := []struct {
		name     string
		setup    func(t *testing.T, dir string) string // returns the path to give down
		want     string                                // the refusal; "" = down proceeds
		wantGone bool                                  // the directory is removed
		wantPlan string                                // in the printed plan
	}{
		{name: "the old owner and pids files", setup: func(t *testing.T, dir string) string {
			os.WriteFile(filepath.Join(dir, "owner"), []byte("1"), 0o644)
			os.WriteFile(filepath.Join(dir, "pids"), []byte("etcd "+strconv.Itoa(decoy.Process.Pid)+"\n"), 0o644)
			return dir
		}, want: "not a state directory strandlab created: no " + ownership.MarkerFile},
		{name: "a kind-cluster file naming the user's cluster", setup: func(t *testing.T, dir string) string {
			os.WriteFile(filepath.Join(dir, "kind-cluster"), []byte("kind"), 0o644)
			return dir
		}, want: "not a state directory strandlab created"},
		{name: "a marker without a token", setup: func(t *testing.T, dir string) string {
			m := marker("local", true, dead, "")
			m.Token = ""
			writeJSON(t, filepath.Join(dir, ownership.MarkerFile), m)
			return dir
		}, want: "has no run token"},
		{name: "a symbolic link to a marked directory", setup: func(t *testing.T, dir string) string {
			real := filepath.Join(dir, "real")
			os.Mkdir(real, 0o755)
			writeJSON(t, filepath.Join(real, ownership.MarkerFile), marker("local", true, dead, ""))
			link := filepath.Join(dir, "link")
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, want: "a symbolic link"},
		{name: "a cluster that was not kept", setup: func(t *testing.T, dir string) string {
			writeJSON(t, filepath.Join(dir, ownership.MarkerFile), marker("local", false, dead, ""))
			return dir
		}, want: "was not kept"},
		{name: "its run still running", setup: func(t *testing.T, dir string) string {
			writeJSON(t, filepath.Join(dir, ownership.MarkerFile), marker("local", true, decoyID, ""))
			return dir
		}, want: "is still running"},
		{name: "a kind marker naming a cluster strandlab never names", setup: func(t *testing.T, dir string) string {
			writeJSON(t, filepath.Join(dir, ownership.MarkerFile), marker("kind", true, dead, "kind"))
			return dir
		}, want: `kind_cluster "kind" is not a name strandlab gives`},
		{name: "a marker naming a provider that is not registered", setup: func(t *testing.T, dir string) string {
			writeJSON(t, filepath.Join(dir, ownership.MarkerFile), marker("minikube", true, dead, ""))
			return dir
		}, want: `provider "minikube": unknown`},
		{name: "a marker naming the existing provider, which keeps no directory", setup: func(t *testing.T, dir string) string {
			writeJSON(t, filepath.Join(dir, ownership.MarkerFile), marker("existing", true, dead, ""))
			return dir
		}, want: "keeps no state directory"},
		{name: "a recorded pid now naming another process", setup: func(t *testing.T, dir string) string {
			writeJSON(t, filepath.Join(dir, ownership.MarkerFile), marker("local", true, dead, ""))
			reused := decoyID
			reused.StartTime++ // the pid was recorded for an earlier process
			writeJSON(t, filepath.Join(dir, "processes.json"), []process.Record{{Name: "etcd", ProcessID: reused}})
			return dir
		}, wantGone: true, wantPlan: "remove "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := tc.setup(t, dir)
			var out strings.Builder
			err := downDir(context.Background(), providers("", io.Discard, &existing.Provider{}), path, false, &out)
			switch {
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("down = %v, want a refusal naming %q", err, tc.want)
			case tc.want == "" && err != nil:
				t.Errorf("down = %v", err)
			}
			if !strings.Contains(out.String(), tc.wantPlan) || tc.wantPlan == "" && out.Len() > 0 {
				t.Errorf("printed %q, want %q", out.String(), tc.wantPlan)
			}
			if tc.want != "" && errors.Is(err, ownership.ErrNotOurs) && strings.Contains(out.String(), "remove") {
				t.Errorf("a refused down printed a plan: %q", out.String())
			}
			if _, err := os.Stat(dir); tc.wantGone != os.IsNotExist(err) {
				t.Errorf("directory gone: %t, want %t", os.IsNotExist(err), tc.wantGone)
			}
			if !(ownership.ProcessID{PID: decoyID.PID, StartTime: decoyID.StartTime, Executable: decoyID.Executable}).Alive() {
				t.Fatalf("the decoy process (pid %d) was killed", decoy.Process.Pid)
			}
		})
	}
}

// --dry-run prints what down would do and does nothing.
func TestDownDryRun(t *testing.T) {
	dir := t.TempDir()
	dead := ownership.ProcessID{PID: 1 << 22, StartTime: 1, Executable: "/bin/strandlab"}
	writeJSON(t, filepath.Join(dir, ownership.MarkerFile), ownership.Marker{Token: strings.Repeat("cd", 16), Provider: "local", Creator: dead, Kept: true})
	var out strings.Builder
	if err := downDir(context.Background(), providers("", io.Discard, &existing.Provider{}), dir, true, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "remove "+dir+"\n" {
		t.Errorf("printed %q", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, ownership.MarkerFile)); err != nil {
		t.Errorf("--dry-run removed the directory: %v", err)
	}
}
