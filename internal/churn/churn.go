// Package churn is the cycle runner: it deletes StatefulSet pods and waits for
// their replacements, one cycle at a time, recording what happened in each
// cycle. With the same seed it performs the same sequence of deletions.
package churn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/detector"
	"github.com/strandlab/strandlab/internal/timeline"
	"github.com/strandlab/strandlab/internal/workload"
)

// Target is a pod the runner may delete.
type Target struct {
	StatefulSet string
	Ordinal     int
}

// Config is one run's churn.
type Config struct {
	Namespace string
	Targets   []Target // candidates; each cycle picks one with the seeded RNG
	// RoundRobin takes the targets in turn instead of shuffling each round.
	RoundRobin   bool
	Cycles       int
	Seed         int64
	CycleTimeout time.Duration
	// Progress receives a line every ProgressEvery; nil disables it.
	Progress      io.Writer
	ProgressEvery time.Duration
	// OnProgress, if set, is called with the cycles so far at every progress
	// tick (the runner writes its partial report there).
	OnProgress func(cycle.Result)
	// Concurrency is the number of cycles in flight at once (default 1).
	Concurrency int
	// Interval is the least time between two deletions (pacing; 0: none).
	Interval time.Duration
	// Explain, if set, gives the timeline of a stranded cycle (called when
	// the stranding is detected, while the evidence is fresh).
	Explain func(cycle.Cycle) []timeline.Entry
	// StrandedPod, if set, reports a stranding of the pod's volume found by
	// the detector (pod as namespace/name); a cycle ends as Stranded when
	// one began after the cycle's delete.
	StrandedPod func(pod string) (detector.Finding, bool)
	// SafetyViolations, if set, is the detector's count so far, for the
	// progress line.
	SafetyViolations func() int
	// Annotate, if set, adds what others observed to a cycle that ended
	// (its detach timings), given the pod it deleted.
	Annotate func(c *cycle.Cycle, old *corev1.Pod)
}

// Plan is the sequence of pods the run deletes, one per cycle, in rounds
// that delete every target once: in turn (RoundRobin) or in an order
// shuffled each round with the seeded RNG. Rounds keep the churn even
// across pods and keep a pod's cycles apart, so concurrent cycles rarely
// wait for one another. Same config, same plan.
func Plan(cfg Config) []Target {
	// PCG with the scenario seed: same seed, same sequence of targets.
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5354524e))
	plan := make([]Target, 0, cfg.Cycles)
	round := slices.Clone(cfg.Targets)
	for len(plan) < cfg.Cycles {
		if !cfg.RoundRobin {
			rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		plan = append(plan, round[:min(len(round), cfg.Cycles-len(plan))]...)
	}
	return plan
}

