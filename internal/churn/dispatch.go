package churn

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/workload"
)

// Dispatcher is the dispatch rule (docs/design.md, "Dispatch") as a state
// machine with logical time, in the manner of raft's RawNode: it is told what
// happened (Step's now and events) and answers what to do (Actions). It
// sends no request, starts no goroutine and reads no clock, so the same
// plan, times and events give the same actions, and its tests are scripts
// that run without a timer. Run drives it against the API.
type Dispatcher struct {
	q           *queue
	targets     int // per round
	concurrency int
	timeout     time.Duration
	interval    time.Duration

	pods     map[string]PodState      // as last observed
	previous map[string]cycle.Outcome // how each pod's last cycle ended
	started  bool                     // lastStart is set
	// lastStart: when the last cycle started (pacing).
	lastStart time.Time
	// idleSince: the dispatcher had a free slot and every candidate's pod
	// was busy, since then (zero: it did not).
	idleSince time.Time
	busyWait  time.Duration
}

// PodState is what the dispatcher needs of a pod to decide whether it is
// ready for a cycle.
type PodState struct {
	// Present: the pod exists and is not terminating.
	Present bool
	// Running: Running, Ready and not terminating (workload.IsRunning).
	Running bool
}

// PodStateOf is the state of a cached pod (nil: none).
func PodStateOf(pod *corev1.Pod) PodState {
	return PodState{Present: pod != nil && pod.DeletionTimestamp == nil, Running: workload.IsRunning(pod)}
}

// Event is what the dispatcher is told: PodChanged or CycleEnded.
type Event interface{ isEvent() }

// PodChanged: the pod's state as observed now.
type PodChanged struct {
	Pod   string
	State PodState
}

// CycleEnded: a started cycle ended with outcome; its pod is no longer busy.
type CycleEnded struct {
	Index   int
	Outcome cycle.Outcome
}

func (PodChanged) isEvent() {}
func (CycleEnded) isEvent() {}

// Start is a cycle to start now: delete Pod and wait for its replacement
// until Deadline.
type Start struct {
	Index, Round int
	Pod          string
	// DeferredBy: how many later entries of the plan started before it.
	DeferredBy int
	Deadline   time.Time
}

// Actions is what the dispatcher decided at one Step.
type Actions struct {
	// Start: cycles to start, in dispatch order.
	Start []Start
	// TimedOut: entries whose pod was not ready for a cycle within the cycle
	// timeout; their cycles end timed out, without a delete (Deadline is
	// when they timed out).
	TimedOut []Start
	// WakeAt: step again at this time if nothing happens before (zero: no
	// timer; wait for an event).
	WakeAt time.Time
	// WatchPods: a free slot waits for a pod to become ready, so step on pod
	// changes too; otherwise only cycle ends (and WakeAt) can change the
	// decision.
	WatchPods bool
	// Done: every entry of the plan has started or ended; the run ends when
	// the started cycles have.
	Done bool
}

// NewDispatcher is the dispatcher of cfg's plan. It knows no pod until told.
func NewDispatcher(cfg Config, plan []Target) *Dispatcher {
	return &Dispatcher{
		q:           newQueue(plan),
		targets:     max(len(cfg.Targets), 1),
		concurrency: max(cfg.Concurrency, 1),
		timeout:     cfg.CycleTimeout,
		interval:    cfg.Interval,
		pods:        map[string]PodState{},
		previous:    map[string]cycle.Outcome{},
	}
}

// BusyWait is the time the dispatcher had a free slot and every candidate's
// pod was busy, up to its last step.
func (d *Dispatcher) BusyWait() time.Duration { return d.busyWait }

// InFlight is the number of cycles started and not ended.
func (d *Dispatcher) InFlight() int { return d.q.inFlight }

// Step applies the events (in order) at time now, then decides: first the
// deferred entries that timed out, then as many starts as there are free
// slots, pacing allowing, each the earliest entry of the plan whose pod is
// free (docs/design.md, "Dispatch").
func (d *Dispatcher) Step(now time.Time, events ...Event) Actions {
	if !d.idleSince.IsZero() {
		d.busyWait += now.Sub(d.idleSince)
		d.idleSince = time.Time{}
	}
	for _, ev := range events {
		switch ev := ev.(type) {
		case PodChanged:
			d.pods[ev.Pod] = ev.State
		case CycleEnded:
			pod := d.q.names[ev.Index]
			if d.q.busy[pod] {
				delete(d.q.busy, pod)
				d.q.inFlight--
				d.previous[pod] = ev.Outcome
			}
		}
	}
	var out Actions
	for {
		// A deferred entry whose pod was free but not ready for a whole
		// cycle timeout ends as timed out, without a delete.
		for _, i := range d.q.expired(now, d.timeout) {
			out.TimedOut = append(out.TimedOut, Start{Index: i, Round: i / d.targets, Pod: d.q.names[i],
				DeferredBy: d.q.deferredBy[i], Deadline: d.q.since[i].Add(d.timeout)})
			d.previous[d.q.names[i]] = cycle.TimedOut
			d.q.take(i, false)
		}
		if d.q.empty() {
			out.Done = true
			return out
		}
		next := d.q.nextDeadline(d.timeout)
		if d.q.inFlight >= d.concurrency {
			out.WakeAt = next
			return out
		}
		if pace := d.lastStart.Add(d.interval); d.started && d.interval > 0 && now.Before(pace) {
			out.WakeAt = earliest(pace, next)
			return out
		}
		pick := d.q.scan(now, d.ready)
		if pick < 0 {
			// A free slot, and every candidate's pod is busy: wait for a
			// pod to become ready, a cycle's end, or a deferred entry's
			// deadline (the scan may have started one's clock).
			d.idleSince = now
			out.WakeAt, out.WatchPods = d.q.nextDeadline(d.timeout), true
			return out
		}
		name := d.q.names[pick]
		deadline := now.Add(d.timeout)
		if since, ok := d.q.since[pick]; ok {
			// Its cycle began when the dispatcher first found its pod free
			// but not ready.
			deadline = since.Add(d.timeout)
		}
		s := Start{Index: pick, Round: pick / d.targets, Pod: name, DeferredBy: d.q.deferredBy[pick], Deadline: deadline}
		d.q.take(pick, true)
		d.q.busy[name] = true
		d.q.inFlight++
		d.lastStart, d.started = now, true
		out.Start = append(out.Start, s)
	}
}

// ready tells whether pod name is ready for its next cycle, given how its
// last cycle ended: after a cycle that ended Running it must be Running
// again (every cycle measures the same thing); one left stranded or timed
// out is deleted as it is, once it exists, so that a stuck pod does not fail
// every later cycle on it.
func (d *Dispatcher) ready(name string) bool {
	st := d.pods[name]
	if p := d.previous[name]; p == cycle.Stranded || p == cycle.TimedOut {
		return st.Present
	}
	return st.Running
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

// podNames is the plan's distinct pods, in order of first entry.
func (q *queue) podNames() []string {
	var out []string
	seen := map[string]bool{}
	for _, name := range q.names {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
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
