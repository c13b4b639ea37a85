package churn

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/workload"
)

// The dispatcher's tests are scripts: a plan, then steps of (logical time,
// events) and the actions each step must answer, rendered as one line:
//
//	start 3:web-0+1   start plan entry 3 (pod web-0), deferred by 1 later entry
//	timeout 0:web-0+2 entry 0 ended timed out without a delete, deferred by 2
//	wake 2s           step again at 2 s unless something happens first
//	watch             step again on pod changes
//	done              every entry started or ended
//
// No timer runs: they take milliseconds.

func running(pod string) Event {
	return PodChanged{Pod: pod, State: PodState{Present: true, Running: true}}
}
func pending(pod string) Event { return PodChanged{Pod: pod, State: PodState{Present: true}} }
func gone(pod string) Event    { return PodChanged{Pod: pod} }
func ended(i int, o cycle.Outcome) Event {
	return CycleEnded{Index: i, Outcome: o}
}

// allRunning: every pod of web-0..web-(n-1) Running.
func allRunning(n int) []Event {
	var evs []Event
	for i := range n {
		evs = append(evs, running(workload.PodName("web", i)))
	}
	return evs
}

type step struct {
	at     time.Duration // logical time since the run's start
	events []Event
	want   string
}

// render is the one-line form of a step's actions (times since t0).
func render(a Actions, t0 time.Time) string {
	var parts []string
	entries := func(verb string, ss []Start) {
		if len(ss) == 0 {
			return
		}
		var e []string
		for _, s := range ss {
			x := fmt.Sprintf("%d:%s", s.Index, s.Pod)
			if s.DeferredBy > 0 {
				x += fmt.Sprintf("+%d", s.DeferredBy)
			}
			e = append(e, x)
		}
		parts = append(parts, verb+" "+strings.Join(e, " "))
	}
	entries("timeout", a.TimedOut)
	entries("start", a.Start)
	if !a.WakeAt.IsZero() {
		parts = append(parts, "wake "+a.WakeAt.Sub(t0).String())
	}
	if a.WatchPods {
		parts = append(parts, "watch")
	}
	if a.Done {
		parts = append(parts, "done")
	}
	return strings.Join(parts, "; ")
}