// Run executes the cycles of the plan, up to cfg.Concurrency at once, and
// returns them in plan order. The dispatcher starts the earliest entry of
// the plan whose pod is free: no cycle in flight on it, and ready for a cycle
// (Running, or present after a cycle that ended stranded or timed out).
// Entries whose pod is busy are deferred, keep their place and go as soon as
// their pod is free, before any later entry; so one stuck pod holds back only
// its own cycles (docs/design.md, "Dispatch"). With every pod ready and one
// cycle at a time the deletions follow the plan exactly; with the same seed,
// the deletions of the pods that are ready are the same. Pacing
// (cfg.Interval) spaces the deletions. Time the dispatcher spent with a free
// slot and every candidate busy is the result's BusyWait. It returns the
// cycles done so far when ctx ends (Interrupted set), and an error only when
// the harness itself failed.
func Run(ctx context.Context, client kubernetes.Interface, pods *workload.Pods, cfg Config) (cycle.Result, error) {
	if len(cfg.Targets) == 0 {
		return cycle.Result{}, errors.New("churn: no target pods")
	}
	concurrency := max(cfg.Concurrency, 1)
	plan := Plan(cfg)
	start := time.Now()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex // guards everything below and the dispatcher's queue
		done     []cycle.Cycle
		firstErr error
		busyWait time.Duration
		wg       sync.WaitGroup
		wake     wakeup
	)
	q := newQueue(plan)
	snapshot := func() cycle.Result {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(done)
		slices.SortFunc(out, func(a, b cycle.Cycle) int { return a.Index - b.Index })
		return cycle.Result{Cycles: out, Elapsed: time.Since(start), BusyWait: busyWait}
	}
	stopProgress := startProgress(cfg, len(plan), snapshot)

	previous := map[string]cycle.Outcome{} // pod -> how its last cycle ended
	// recordLocked ends a cycle: measured, or the harness's first error
	// (which stops the others), or dropped when the run was interrupted.
	recordLocked := func(c cycle.Cycle, err error) {
		switch {
		case runCtx.Err() != nil:
			// Interrupted (or another cycle failed): not a measured cycle.
		case err != nil:
			if firstErr == nil {
				firstErr = err
			}
			cancel()
		default:
			done = append(done, c)
			previous[c.Pod] = c.Outcome
		}
	}
	// ready: pod name is ready for its next cycle (readyFor). Called with
	// mu held.
	ready := func(name string) bool { return readyFor(pods.Get(name), previous[name]) }

	var lastStart time.Time
	for {
		seen := wake.seen() // a cycle ending from here on cuts the next wait short
		if runCtx.Err() != nil {
			break
		}
		now := time.Now()
		mu.Lock()
		// A deferred entry whose pod was free but not ready for a whole
		// cycle timeout ends as timed out, without a delete (as a cycle
		// that waited for its pod always did).
		for _, i := range q.expired(now, cfg.CycleTimeout) {
			c := cycle.Cycle{Index: i, Round: i / len(cfg.Targets), Pod: q.names[i], DeferredBy: q.deferredBy[i], Outcome: cycle.TimedOut,
				Error: fmt.Sprintf("pod %s was not ready for a cycle (Running, or present after a failed cycle) within %v", q.names[i], cfg.CycleTimeout)}
			q.take(i, false)
			recordLocked(c, nil)
		}
		finished, free, next := q.empty(), q.inFlight < concurrency, q.nextDeadline(cfg.CycleTimeout)
		mu.Unlock()
		if finished {
			break
		}
		if !free {
			wake.wait(runCtx, seen, next, nil, nil)
			continue
		}
		if pace := lastStart.Add(cfg.Interval); cfg.Interval > 0 && now.Before(pace) {
			wake.wait(runCtx, seen, earliest(pace, next), nil, nil)
			continue
		}
		pick := -1
		candidate := func(*Pods) bool {
			mu.Lock()
			defer mu.Unlock()
			pick = q.scan(time.Now(), ready)
			return pick >= 0
		}
		if !candidate(pods) {
			// A free slot, and every candidate's pod is busy: wait for a
			// pod event, a cycle's end, or a deferred entry's deadline.
			mu.Lock()
			next = q.nextDeadline(cfg.CycleTimeout)
			mu.Unlock()
			t0 := time.Now()
			wake.wait(runCtx, seen, next, pods, candidate)
			mu.Lock()
			busyWait += time.Since(t0)
			mu.Unlock()
			continue // look again: expiries, pacing and the pick
		}

		name := q.names[pick]
		old := pods.Get(name)
		mu.Lock()
		if !readyFor(old, previous[name]) { // changed since the scan
			mu.Unlock()
			continue
		}
		deadline := time.Now().Add(cfg.CycleTimeout)
		if since, ok := q.since[pick]; ok {
			// Its cycle began when the dispatcher first found its pod free
			// but not ready.
			deadline = since.Add(cfg.CycleTimeout)
		}
		c := cycle.Cycle{Index: pick, Round: pick / len(cfg.Targets), Pod: name, DeferredBy: q.deferredBy[pick]}
		q.take(pick, true)
		q.busy[name] = true
		q.inFlight++
		mu.Unlock()
		// The cycle starts here, in dispatch order (DeletedAt); its delete
		// request and the wait for the replacement run alongside the other
		// cycles. Sending the delete from the dispatcher and waiting for
		// its response capped the churn at one cycle per API round trip
		// (tens of ms on a busy machine: about 33 cycles in flight with a
		// concurrency of 48 or 96, docs/performance.md).
		lastStart = time.Now()
		c.OldNode, c.DeletedAt = old.Spec.NodeName, lastStart
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := deletePod(runCtx, client, cfg, c, old)
			if err == nil {
				c, err = awaitReplacement(runCtx, pods, cfg, c, old, deadline)
			}
			if err == nil && cfg.Annotate != nil {
				cfg.Annotate(&c, old)
			}
			mu.Lock()
			recordLocked(c, err)
			delete(q.busy, c.Pod)
			q.inFlight--
			mu.Unlock()
			wake.wake()
		}()
	}
	wg.Wait()
	stopProgress()
	res := snapshot()
	res.Interrupted = ctx.Err() != nil
	if firstErr != nil {
		return res, firstErr
	}
	if cfg.Progress != nil {
		printProgress(cfg.Progress, res, len(plan), cfg.SafetyViolations)
	}
	return res, nil
}

