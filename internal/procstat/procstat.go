// Package procstat reads a process's own accounting from /proc (Linux):
// its CPU time (utime + stime of /proc/<pid>/stat) and its peak resident
// memory (VmHWM of /proc/<pid>/status), as usage.Samples. Parsing is
// prometheus/procfs's (already in the module graph through
// client_golang); the arithmetic on the samples is internal/usage's.
package procstat

import (
	"fmt"

	"github.com/prometheus/procfs"

	"github.com/strandlab/strandlab/internal/usage"
)

// Read samples the process pid, under the given name.
func Read(name string, pid int) (usage.Sample, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return usage.Sample{}, fmt.Errorf("process %s (pid %d): %w", name, pid, err)
	}
	return sample(name, p)
}

// Self samples the calling process (the harness), named usage.Harness.
func Self() (usage.Sample, error) {
	p, err := procfs.Self()
	if err != nil {
		return usage.Sample{}, fmt.Errorf("this process: %w", err)
	}
	return sample(usage.Harness, p)
}

// ReadWithReaped samples the process pid like Read, its CPU time counting
// its reaped children's too (cutime + cstime): a service whose short-lived
// helpers (mount, iptables, runc) are its children, when no cgroup counts
// for it (the kind provider on a host whose cpuacct hierarchy systemd does
// not manage).
func ReadWithReaped(name string, pid int) (usage.Sample, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return usage.Sample{}, fmt.Errorf("process %s (pid %d): %w", name, pid, err)
	}
	return sampleOf(name, p, true)
}

func sample(name string, p procfs.Proc) (usage.Sample, error) { return sampleOf(name, p, false) }

// sampleOf reads /proc/<pid>/stat and status once; reaped adds the
// children's CPU time.
func sampleOf(name string, p procfs.Proc, reaped bool) (usage.Sample, error) {
	st, err := p.Stat()
	if err != nil {
		return usage.Sample{}, fmt.Errorf("process %s (pid %d): %w", name, p.PID, err)
	}
	status, err := p.NewStatus()
	if err != nil {
		return usage.Sample{}, fmt.Errorf("process %s (pid %d): %w", name, p.PID, err)
	}
	// CPUTime is (utime + stime) / USER_HZ, procfs's fixed 100 Hz: the
	// value Linux exposes to user space on every common architecture.
	cpu := st.CPUTime()
	if reaped {
		cpu += float64(st.CUTime+st.CSTime) / 100 // procfs's fixed USER_HZ, as CPUTime
	}
	return usage.Sample{Name: name, PID: st.PID, StartTicks: st.Starttime, CPUSeconds: cpu, PeakRSSBytes: status.VmHWM}, nil
}

// MachineBusySeconds is the CPU time all of the machine's CPUs have spent
// busy since boot (/proc/stat's cpu line: everything but idle and iowait),
// in seconds: read before and after a run, what the whole run cost the
// machine, its clusters' start and stop and the harness included.
func MachineBusySeconds() (float64, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, err
	}
	st, err := fs.Stat()
	if err != nil {
		return 0, fmt.Errorf("/proc/stat: %w", err)
	}
	c := st.CPUTotal
	// Guest time is already in user time (procfs reads /proc/stat as the
	// kernel writes it).
	return c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal, nil
}