func TestDispatcherScripts(t *testing.T) {
	rr := func(pods, cycles, concurrency int) Config {
		return Config{Targets: targets(pods), Cycles: cycles, RoundRobin: true, Concurrency: concurrency, CycleTimeout: 2 * time.Second}
	}
	tests := []struct {
		name     string
		cfg      Config
		steps    []step
		busyWait time.Duration
	}{{
		name: "all ready, one at a time: the plan, in order",
		cfg:  rr(3, 4, 1),
		steps: []step{
			{0, allRunning(3), "start 0:web-0"},
			{100 * time.Millisecond, []Event{pending("web-0")}, ""}, // its replacement: the slot is full anyway
			{time.Second, []Event{running("web-0"), ended(0, cycle.Running)}, "start 1:web-1"},
			{2 * time.Second, []Event{ended(1, cycle.Running)}, "start 2:web-2"},
			{3 * time.Second, []Event{ended(2, cycle.Running)}, "start 3:web-0; done"},
		},
	}, {
		name: "two slots fill at once",
		cfg:  rr(3, 3, 2),
		steps: []step{
			{0, allRunning(3), "start 0:web-0 1:web-1"},
			{time.Second, []Event{ended(1, cycle.Running)}, "start 2:web-2; done"},
		},
	}, {
		name: "a busy pod's entry is deferred and goes first once its pod is free",
		cfg:  rr(2, 4, 2),
		steps: []step{
			{0, allRunning(2), "start 0:web-0 1:web-1"},
			// web-1 is back; entry 2 (web-0) waits behind its cycle, entry
			// 3 (web-1) overtakes it.
			{time.Second, []Event{ended(1, cycle.Running)}, "start 3:web-1"},
			{2 * time.Second, []Event{ended(0, cycle.Running)}, "start 2:web-0+1; done"},
		},
	}, {
		name: "a free slot with every candidate busy watches the pods, and counts the wait",
		cfg:  rr(2, 4, 2),
		steps: []step{
			{0, allRunning(2), "start 0:web-0 1:web-1"},
			{time.Second, []Event{pending("web-0"), ended(0, cycle.Running)}, "wake 3s; watch"}, // web-0's clock starts at 1 s
			{1500 * time.Millisecond, []Event{running("web-0")}, "start 2:web-0"},
			{2 * time.Second, []Event{pending("web-1"), ended(1, cycle.Running)}, "wake 4s; watch"},
			{2500 * time.Millisecond, []Event{running("web-1")}, "start 3:web-1; done"},
		},
		busyWait: time.Second, // 1 s to 1.5 s, and 2 s to 2.5 s
	}, {
		name: "a pod not ready within the cycle timeout times out alone, then is deleted as it is",
		cfg:  rr(3, 4, 1),
		steps: []step{
			{0, []Event{pending("web-0"), running("web-1"), running("web-2")}, "start 1:web-1; wake 2s"},
			{500 * time.Millisecond, []Event{ended(1, cycle.Running)}, "start 2:web-2; wake 2s"},
			{2 * time.Second, nil, "timeout 0:web-0+2"},
			// Timed out: present is enough for its next cycle.
			{2500 * time.Millisecond, []Event{ended(2, cycle.Running)}, "start 3:web-0; done"},
		},
	}, {
		name: "a stranded pod is deleted as it is, once it exists",
		cfg:  rr(1, 3, 1),
		steps: []step{
			{0, allRunning(1), "start 0:web-0"},
			{time.Second, []Event{gone("web-0"), ended(0, cycle.Stranded)}, "wake 3s; watch"},
			{1200 * time.Millisecond, []Event{pending("web-0")}, "start 1:web-0"},
			// Ended Running, so the next cycle waits for Running again.
			{1500 * time.Millisecond, []Event{pending("web-0"), ended(1, cycle.Running)}, "wake 3.5s; watch"},
			{1600 * time.Millisecond, []Event{running("web-0")}, "start 2:web-0; done"},
		},
		busyWait: 300 * time.Millisecond, // 1 s to 1.2 s, and 1.5 s to 1.6 s
	}, {
		name: "pacing spaces the deletions",
		cfg:  Config{Targets: targets(3), Cycles: 3, RoundRobin: true, Concurrency: 3, CycleTimeout: time.Minute, Interval: time.Second},
		steps: []step{
			{0, allRunning(3), "start 0:web-0; wake 1s"},
			{400 * time.Millisecond, []Event{ended(0, cycle.Running)}, "wake 1s"},
			{time.Second, nil, "start 1:web-1; wake 2s"},
			{2 * time.Second, nil, "start 2:web-2; done"},
		},
	}, {
		name: "a cycle end for an entry not in flight changes nothing",
		cfg:  rr(2, 2, 1),
		steps: []step{
			{0, allRunning(2), "start 0:web-0"},
			{time.Second, []Event{ended(1, cycle.Running)}, ""},
			{2 * time.Second, []Event{ended(0, cycle.Running)}, "start 1:web-1; done"},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
			d := NewDispatcher(tc.cfg, Plan(tc.cfg))
			for k, s := range tc.steps {
				if got := render(d.Step(t0.Add(s.at), s.events...), t0); got != s.want {
					t.Fatalf("step %d at %v: %q, want %q", k, s.at, got, s.want)
				}
			}
			if got := d.BusyWait(); got != tc.busyWait {
				t.Errorf("busy wait %v, want %v", got, tc.busyWait)
			}
		})
	}
}

// A started cycle's deadline is a cycle timeout from its start, or from when
// the dispatcher first found its pod free but not ready.
func TestDispatcherDeadlines(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	cfg := Config{Targets: targets(1), Cycles: 2, Concurrency: 1, CycleTimeout: 10 * time.Second}
	d := NewDispatcher(cfg, Plan(cfg))
	if a := d.Step(t0.Add(time.Second), allRunning(1)...); len(a.Start) != 1 || !a.Start[0].Deadline.Equal(t0.Add(11*time.Second)) {
		t.Fatalf("first start %+v, want deadline at 11 s", a.Start)
	}
	d.Step(t0.Add(3*time.Second), pending("web-0"), ended(0, cycle.Running)) // its clock starts at 3 s
	if a := d.Step(t0.Add(5*time.Second), running("web-0")); len(a.Start) != 1 || !a.Start[0].Deadline.Equal(t0.Add(13*time.Second)) {
		t.Fatalf("deferred start %+v, want deadline at 13 s", a.Start)
	}
}

// Random schedules against the dispatch rule's invariants, as a simulation:
// every entry starts or times out once; a pod never has two cycles in
// flight; never more than the concurrency in flight; the entries no later
// entry overtook start in plan order; DeferredBy counts the later entries
// started before; the same schedule gives the same actions.
func TestDispatcherInvariantsOnRandomSchedules(t *testing.T) {
	for seed := range uint64(500) {
		trace1 := simulate(t, seed)
		if trace2 := simulate(t, seed); trace1 != trace2 {
			t.Fatalf("seed %d: same schedule, different actions:\n%s\n%s", seed, trace1, trace2)
		}
	}
}