// readyFor tells whether pod is ready for its next cycle, given how its last
// cycle ended: after a cycle that ended Running it must be Running again
// (every cycle measures the same thing); one left stranded or timed out is
// deleted as it is, once it exists, so that a stuck pod does not fail every
// later cycle on it.
func readyFor(pod *corev1.Pod, previous cycle.Outcome) bool {
	if previous == cycle.Stranded || previous == cycle.TimedOut {
		return pod != nil && pod.DeletionTimestamp == nil
	}
	return workload.IsRunning(pod)
}

// earliest is the earlier of two times, a zero time meaning none.
func earliest(a, b time.Time) time.Time {
	if b.IsZero() || (!a.IsZero() && a.Before(b)) {
		return a
	}
	return b
}

// queue is the dispatcher's view of the plan: entries before cursor have
// been looked at; those of them not started yet (deferred: their pod was
// busy) wait in deferred, in plan order. The earliest pending entry of each
// pod is its candidate; a pod's later entries wait behind it.
type queue struct {
	names    []string // plan entry -> pod name
	pods     int      // distinct pods in the plan
	cursor   int
	deferred []int
	// since: when a deferred entry's cycle began (the dispatcher first found
	// its pod with no cycle in flight, but not ready, while it had a free
	// slot): its cycle timeout runs from there.
	since map[int]time.Time
	// deferredBy: how many later entries started before a deferred one.
	deferredBy map[int]int
	busy       map[string]bool // pods with a cycle in flight
	inFlight   int
	seen       map[string]bool // scratch for scan
}

func newQueue(plan []Target) *queue {
	q := &queue{since: map[int]time.Time{}, deferredBy: map[int]int{}, busy: map[string]bool{}, seen: map[string]bool{}}
	distinct := map[string]bool{}
	for _, t := range plan {
		name := workload.PodName(t.StatefulSet, t.Ordinal)
		q.names = append(q.names, name)
		distinct[name] = true
	}
	q.pods = len(distinct)
	return q
}

// empty: every entry started or ended.
func (q *queue) empty() bool { return q.cursor == len(q.names) && len(q.deferred) == 0 }

// scan returns the earliest entry whose pod is free (no cycle in flight and
// ready(pod)), or -1. Entries it passes over are deferred; a candidate whose
// pod has no cycle in flight but is not ready starts its cycle's clock now.
func (q *queue) scan(now time.Time, ready func(name string) bool) int {
	clear(q.seen)
	free := func(i int) bool {
		name := q.names[i]
		q.seen[name] = true
		if q.busy[name] {
			return false
		}
		if ready(name) {
			return true
		}
		if _, ok := q.since[i]; !ok {
			q.since[i] = now
		}
		return false
	}
	for _, i := range q.deferred {
		if !q.seen[q.names[i]] && free(i) {
			return i
		}
	}
	// Once every pod has a candidate, no later entry can be one.
	for q.cursor < len(q.names) && len(q.seen) < q.pods {
		i := q.cursor
		if !q.seen[q.names[i]] && free(i) {
			return i
		}
		q.deferred = append(q.deferred, i)
		q.cursor++
	}
	return -1
}

