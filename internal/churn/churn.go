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

// Run executes the cycles of the plan, up to cfg.Concurrency at once. Cycles
// start strictly in plan order (so the deletions happen in the same order on
// every run with the same seed); a cycle waits for a free slot, for the
// previous cycle on the same pod to end, and for the pacing interval. It
// returns the cycles done so far, in plan order, when ctx ends (Interrupted
// set), and an error only when the harness itself failed.
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
		mu       sync.Mutex
		done     []cycle.Cycle
		firstErr error
		wg       sync.WaitGroup
	)
	snapshot := func() cycle.Result {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(done)
		slices.SortFunc(out, func(a, b cycle.Cycle) int { return a.Index - b.Index })
		return cycle.Result{Cycles: out, Elapsed: time.Since(start)}
	}
	stopProgress := startProgress(cfg, len(plan), snapshot)

	previous := map[string]cycle.Outcome{} // pod -> how its last cycle ended
	// record ends a cycle: measured, or the harness's first error (which
	// stops the others), or dropped when the run was interrupted.
	record := func(c cycle.Cycle, err error) {
		mu.Lock()
		defer mu.Unlock()
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

	slots := make(chan struct{}, concurrency)
	busy := map[string]chan struct{}{} // pod -> closed when its cycle ends
	var lastStart time.Time
dispatch:
	for i, t := range plan {
		name := workload.PodName(t.StatefulSet, t.Ordinal)
		select {
		case slots <- struct{}{}:
		case <-runCtx.Done():
			break dispatch
		}
		if prev := busy[name]; prev != nil {
			select {
			case <-prev:
			case <-runCtx.Done():
				break dispatch
			}
		}
		if wait := time.Until(lastStart.Add(cfg.Interval)); cfg.Interval > 0 && wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-runCtx.Done():
				timer.Stop()
				break dispatch
			}
		}
		lastStart = time.Now()
		// The delete happens here, in plan order; the wait for the
		// replacement runs alongside the other cycles.
		mu.Lock()
		after := previous[name]
		mu.Unlock()
		deadline := time.Now().Add(cfg.CycleTimeout)
		c, old, err := deletePod(runCtx, client, pods, cfg, i, name, after, deadline)
		if err != nil || old == nil {
			record(c, err)
			<-slots
			if err != nil {
				break dispatch
			}
			continue
		}
		finished := make(chan struct{})
		busy[name] = finished
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer close(finished)
			record(awaitReplacement(runCtx, pods, cfg, c, old, deadline))
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
		printProgress(cfg.Progress, res.Cycles, len(plan), res.Elapsed, cfg.SafetyViolations)
	}
	return res, nil
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
				printProgress(cfg.Progress, res.Cycles, total, res.Elapsed, cfg.SafetyViolations)
				if cfg.OnProgress != nil {
					cfg.OnProgress(res)
				}
			}
		}
	}()
	return func() { close(quit); <-exited }
}

// deletePod starts cycle index on pod name: it waits for the pod to be
// ready for a cycle, then deletes it. A pod whose previous cycle ended
// Running must be Running again (every cycle measures the same thing); one
// left stranded or timed out is deleted as it is, once it exists, so that a
// stuck pod does not fail every later cycle on it. old is nil when the
// cycle ended before the delete.
func deletePod(ctx context.Context, client kubernetes.Interface, pods *workload.Pods, cfg Config, index int, name string,
	previous cycle.Outcome, deadline time.Time) (c cycle.Cycle, old *corev1.Pod, err error) {
	// Plan deletes every target once per round, in plan order.
	c = cycle.Cycle{Index: index, Round: index / len(cfg.Targets), Pod: name}
	ready := func(p *Pods) bool { return workload.IsRunning(p.Get(name)) }
	if previous == cycle.Stranded || previous == cycle.TimedOut {
		ready = func(p *Pods) bool { pod := p.Get(name); return pod != nil && pod.DeletionTimestamp == nil }
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if err := pods.WaitFor(wctx, ready); err != nil {
		if ctx.Err() != nil {
			return c, nil, ctx.Err()
		}
		c.Outcome, c.Error = cycle.TimedOut, fmt.Sprintf("pod %s was not ready for a cycle (Running, or present after a failed cycle)", name)
		return c, nil, nil
	}
	old = pods.Get(name)
	c.OldNode = old.Spec.NodeName
	c.DeletedAt = time.Now()
	err = client.CoreV1().Pods(cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: metav1.NewUIDPreconditions(string(old.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return c, nil, fmt.Errorf("cycle %d: delete pod %s: %w", index, name, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted pod", "cycle", index, "pod", name, "uid", old.UID, "node", c.OldNode)
	return c, old, nil
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
	running := func(p *Pods) bool {
		pod := p.Get(name)
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
		err = pods.WaitFor(slice, running)
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
				c.ReplacementSeenAt = pods.FirstSeen(pod.UID)
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
		}
		log.Info("Cycle timed out", "err", c.Error)
		return c, nil
	}
	runningAt := time.Now()
	c.Outcome = cycle.Running
	c.ReplacementSeenAt = pods.FirstSeen(replacement.UID)
	c.NewNode = replacement.Spec.NodeName
	c.DeleteToRunning = runningAt.Sub(deleted)
	c.CreateToRunning = runningAt.Sub(c.ReplacementSeenAt)
	log.V(2).Info("Replacement running", "node", c.NewNode, "deleteToRunning", c.DeleteToRunning)
	return c, nil
}

// Pods is the pod view the runner waits on.
type Pods = workload.Pods

func printProgress(w io.Writer, done []cycle.Cycle, total int, elapsed time.Duration, safety func() int) {
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
	fmt.Fprintf(w, "cycles %d/%d  %.2f/s  stranded %d%s  timed out %d  elapsed %s  ETA %s\n",
		len(done), total, rate, stranded, unsafe, failed, elapsed.Round(time.Second), eta)
}
