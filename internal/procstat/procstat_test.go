package procstat

import (
	"crypto/sha256"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/strandlab/strandlab/internal/usage"
)

// burn uses CPU on the calling thread until the process's CPU time, as
// Self reads it, has grown by at least want seconds: the test's own
// measurement decides, not a duration.
func burn(t *testing.T, from float64, want float64) usage.Sample {
	t.Helper()
	buf := make([]byte, 1<<16)
	for {
		for range 200 {
			s := sha256.Sum256(buf)
			buf[0] = s[0]
		}
		s, err := Self()
		if err != nil {
			t.Fatal(err)
		}
		if s.CPUSeconds-from >= want {
			return s
		}
	}
}

func TestSelf(t *testing.T) {
	before, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if before.Name != usage.Harness || before.PID != os.Getpid() || before.StartTicks == 0 {
		t.Errorf("Self = %+v, want name %q, pid %d and a start time", before, usage.Harness, os.Getpid())
	}
	if before.PeakRSSBytes < 1<<20 {
		t.Errorf("peak RSS %d bytes: a Go test binary holds more than 1 MiB", before.PeakRSSBytes)
	}
	// Two clock ticks: the accounting's resolution is one tick (10 ms).
	after := burn(t, before.CPUSeconds, 0.02)
	if got := usage.CPU([]usage.Sample{before}, []usage.Sample{after})[usage.Harness]; got < 0.02 {
		t.Errorf("CPU over the burn = %v s, want at least 0.02", got)
	}
	if after.StartTicks != before.StartTicks {
		t.Errorf("start time changed: %d then %d", before.StartTicks, after.StartTicks)
	}
}

func TestReadMatchesSelf(t *testing.T) {
	runtime.GC()
	s, err := Read("me", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "me" || s.PID != self.PID || s.StartTicks != self.StartTicks || s.CPUSeconds > self.CPUSeconds {
		t.Errorf("Read(pid) = %+v, Self = %+v: not the same process", s, self)
	}
}

func TestReadMissingProcess(t *testing.T) {
	// PIDs are at most 2^22 on Linux (pid_max's limit).
	if _, err := Read("gone", 1<<23); err == nil {
		t.Error("Read of a PID that cannot exist: no error")
	}
}

// TestReadWithReapedCountsChildren: a child that used CPU and was waited
// for counts in ReadWithReaped, not in Read.
func TestReadWithReapedCountsChildren(t *testing.T) {
	before, err := ReadWithReaped("self", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A shell loop: CPU in the child, none in this process.
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	child := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	if child < 0.05 {
		t.Skipf("the child used only %.3f s of CPU: too little to tell from ticks", child)
	}
	after, err := ReadWithReaped("self", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	own, err := Read("self", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Ticks are 10 ms; the child's time is rounded into them.
	if got := after.CPUSeconds - before.CPUSeconds; got < child-0.03 {
		t.Errorf("ReadWithReaped grew by %.3f s around a child that used %.3f s", got, child)
	}
	if after.CPUSeconds-own.CPUSeconds < child-0.03 {
		t.Errorf("ReadWithReaped %.3f s vs Read %.3f s: the child's %.3f s are not the difference", after.CPUSeconds, own.CPUSeconds, child)
	}
}

// The machine's busy time grows by at least what this process burns (it
// runs on one of the machine's CPUs), and never goes backwards.
func TestMachineBusySeconds(t *testing.T) {
	before, err := MachineBusySeconds()
	if err != nil {
		t.Fatal(err)
	}
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	burned := burn(t, self.CPUSeconds, 0.1).CPUSeconds - self.CPUSeconds
	after, err := MachineBusySeconds()
	if err != nil {
		t.Fatal(err)
	}
	// One clock tick of slack per reading: both count in ticks.
	if after-before < burned-0.02 {
		t.Errorf("machine busy %.2f s over a burn of %.2f s of this process's CPU", after-before, burned)
	}
}