// take removes entry i from the queue: started (the deferred entries before
// it count one more later entry gone first) or ended without a delete.
func (q *queue) take(i int, started bool) {
	for _, j := range q.deferred {
		if started && j < i {
			q.deferredBy[j]++
		}
	}
	if i == q.cursor {
		q.cursor++
	} else if k := slices.Index(q.deferred, i); k >= 0 {
		q.deferred = slices.Delete(q.deferred, k, k+1)
	}
	delete(q.since, i)
	delete(q.deferredBy, i)
}

// expired lists the deferred entries whose cycle timed out waiting for their
// pod to be ready, in plan order.
func (q *queue) expired(now time.Time, timeout time.Duration) []int {
	var out []int
	for _, i := range q.deferred {
		if since, ok := q.since[i]; ok && !now.Before(since.Add(timeout)) {
			out = append(out, i)
		}
	}
	return out
}

// nextDeadline is when the first deferred entry's cycle times out (zero:
// none is waiting for its pod).
func (q *queue) nextDeadline(timeout time.Duration) time.Time {
	var next time.Time
	for _, since := range q.since {
		next = earliest(next, since.Add(timeout))
	}
	return next
}

// wakeup puts the dispatcher to sleep until a pod event (when it waits with
// a condition), a cycle's end (wake), a deadline or the end of the run. A
// wake between seen and wait cuts the wait short, so none is lost.
type wakeup struct {
	mu     sync.Mutex
	n      uint64
	cancel context.CancelFunc
}

func (w *wakeup) seen() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func (w *wakeup) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	if w.cancel != nil {
		w.cancel()
	}
}

// wait returns at the first of: a wake since seen, until (unless zero), the
// end of ctx, or cond holding on a pod event (cond nil: no pod events).
func (w *wakeup) wait(ctx context.Context, seen uint64, until time.Time, pods *Pods, cond func(*Pods) bool) {
	var wctx context.Context
	var cancel context.CancelFunc
	if until.IsZero() {
		wctx, cancel = context.WithCancel(ctx)
	} else {
		wctx, cancel = context.WithDeadline(ctx, until)
	}
	defer cancel()
	w.mu.Lock()
	if w.n != seen {
		w.mu.Unlock()
		return
	}
	w.cancel = cancel
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.cancel = nil
		w.mu.Unlock()
	}()
	if cond == nil {
		<-wctx.Done()
		return
	}
	_ = pods.WaitFor(wctx, cond)
}

// startProgress prints a progress line (and hands the cycles so far to
// OnProgress) every ProgressEvery until the returned stop is called.
func startProgress(cfg Config, total int, snapshot func() cycle.Result) (stop func()) {
	if cfg.Progress == nil || cfg.ProgressEvery <= 0 {
		return func() {}
	}
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				res := snapshot()
				printProgress(cfg.Progress, res, total, cfg.SafetyViolations)
				if cfg.OnProgress != nil {
					cfg.OnProgress(res)
				}
			}
		}
	}()
	return func() { close(quit); <-exited }
}

