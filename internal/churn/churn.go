// Package churn is the cycle runner: it deletes StatefulSet pods and waits
// for their replacements, up to Config.Concurrency cycles at once (at most
// one per pod), recording what happened in each cycle. With the same seed
// it plans the same sequence of deletions; Dispatcher decides when each goes.
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
// returns them in plan order. It drives a Dispatcher (the decisions) with
// the pod informer's view, the clock and the cycles' ends, and runs the
// cycles it starts (the API calls). The dispatcher starts the earliest entry of
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
	plan := Plan(cfg)
	d := NewDispatcher(cfg, plan)
	start := time.Now()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex // guards the four below
		done     []cycle.Cycle
		ended    []Event // cycle ends the dispatcher has not been told of
		firstErr error
		busyWait time.Duration
		wg       sync.WaitGroup
		wake     wakeup
	)
	snapshot := func() cycle.Result {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(done)
		slices.SortFunc(out, func(a, b cycle.Cycle) int { return a.Index - b.Index })
		return cycle.Result{Cycles: out, Elapsed: time.Since(start), BusyWait: busyWait}
	}
	stopProgress := startProgress(cfg, len(plan), snapshot)

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
		}
	}

	// The pods as last told to the dispatcher, and the objects they were
	// read from: a cycle deletes the object the dispatcher found ready.
	names := d.q.podNames()
	told := map[string]PodState{}
	observed := map[string]*corev1.Pod{}
	changes := func() []Event {
		var evs []Event
		for _, name := range names {
			pod := pods.Get(name)
			observed[name] = pod
			st := PodStateOf(pod)
			if old, ok := told[name]; !ok || old != st {
				told[name] = st
				evs = append(evs, PodChanged{Pod: name, State: st})
			}
		}
		return evs
	}
	// changed: a pod's state differs from what the dispatcher was told (a
	// wait on pod events ends there).
	changed := func(p *Pods) bool {
		for _, name := range names {
			if PodStateOf(p.Get(name)) != told[name] {
				return true
			}
		}
		return false
	}

	for {
		seen := wake.seen() // a cycle ending from here on cuts the next wait short
		if runCtx.Err() != nil {
			break
		}
		mu.Lock()
		evs := ended
		ended = nil
		mu.Unlock()
		act := d.Step(time.Now(), append(evs, changes()...)...)
		mu.Lock()
		busyWait = d.BusyWait()
		for _, s := range act.TimedOut {
			recordLocked(cycle.Cycle{Index: s.Index, Round: s.Round, Pod: s.Pod, DeferredBy: s.DeferredBy, Outcome: cycle.TimedOut,
				Error: fmt.Sprintf("pod %s was not ready for a cycle (Running, or present after a failed cycle) within %v", s.Pod, cfg.CycleTimeout)}, nil)
		}
		mu.Unlock()
		for _, s := range act.Start {
			// The cycle starts here, in dispatch order (DeletedAt); its
			// delete request and the wait for the replacement run alongside
			// the other cycles. Sending the delete from the dispatcher and
			// waiting for its response capped the churn at one cycle per API
			// round trip (tens of ms on a busy machine: about 33 cycles in
			// flight with a concurrency of 48 or 96, docs/performance.md).
			old := observed[s.Pod]
			c := cycle.Cycle{Index: s.Index, Round: s.Round, Pod: s.Pod, DeferredBy: s.DeferredBy,
				OldNode: old.Spec.NodeName, DeletedAt: time.Now()}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := deletePod(runCtx, client, cfg, c, old)
				if err == nil {
					c, err = awaitReplacement(runCtx, pods, cfg, c, old, s.Deadline)
				}
				if err == nil && cfg.Annotate != nil {
					cfg.Annotate(&c, old)
				}
				mu.Lock()
				recordLocked(c, err)
				ended = append(ended, CycleEnded{Index: c.Index, Outcome: c.Outcome})
				mu.Unlock()
				wake.wake()
			}()
		}
		if act.Done {
			break // every entry started or ended: wait for the cycles in flight
		}
		// Until what the dispatcher said can change its decision.
		if act.WatchPods {
			wake.wait(runCtx, seen, act.WakeAt, pods, changed)
		} else {
			wake.wait(runCtx, seen, act.WakeAt, nil, nil)
		}
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
