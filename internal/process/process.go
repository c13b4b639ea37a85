// Package process runs the real cluster components (etcd, kube-apiserver, …)
// as supervised local processes: each with its own log file, in its own
// process group, killed with the harness unless the cluster is kept, and
// reported with its log tail when it dies early.
package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/ownership"
)

// Spec describes one component process.
type Spec struct {
	Name    string   // component name, used for the log file and errors
	Path    string   // binary
	Args    []string // flags
	Env     []string // extra environment, KEY=VALUE
	LogFile string   // stdout and stderr go here
}

// Process is a started component.
type Process struct {
	Spec
	id   ownership.ProcessID
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed
}

// Group owns the processes of one cluster and stops them together.
type Group struct {
	// Keep means the processes outlive the harness (make e2e KEEP=1); otherwise
	// the kernel kills each one when the harness dies (Pdeathsig), so even a
	// SIGKILLed or panicking harness leaves nothing running.
	Keep bool
	// PIDFile, if set, lists every started process as a Record (JSON) so
	// that a later `strandlab down` can stop a kept cluster.
	PIDFile string

	mu    sync.Mutex
	procs []*Process
}

// UnitOnlyEnv, set to 1 by `make unit`, forbids starting component
// processes and building binaries: a unit test that would start a cluster
// then fails at once, naming what it tried, instead of quietly starting one.
const UnitOnlyEnv = "STRANDLAB_UNIT_ONLY"

// CheckUnitOnly returns an error saying that what is not allowed when
// UnitOnlyEnv is 1, and nil otherwise.
func CheckUnitOnly(what string) error {
	if os.Getenv(UnitOnlyEnv) == "1" {
		return fmt.Errorf("%s is set (make unit): %s is not allowed", UnitOnlyEnv, what)
	}
	return nil
}

// Start launches spec and returns once the process exists. It refuses, and
// creates nothing, when UnitOnlyEnv is set.
func (g *Group) Start(spec Spec) (*Process, error) {
	if err := CheckUnitOnly("starting process " + spec.Name); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(spec.LogFile), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(spec.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !g.Keep {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	fmt.Fprintf(logf, "# %s %s\n", spec.Path, strings.Join(spec.Args, " "))
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	p := &Process{Spec: spec, cmd: cmd, done: make(chan struct{})}
	// Read before Wait can reap it: the pid then still names this process.
	if id, err := ownership.Identify(cmd.Process.Pid); err == nil {
		p.id = id
	} else {
		p.id = ownership.ProcessID{PID: cmd.Process.Pid}
	}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	klog.V(2).InfoS("Started component", "component", spec.Name, "pid", cmd.Process.Pid, "log", spec.LogFile)

	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	return p, g.writePIDs()
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited is closed when the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.done }

// ExitError describes how the process ended; valid after Exited is closed.
func (p *Process) ExitError() error { return p.err }

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string { return Tail(p.LogFile, n) }

// DiedError is the error for a component that exited while it should run:
// it names the component and carries its log tail.
func (p *Process) DiedError() error {
	return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", p.Name, p.err, p.LogFile, p.LogTail(20))
}

// WaitReady polls check until it succeeds. It fails as soon as the process
// exits (with its log tail in the error) or ctx ends.
func (p *Process) WaitReady(ctx context.Context, interval time.Duration, check func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return p.DiedError()
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last check: %v); last lines of %s:\n%s", p.Name, ctx.Err(), last, p.LogFile, p.LogTail(20))
		case <-t.C:
		}
	}
}

