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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/detector"
	"github.com/strandlab/strandlab/internal/workload"
)

// Outcome is how a cycle ended.
type Outcome string

const (
	// Running: the replacement pod reached Running and Ready.
	Running Outcome = "running"
	// TimedOut: the replacement was not Running within the cycle timeout.
	TimedOut Outcome = "timed_out"
	// Stranded: the detector found the replacement's volume stranded.
	Stranded Outcome = "stranded"
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
	// RoundRobin takes the targets in turn instead (each pod the same
	// number of times).
	RoundRobin   bool
	Cycles       int
	Seed         int64
	CycleTimeout time.Duration
	// Progress receives a line every ProgressEvery; nil disables it.
	Progress      io.Writer
	ProgressEvery time.Duration
	// OnProgress, if set, is called with the cycles so far at every progress
	// tick (the runner writes its partial report there).
	OnProgress func(Result)
	// StrandedPod, if set, reports a stranding of the pod's volume found by
	// the detector (pod as namespace/name); a cycle ends as Stranded when
	// one began after the cycle's delete.
	StrandedPod func(pod string) (detector.Finding, bool)
}

// Cycle is what happened in one delete/recreate cycle.
type Cycle struct {
	Index   int     `json:"index"`
	Pod     string  `json:"pod"`
	Outcome Outcome `json:"outcome"`
	OldNode string  `json:"old_node"`
	NewNode string  `json:"new_node,omitempty"`
	// DeleteToRunning: from the delete request to the replacement Running.
	DeleteToRunning time.Duration `json:"delete_to_running_ns,omitempty"`
	// CreateToRunning: from the replacement first seen by the harness to it
	// Running (creationTimestamp has only second precision).
	CreateToRunning time.Duration `json:"create_to_running_ns,omitempty"`
	Error           string        `json:"error,omitempty"`
	// DeletedAt and ReplacementSeenAt anchor the cycle's timeline.
	DeletedAt         time.Time `json:"deleted_at"`
	ReplacementSeenAt time.Time `json:"replacement_seen_at,omitempty"`
	// Stranding is the detector's finding for a Stranded cycle.
	Stranding *detector.Finding `json:"stranding,omitempty"`
	// DetectedAt is when the stranding was reported.
	DetectedAt time.Time `json:"detected_at,omitempty"`
}

// Result is a finished (or interrupted) run.
type Result struct {
	Cycles      []Cycle
	Elapsed     time.Duration
	Interrupted bool
}

// Run executes the cycles. It returns the cycles done so far when ctx ends
// (Interrupted set) and an error only when the harness itself failed.
func Run(ctx context.Context, client kubernetes.Interface, pods *workload.Pods, cfg Config) (Result, error) {
	if len(cfg.Targets) == 0 {
		return Result{}, errors.New("churn: no target pods")
	}
	// PCG with the scenario seed: same seed, same sequence of targets.
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5354524e))
	var res Result
	start := time.Now()
	lastProgress := start
	for i := 0; i < cfg.Cycles; i++ {
		t := cfg.Targets[i%len(cfg.Targets)]
		if !cfg.RoundRobin {
			t = cfg.Targets[rng.IntN(len(cfg.Targets))]
		}
		c, err := runCycle(ctx, client, pods, cfg, i, workload.PodName(t.StatefulSet, t.Ordinal))
		if ctx.Err() != nil {
			res.Interrupted = true
			break
		}
		if err != nil {
			res.Elapsed = time.Since(start)
			return res, err
		}
		res.Cycles = append(res.Cycles, c)
		if cfg.Progress != nil && (time.Since(lastProgress) >= cfg.ProgressEvery || i == cfg.Cycles-1) {
			lastProgress = time.Now()
			printProgress(cfg.Progress, res.Cycles, cfg.Cycles, time.Since(start))
			if cfg.OnProgress != nil {
				cfg.OnProgress(Result{Cycles: res.Cycles, Elapsed: time.Since(start)})
			}
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

func runCycle(ctx context.Context, client kubernetes.Interface, pods *workload.Pods, cfg Config, index int, name string) (Cycle, error) {
	c := Cycle{Index: index, Pod: name}
	log := klog.FromContext(ctx).WithValues("cycle", index, "pod", name)

	// The previous cycle may have ended on another pod; this one starts from
	// a Running pod so that every cycle measures the same thing.
	wctx, cancel := context.WithTimeout(ctx, cfg.CycleTimeout)
	defer cancel()
	if err := pods.WaitFor(wctx, func(p *Pods) bool { return workload.IsRunning(p.Get(name)) }); err != nil {
		if ctx.Err() != nil {
			return c, ctx.Err()
		}
		c.Outcome, c.Error = TimedOut, fmt.Sprintf("pod %s was not Running before the cycle", name)
		return c, nil
	}
	old := pods.Get(name)
	c.OldNode = old.Spec.NodeName

	deleted := time.Now()
	c.DeletedAt = deleted
	err := client.CoreV1().Pods(cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: metav1.NewUIDPreconditions(string(old.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return c, fmt.Errorf("cycle %d: delete pod %s: %w", index, name, err)
	}
	log.V(2).Info("Deleted pod", "uid", old.UID, "node", c.OldNode)

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
			c.Outcome, c.Stranding, c.DetectedAt = Stranded, &f, time.Now()
			c.NewNode = f.Node
			if pod := pods.Get(name); pod != nil && pod.UID != old.UID {
				c.ReplacementSeenAt = pods.FirstSeen(pod.UID)
			}
			log.Info("Volume stranded", "node", f.Node, "volume", f.Volume, "evidence", f.Evidence)
			return c, nil
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return c, ctx.Err()
		}
		c.Outcome = TimedOut
		c.Error = fmt.Sprintf("replacement of %s not Running within %v", name, cfg.CycleTimeout)
		if pod := pods.Get(name); pod != nil && pod.UID != old.UID {
			c.NewNode = pod.Spec.NodeName
		}
		log.Info("Cycle timed out", "err", c.Error)
		return c, nil
	}
	runningAt := time.Now()
	c.Outcome = Running
	c.ReplacementSeenAt = pods.FirstSeen(replacement.UID)
	c.NewNode = replacement.Spec.NodeName
	c.DeleteToRunning = runningAt.Sub(deleted)
	c.CreateToRunning = runningAt.Sub(c.ReplacementSeenAt)
	log.V(2).Info("Replacement running", "node", c.NewNode, "deleteToRunning", c.DeleteToRunning)
	return c, nil
}

// Pods is the pod view the runner waits on.
type Pods = workload.Pods

func printProgress(w io.Writer, done []Cycle, total int, elapsed time.Duration) {
	failed, stranded := 0, 0
	for _, c := range done {
		switch c.Outcome {
		case TimedOut:
			failed++
		case Stranded:
			stranded++
		}
	}
	rate := float64(len(done)) / elapsed.Seconds()
	eta := "-"
	if rate > 0 {
		eta = time.Duration(float64(total-len(done)) / rate * float64(time.Second)).Round(time.Second).String()
	}
	fmt.Fprintf(w, "cycles %d/%d  %.2f/s  stranded %d  timed out %d  elapsed %s  ETA %s\n",
		len(done), total, rate, stranded, failed, elapsed.Round(time.Second), eta)
}