// simulate runs one random schedule (pods, concurrency, outcomes, readiness
// from the seed) to the end and returns the actions, rendered.
func simulate(t *testing.T, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	pods := 1 + rng.IntN(5)
	cfg := Config{Targets: targets(pods), Cycles: 1 + rng.IntN(20), Seed: int64(seed), Concurrency: 1 + rng.IntN(4),
		CycleTimeout: time.Duration(1+rng.IntN(5)) * time.Second}
	plan := Plan(cfg)
	names := podNames(plan)
	d := NewDispatcher(cfg, plan)
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	now := t0
	var trace strings.Builder
	inFlight := map[string]int{} // pod -> entry
	var order []int              // entries in start order
	deferredBy := map[int]int{}
	resolved := map[int]string{}
	evs := allRunning(pods)
	for step := 0; step < 10_000; step++ {
		a := d.Step(now, evs...)
		fmt.Fprintf(&trace, "%v %s\n", now.Sub(t0), render(a, t0))
		evs = nil
		for _, s := range a.TimedOut {
			if resolved[s.Index] != "" {
				t.Fatalf("seed %d: entry %d timed out after it %s", seed, s.Index, resolved[s.Index])
			}
			resolved[s.Index] = "timed out"
		}
		for _, s := range a.Start {
			if resolved[s.Index] != "" {
				t.Fatalf("seed %d: entry %d started after it %s", seed, s.Index, resolved[s.Index])
			}
			if names[s.Index] != s.Pod {
				t.Fatalf("seed %d: entry %d started %s, plan says %s", seed, s.Index, s.Pod, names[s.Index])
			}
			if j, busy := inFlight[s.Pod]; busy {
				t.Fatalf("seed %d: entry %d started %s while entry %d was in flight on it", seed, s.Index, s.Pod, j)
			}
			resolved[s.Index] = "started"
			inFlight[s.Pod] = s.Index
			order = append(order, s.Index)
			deferredBy[s.Index] = s.DeferredBy
		}
		if len(inFlight) > cfg.Concurrency {
			t.Fatalf("seed %d: %d cycles in flight, concurrency %d", seed, len(inFlight), cfg.Concurrency)
		}
		if a.Done && len(inFlight) == 0 {
			break
		}
		// Something happens: a cycle ends (the pod comes back Running, or
		// not), a pod changes, or time passes.
		now = now.Add(time.Duration(1+rng.IntN(1500)) * time.Millisecond)
		pod := names[rng.IntN(len(names))]
		switch r := rng.IntN(10); {
		case r < 5 && len(inFlight) > 0:
			busy := slices.Sorted(maps.Keys(inFlight))
			p := busy[rng.IntN(len(busy))]
			outcome := []cycle.Outcome{cycle.Running, cycle.Running, cycle.Running, cycle.Stranded, cycle.TimedOut}[rng.IntN(5)]
			st := running(p)
			if outcome != cycle.Running {
				st = []Event{pending(p), gone(p)}[rng.IntN(2)]
			}
			evs = append(evs, st, ended(inFlight[p], outcome))
			delete(inFlight, p)
		case r < 8:
			evs = append(evs, []Event{running(pod), pending(pod), gone(pod)}[rng.IntN(3)])
		}
	}
	if len(resolved) != len(plan) {
		t.Fatalf("seed %d: %d of %d entries started or timed out\n%s", seed, len(resolved), len(plan), trace.String())
	}
	// A pod's entries start in plan order.
	lastOf := map[string]int{}
	for _, i := range order {
		if j, ok := lastOf[names[i]]; ok && j > i {
			t.Fatalf("seed %d: %s's entry %d started after its entry %d\n%s", seed, names[i], i, j, trace.String())
		}
		lastOf[names[i]] = i
	}
	// The entries no later one overtook go in plan order; DeferredBy counts
	// the later entries started before.
	last := -1
	for k, i := range order {
		overtaken := 0
		for _, j := range order[:k] {
			if j > i {
				overtaken++
			}
		}
		if deferredBy[i] != overtaken {
			t.Fatalf("seed %d: entry %d deferred by %d, but %d later entries started before it\n%s", seed, i, deferredBy[i], overtaken, trace.String())
		}
		if overtaken == 0 {
			if i < last {
				t.Fatalf("seed %d: entry %d, never overtaken, started after entry %d\n%s", seed, i, last, trace.String())
			}
			last = i
		}
	}
	return trace.String()
}
