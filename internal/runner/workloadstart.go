package runner

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/strandlab/strandlab/internal/workload"
)

// workloadStall is how long the workload's start may go without one more
// pod Running before it is given up. The start has no fixed deadline: 2,000
// pods take minutes (kube-controller-manager's clients keep their default
// 20 requests/s, and the PV binder and the StatefulSet controller make a few
// requests per pod), and the count keeps rising while the start is healthy.
const workloadStall = 2 * time.Minute

// workloadProgressEvery is the pace of the "pods Running" progress line.
const workloadProgressEvery = 10 * time.Second

// waitWorkloadRunning waits until every pod of names is Running, printing
// the count every workloadProgressEvery, and returns how long that took. It
// fails when no further pod became Running for stall, naming how many
// were, and returns ctx's error when ctx ends first.
func waitWorkloadRunning(ctx context.Context, pods *workload.Pods, names []string, progress io.Writer, stall time.Duration) (time.Duration, error) {
	start := time.Now()
	fmt.Fprintf(progress, ">> waiting for %d pods to be Running\n", len(names))
	running := func(p *workload.Pods) int {
		n := 0
		for _, name := range names {
			if workload.IsRunning(p.Get(name)) {
				n++
			}
		}
		return n
	}
	best, lastGain, lastPrint := -1, time.Now(), time.Now()
	for {
		n := running(pods)
		if n > best {
			best, lastGain = n, time.Now()
		}
		if n == len(names) {
			return time.Since(start), nil
		}
		if time.Since(lastGain) >= stall {
			return time.Since(start), fmt.Errorf("workload: %d of %d pods Running, none more for %v", n, len(names), stall)
		}
		if time.Since(lastPrint) >= workloadProgressEvery {
			fmt.Fprintf(progress, ">> %d of %d pods Running (%.0fs)\n", n, len(names), time.Since(start).Seconds())
			lastPrint = time.Now()
		}
		// Wake on the next pod that starts, or in time for the next
		// progress line or the stall's end, whichever comes first.
		wait := min(workloadProgressEvery-time.Since(lastPrint), stall-time.Since(lastGain))
		wctx, cancel := context.WithTimeout(ctx, wait)
		_ = pods.WaitFor(wctx, func(p *workload.Pods) bool { return running(p) > n })
		cancel()
		if err := ctx.Err(); err != nil {
			return time.Since(start), err
		}
	}
}