// deletePod starts cycle c: it deletes old, the pod the dispatcher found
// ready for a cycle, with its UID as precondition.
func deletePod(ctx context.Context, client kubernetes.Interface, cfg Config, c cycle.Cycle, old *corev1.Pod) error {
	err := client.CoreV1().Pods(cfg.Namespace).Delete(ctx, c.Pod, metav1.DeleteOptions{
		Preconditions: metav1.NewUIDPreconditions(string(old.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("cycle %d: delete pod %s: %w", c.Index, c.Pod, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted pod", "cycle", c.Index, "pod", c.Pod, "uid", old.UID, "node", c.OldNode, "deferredBy", c.DeferredBy)
	return nil
}

// awaitReplacement ends a cycle: the replacement Running, its volume found
// stranded, or the deadline.
func awaitReplacement(ctx context.Context, pods *workload.Pods, cfg Config, c cycle.Cycle, old *corev1.Pod, deadline time.Time) (cycle.Cycle, error) {
	name, deleted := c.Pod, c.DeletedAt
	log := klog.FromContext(ctx).WithValues("cycle", c.Index, "pod", name)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var err error
	var replacement *corev1.Pod
	running := func(pod *corev1.Pod) bool {
		if pod != nil && pod.UID != old.UID && workload.IsRunning(pod) {
			replacement = pod
			return true
		}
		return false
	}
	// Wait for the replacement in slices of a second, asking the detector
	// in between: a stranded volume never produces a pod event.
	for {
		slice, cancelSlice := context.WithTimeout(wctx, time.Second)
		err = pods.WaitForPod(slice, name, running)
		cancelSlice()
		if err == nil || wctx.Err() != nil {
			break
		}
		if cfg.StrandedPod == nil {
			continue
		}
		if f, ok := cfg.StrandedPod(cfg.Namespace + "/" + name); ok && f.Since.After(deleted) {
			c.Outcome, c.Stranding, c.DetectedAt = cycle.Stranded, &f, time.Now()
			c.NewNode = f.Node
			if pod := pods.Get(name); pod != nil && pod.UID != old.UID {
				c.ReplacementSeenAt, c.ReplacementBoundAt = pods.FirstSeen(pod.UID), pods.BoundSeen(pod.UID)
			}
			log.Info("Volume stranded", "node", f.Node, "volume", f.Volume, "evidence", f.Evidence)
			if cfg.Explain != nil {
				c.Timeline = cfg.Explain(c)
			}
			return c, nil
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return c, ctx.Err()
		}
		c.Outcome = cycle.TimedOut
		c.Error = fmt.Sprintf("replacement of %s not Running within %v", name, cfg.CycleTimeout)
		if pod := pods.Get(name); pod != nil && pod.UID != old.UID {
			c.NewNode = pod.Spec.NodeName
			c.ReplacementSeenAt, c.ReplacementBoundAt = pods.FirstSeen(pod.UID), pods.BoundSeen(pod.UID)
		}
		log.Info("Cycle timed out", "err", c.Error)
		return c, nil
	}
	runningAt := time.Now()
	c.Outcome = cycle.Running
	c.ReplacementSeenAt, c.ReplacementBoundAt = pods.FirstSeen(replacement.UID), pods.BoundSeen(replacement.UID)
	c.NewNode = replacement.Spec.NodeName
	c.DeleteToRunning = runningAt.Sub(deleted)
	c.CreateToRunning = runningAt.Sub(c.ReplacementSeenAt)
	log.V(2).Info("Replacement running", "node", c.NewNode, "deleteToRunning", c.DeleteToRunning)
	return c, nil
}

// Pods is the pod view the runner waits on.
type Pods = workload.Pods

func printProgress(w io.Writer, res cycle.Result, total int, safety func() int) {
	done, elapsed := res.Cycles, res.Elapsed
	failed, stranded := 0, 0
	for _, c := range done {
		switch c.Outcome {
		case cycle.TimedOut:
			failed++
		case cycle.Stranded:
			stranded++
		}
	}
	rate := float64(len(done)) / elapsed.Seconds()
	eta := "-"
	if rate > 0 {
		eta = time.Duration(float64(total-len(done)) / rate * float64(time.Second)).Round(time.Second).String()
	}
	unsafe := ""
	if safety != nil {
		unsafe = fmt.Sprintf("  safety %d", safety())
	}
	// Time with a free slot and every next pod busy (a stuck or slow pod).
	busy := ""
	if res.BusyWait > 0 {
		busy = fmt.Sprintf("  waited on busy pods %s", res.BusyWait.Round(100*time.Millisecond))
	}
	fmt.Fprintf(w, "cycles %d/%d  %.2f/s  stranded %d%s  timed out %d%s  elapsed %s  ETA %s\n",
		len(done), total, rate, stranded, unsafe, failed, busy, elapsed.Round(time.Second), eta)
}