// WaitReadyRestarting is WaitReady for a component that a kubelet would
// restart: when p exits before it is ready, it is started again, at most
// restarts times, and the process that became ready is returned. It is for
// programs whose own start gives up early under load (the CSI sidecars
// allow their driver one second to list its capabilities), which in a real
// deployment only costs a container restart.
func (g *Group) WaitReadyRestarting(ctx context.Context, p *Process, interval time.Duration, check func(context.Context) error, restarts int) (*Process, error) {
	for attempt := 1; ; attempt++ {
		err := p.WaitReady(ctx, interval, check)
		if err == nil {
			return p, nil
		}
		select {
		case <-p.Exited():
		default:
			return p, err // not ready in time, or cancelled: no restart helps
		}
		if attempt > restarts || ctx.Err() != nil {
			return p, err
		}
		klog.InfoS("Component exited before it was ready; starting it again", "component", p.Name, "restart", attempt, "maxRestarts", restarts, "exit", p.ExitError())
		if p, err = g.Restart(p, 0); err != nil {
			return p, err
		}
	}
}

// Restart stops p (SIGTERM to its group, SIGKILL after grace) and starts its
// spec again, appending to the same log; the new process replaces p in the
// group.
func (g *Group) Restart(p *Process, grace time.Duration) (*Process, error) {
	_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		<-p.done
	}
	g.mu.Lock()
	for i, q := range g.procs {
		if q == p {
			g.procs = append(g.procs[:i], g.procs[i+1:]...)
			break
		}
	}
	g.mu.Unlock()
	return g.Start(p.Spec)
}

// Running returns the processes that have not exited.
func (g *Group) Running() []*Process {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*Process
	for _, p := range g.procs {
		select {
		case <-p.done:
		default:
			out = append(out, p)
		}
	}
	return out
}

// Stop terminates every process in reverse start order: SIGTERM to its
// process group, then SIGKILL after grace. It waits until all have exited.
func (g *Group) Stop(grace time.Duration) error {
	g.mu.Lock()
	procs := append([]*Process(nil), g.procs...)
	g.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		select {
		case <-p.done:
			continue
		default:
		}
		_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			klog.V(1).InfoS("Component ignored SIGTERM, killing", "component", p.Name, "grace", grace)
			_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				errs = append(errs, fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, p.PID()))
			}
		}
	}
	if g.PIDFile != "" {
		if err := os.Remove(g.PIDFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (g *Group) writePIDs() error {
	if g.PIDFile == "" {
		return nil
	}
	g.mu.Lock()
	recs := make([]Record, 0, len(g.procs))
	for _, p := range g.procs {
		recs = append(recs, Record{Name: p.Name, ProcessID: p.id})
	}
	g.mu.Unlock()
	data, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return err
	}
	tmp := g.PIDFile + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, g.PIDFile)
}

// Record is one started process as a Group's PID file lists it: a pid
// together with what makes it this process (ownership.ProcessID), so that a
// later `strandlab down` never signals a pid the kernel has given to
// another process since.
type Record struct {
	Name string `json:"name"`
	ownership.ProcessID
}

// ReadRecords reads a Group's PID file.
func ReadRecords(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var recs []Record
	if err := json.Unmarshal(data, &recs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return recs, nil
}

// KillRecorded stops the process groups of the records whose pid still
// names the recorded process (ProcessID.Alive): SIGTERM, then SIGKILL after
// grace. The others are left alone. It returns the records it signalled.
func KillRecorded(ctx context.Context, recs []Record, grace time.Duration) []Record {
	var live []Record
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Alive() {
			live = append(live, recs[i])
			_ = syscall.Kill(-recs[i].PID, syscall.SIGTERM)
		}
	}
	// These processes are not our children (their harness has exited), so
	// there is no wait(): poll, with a deadline.
	waitGone := func(r Record, d time.Duration) {
		_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, d, true, func(context.Context) (bool, error) {
			return !r.Alive(), nil
		})
	}
	for _, r := range live {
		waitGone(r, grace)
		if r.Alive() {
			_ = syscall.Kill(-r.PID, syscall.SIGKILL)
			waitGone(r, 5*time.Second)
		}
	}
	return live
}

// Alive reports whether a process with pid exists and has not exited. A
// zombie (exited, not yet reaped by its new parent) counts as exited.
func Alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// Format: pid (comm) state ...; comm may contain spaces or parentheses.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// Tail returns the last n lines of a file, or a note when it cannot be read.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
