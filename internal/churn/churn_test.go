package churn

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/workload"
)

func targets(n int) []Target {
	var out []Target
	for i := range n {
		out = append(out, Target{StatefulSet: "web", Ordinal: i})
	}
	return out
}

func TestPlanIsSeeded(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		sameAs     *Config
		roundRobin bool
	}{
		{name: "random", cfg: Config{Targets: targets(5), Cycles: 50, Seed: 1}},
		{name: "round robin", cfg: Config{Targets: targets(5), Cycles: 50, Seed: 1, RoundRobin: true}, roundRobin: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := Plan(tc.cfg), Plan(tc.cfg)
			if !slices.Equal(a, b) {
				t.Fatal("same config, different plans")
			}
			other := tc.cfg
			other.Seed = 2
			if differs := !slices.Equal(a, Plan(other)); differs == tc.roundRobin {
				t.Errorf("another seed changed the plan: %v (round robin ignores the seed)", differs)
			}
			if tc.roundRobin && a[7] != tc.cfg.Targets[2] {
				t.Errorf("round robin cycle 7 = %v", a[7])
			}
			// Every round of len(targets) cycles deletes each pod once.
			n := len(tc.cfg.Targets)
			for r := 0; r+n <= len(a); r += n {
				round := slices.Clone(a[r : r+n])
				slices.SortFunc(round, func(x, y Target) int { return x.Ordinal - y.Ordinal })
				if !slices.Equal(round, tc.cfg.Targets) {
					t.Errorf("round at %d = %v, want each target once", r, a[r:r+n])
				}
			}
		})
	}
}

// fakeStatefulSets stands in for the StatefulSet controller plus the
// kubelets on a fake clientset: it recreates every deleted pod as Running at
// once, except the replacements of held pods, which wait for release. It
// records the deletions in the order the API saw them.
type fakeStatefulSets struct {
	client *fake.Clientset
	mu     sync.Mutex
	// deleted are the deletions in order, pod names.
	deleted []string
	// inFlight: deleted and not recreated yet; overlap: a pod deleted again
	// in that state.
	inFlight map[string]bool
	overlap  bool
	gen      int
	hold     map[string]bool // replacements held until release
	held     map[string]int  // held pod -> its replacement's generation
}

func runningPod(name string, gen int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(fmt.Sprintf("%s-%d", name, gen))},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func pendingPod(name string, gen int) *corev1.Pod {
	p := runningPod(name, gen)
	p.Status = corev1.PodStatus{Phase: corev1.PodPending}
	return p
}

// newFakeStatefulSets creates the targets' pods (Running, those in
// pending Pending), holds the replacements of the pods in hold, and returns
// the pod view churn.Run waits on.
func newFakeStatefulSets(ctx context.Context, t *testing.T, ts []Target, pending, hold []string) (*fakeStatefulSets, *workload.Pods) {
	t.Helper()
	f := &fakeStatefulSets{client: fake.NewClientset(), inFlight: map[string]bool{}, hold: map[string]bool{}, held: map[string]int{}}
	for _, name := range hold {
		f.hold[name] = true
	}
	for _, tg := range ts {
		name := workload.PodName(tg.StatefulSet, tg.Ordinal)
		pod := runningPod(name, 0)
		if slices.Contains(pending, name) {
			pod = pendingPod(name, 0)
		}
		if _, err := f.client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := f.client.CoreV1().Pods("ns").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Deleted {
				continue
			}
			name := ev.Object.(*corev1.Pod).Name
			f.mu.Lock()
			f.deleted = append(f.deleted, name)
			f.overlap = f.overlap || f.inFlight[name]
			f.inFlight[name] = true
			f.gen++
			g, held := f.gen, f.hold[name]
			if held {
				f.held[name] = g
			}
			f.mu.Unlock()
			if !held {
				go f.recreate(ctx, name, g)
			}
		}
	}()
	pods, err := workload.WatchPods(ctx, f.client, "ns")
	if err != nil {
		t.Fatal(err)
	}
	return f, pods
}

func (f *fakeStatefulSets) recreate(ctx context.Context, name string, gen int) {
	f.mu.Lock()
	f.inFlight[name] = false
	f.mu.Unlock()
	_, _ = f.client.CoreV1().Pods("ns").Create(ctx, runningPod(name, gen), metav1.CreateOptions{})
}

// release lets pod name become Running: its held replacement is created
// (and later ones are no longer held), or the pod itself turns Running.
func (f *fakeStatefulSets) release(ctx context.Context, t *testing.T, name string) {
	f.mu.Lock()
	f.hold[name] = false
	g, held := f.held[name]
	delete(f.held, name)
	f.mu.Unlock()
	if held {
		f.recreate(ctx, name, g)
		return
	}
	pod, err := f.client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	pod = pod.DeepCopy()
	pod.Status = runningPod(name, 0).Status
	if _, err := f.client.CoreV1().Pods("ns").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Error(err)
	}
}

func (f *fakeStatefulSets) deletions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deleted)
}

func podNames(plan []Target) []string {
	var out []string
	for _, p := range plan {
		out = append(out, workload.PodName(p.StatefulSet, p.Ordinal))
	}
	return out
}

// planIndices maps deletions (pod names, in order) to the plan entries they
// started: a pod's k-th deletion is its k-th entry in the plan.
func planIndices(t *testing.T, plan []Target, deleted []string) []int {
	t.Helper()
	entries := map[string][]int{}
	for i, name := range podNames(plan) {
		entries[name] = append(entries[name], i)
	}
	var out []int
	for _, name := range deleted {
		if len(entries[name]) == 0 {
			t.Fatalf("pod %s deleted more often than the plan says: deletions %v", name, deleted)
		}
		out = append(out, entries[name][0])
		entries[name] = entries[name][1:]
	}
	return out
}

// checkDeferrals holds a run's deletions to the dispatch rule: the entries
// that no later entry overtook were deleted in plan order, and each cycle's
// DeferredBy is the number of later entries deleted before it.
func checkDeferrals(t *testing.T, res cycle.Result, order []int) {
	t.Helper()
	pos := map[int]int{} // plan index -> position among the deletions
	for k, i := range order {
		pos[i] = k
	}
	last := -1
	for _, c := range res.Cycles {
		k, deleted := pos[c.Index]
		if !deleted {
			continue
		}
		overtaken := 0
		for _, j := range order[:k] {
			if j > c.Index {
				overtaken++
			}
		}
		if c.DeferredBy != overtaken {
			t.Errorf("cycle %d (%s): deferred by %d, but %d later entries were deleted before it", c.Index, c.Pod, c.DeferredBy, overtaken)
		}
		if overtaken == 0 {
			if k < last {
				t.Errorf("cycle %d (%s), never deferred, deleted out of plan order: %v", c.Index, c.Pod, order)
			}
			last = k
		}
	}
}

// (a) With every pod ready when its turn comes (one cycle at a time), the
// deletions are the plan, on every run.
func TestRunAllReadyFollowsThePlan(t *testing.T) {
	tests := []struct {
		name        string
		pods        int
		roundRobin  bool
		concurrency int
	}{
		{name: "one at a time, random", pods: 5, concurrency: 1},
		{name: "one at a time, round robin", pods: 5, roundRobin: true, concurrency: 1},
		// With more in flight, a pod's previous cycle may still run at its
		// turn (one slow cycle while the other slots turn over): which
		// entries are deferred then depends on timing (TestRunConcurrentCycles).
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Namespace: "ns", Targets: targets(tc.pods), Cycles: 4 * tc.pods, Seed: 7, RoundRobin: tc.roundRobin,
				Concurrency: tc.concurrency, CycleTimeout: time.Minute}
			want := podNames(Plan(cfg))
			for run := range 2 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				f, pods := newFakeStatefulSets(ctx, t, cfg.Targets, nil, nil)
				res, err := Run(ctx, f.client, pods, cfg)
				cancel()
				if err != nil || res.Interrupted || len(res.Cycles) != cfg.Cycles {
					t.Fatalf("run %d: err %v, interrupted %v, %d of %d cycles", run, err, res.Interrupted, len(res.Cycles), cfg.Cycles)
				}
				if got := f.deletions(); !slices.Equal(got, want) {
					t.Errorf("run %d: deletions %v, want the plan %v", run, got, want)
				}
				for _, c := range res.Cycles {
					if c.Outcome != cycle.Running || c.DeferredBy != 0 {
						t.Errorf("run %d: cycle %d %s, deferred by %d; want running, not deferred", run, c.Index, c.Outcome, c.DeferredBy)
					}
				}
				if res.BusyWait != 0 {
					t.Errorf("run %d: waited %v on busy pods, want none", run, res.BusyWait)
				}
			}
		})
	}
}

// stuckCase is a run with one pod that stays busy until every other cycle
// of the plan has ended.
type stuckCase struct {
	name        string
	concurrency int
	// notReady: the pod is not Running before its first cycle; otherwise
	// its first cycle's replacement is held.
	notReady bool
}

// The cases of TestRunStuckPodDoesNotStallTheOthers; the first two let the
// others go one at a time.

// runStuck runs c on 4 pods for 3 rounds with the pod of the plan's first
// entry stuck, a cycle timeout of an hour and a test deadline of 20 s: the
// stuck pod is released only once every other cycle has ended (seen from
// OnProgress), so a churn that waits for it never gets there. It returns the
// result, the plan, the stuck pod and the deletions in order.
func runStuck(t *testing.T, c stuckCase, seed int64) (cycle.Result, []Target, string, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{Namespace: "ns", Targets: targets(4), Cycles: 12, Seed: seed, Concurrency: c.concurrency, CycleTimeout: time.Hour,
		Progress: io.Discard, ProgressEvery: 5 * time.Millisecond}
	plan := Plan(cfg)
	stuck := podNames(plan)[0]
	var pending, hold []string
	if c.notReady {
		pending = []string{stuck}
	} else {
		hold = []string{stuck}
	}
	f, pods := newFakeStatefulSets(ctx, t, cfg.Targets, pending, hold)
	others := cfg.Cycles - cfg.Cycles/len(cfg.Targets)
	var once sync.Once
	otherDone := 0
	cfg.OnProgress = func(r cycle.Result) {
		n := 0
		for _, cy := range r.Cycles {
			if cy.Pod != stuck {
				n++
			}
		}
		if otherDone = n; n == others {
			// Every other cycle ended while the stuck pod was busy.
			once.Do(func() { f.release(ctx, t, stuck) })
		}
	}
	res, err := Run(ctx, f.client, pods, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil || res.Interrupted {
		t.Fatalf("the churn stalled behind %s: %d of the %d other cycles ended before the test deadline; deletions %v",
			stuck, otherDone, others, f.deletions())
	}
	if len(res.Cycles) != cfg.Cycles {
		t.Fatalf("%d cycles, want %d", len(res.Cycles), cfg.Cycles)
	}
	return res, plan, stuck, dispatched(t, res, f)
}

// dispatched is the run's deletions in the order the dispatcher started
// them (their cycles' DeletedAt): the dispatch rule's order. The deletes
// themselves run concurrently, so the API may apply two started together
// in either order; it must have applied each one.
func dispatched(t *testing.T, res cycle.Result, f *fakeStatefulSets) []string {
	t.Helper()
	started := slices.Clone(res.Cycles)
	started = slices.DeleteFunc(started, func(c cycle.Cycle) bool { return c.DeletedAt.IsZero() })
	slices.SortStableFunc(started, func(a, b cycle.Cycle) int { return a.DeletedAt.Compare(b.DeletedAt) })
	var out []string
	for _, c := range started {
		out = append(out, c.Pod)
	}
	applied := f.deletions()
	if !slices.Equal(slices.Sorted(slices.Values(out)), slices.Sorted(slices.Values(applied))) {
		t.Fatalf("cycles started deletions of %v, the API applied %v", out, applied)
	}
	return out
}

// (b) A pod that is not ready for its next cycle (its last replacement not
// Running, or not Running from the start) holds back only its own cycles:
// every other cycle ends while it is stuck.
func TestRunStuckPodDoesNotStallTheOthers(t *testing.T) {
	tests := []stuckCase{
		{name: "replacement never Running, three in flight", concurrency: 3},
		{name: "replacement never Running, two in flight", concurrency: 2},
		{name: "pod not Running before its first cycle, one at a time", concurrency: 1, notReady: true},
		{name: "pod not Running before its first cycle, three in flight", concurrency: 3, notReady: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, plan, stuck, deleted := runStuck(t, tc, 5)
			names := podNames(plan)
			// The stuck pod's entries from its first stuck one on are
			// deferred: they go last, each overtaken by every later entry of
			// the other pods.
			stuckFrom := 1 // the held replacement: its first cycle went in order
			if tc.notReady {
				stuckFrom = 0
			}
			var want []int
			deferred := map[int]bool{}
			k := 0
			for i, name := range names {
				if name == stuck {
					if k >= stuckFrom {
						deferred[i] = true
					}
					k++
				}
			}
			for i := range names {
				if !deferred[i] {
					want = append(want, i)
				}
			}
			for i := range names {
				if deferred[i] {
					want = append(want, i)
				}
			}
			order := planIndices(t, plan, deleted)
			// The others went one at a time (one slot, or two with the
			// stuck cycle in the other): none of them was ever busy at its
			// turn, so the order is exact. With more in flight, another
			// pod may be busy at its turn too (checkDeferrals).
			exact := tc.concurrency == 1 || (tc.concurrency == 2 && !tc.notReady)
			if tail := want[len(want)-len(deferred):]; exact && !slices.Equal(order, want) ||
				!slices.Equal(order[len(order)-len(deferred):], tail) {
				t.Errorf("deleted plan entries %v, want %v (plan %v, %s stuck)", order, want, names, stuck)
			}
			for _, c := range res.Cycles {
				if c.Outcome != cycle.Running {
					t.Errorf("cycle %d (%s) %s: %s", c.Index, c.Pod, c.Outcome, c.Error)
				}
				if !deferred[c.Index] {
					continue
				}
				wantBy := 0
				for j := c.Index + 1; j < len(names); j++ {
					wantBy += bool2int(!deferred[j])
				}
				if c.DeferredBy != wantBy {
					t.Errorf("cycle %d (%s) deferred by %d, want %d", c.Index, c.Pod, c.DeferredBy, wantBy)
				}
			}
			checkDeferrals(t, res, order)
			if res.BusyWait <= 0 {
				t.Errorf("waited %v on busy pods, want the time the others were done and %s was not", res.BusyWait, stuck)
			}
		})
	}
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// (c) With a stuck pod the deletions are the plan minus the deferred
// entries, and the same on every run with the same seed.
func TestRunDeferredOrderIsDeterministic(t *testing.T) {
	tests := []struct {
		stuckCase
		seed int64
	}{
		{stuckCase{name: "held replacement, seed 1", concurrency: 2}, 1},
		{stuckCase{name: "held replacement, seed 9", concurrency: 2}, 9},
		{stuckCase{name: "not Running at first, seed 4", concurrency: 1, notReady: true}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var first []string
			for run := range 2 {
				res, plan, stuck, deleted := runStuck(t, tc.stuckCase, tc.seed)
				order := planIndices(t, plan, deleted)
				checkDeferrals(t, res, order)
				// Among the ready pods, the plan's order.
				var others, want []string
				for _, name := range deleted {
					if name != stuck {
						others = append(others, name)
					}
				}
				for _, name := range podNames(plan) {
					if name != stuck {
						want = append(want, name)
					}
				}
				if !slices.Equal(others, want) {
					t.Errorf("run %d: deletions of the ready pods %v, want the plan's %v", run, others, want)
				}
				if run == 0 {
					first = deleted
				} else if !slices.Equal(deleted, first) {
					t.Errorf("same seed, different deletions: %v, then %v", first, deleted)
				}
			}
		})
	}
}

// A pod not ready for a cycle within the cycle timeout ends that cycle as
// timed out, without a delete and without holding back the others; its next
// cycle deletes it as it is.
func TestRunNotReadyPodTimesOutAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := Config{Namespace: "ns", Targets: targets(3), Cycles: 6, Seed: 2, Concurrency: 1, CycleTimeout: 2 * time.Second}
	plan := Plan(cfg)
	stuck := podNames(plan)[0]
	f, pods := newFakeStatefulSets(ctx, t, cfg.Targets, []string{stuck}, nil)
	res, err := Run(ctx, f.client, pods, cfg)
	if err != nil || res.Interrupted || len(res.Cycles) != cfg.Cycles {
		t.Fatalf("err %v, interrupted %v, %d of %d cycles", err, res.Interrupted, len(res.Cycles), cfg.Cycles)
	}
	firstStuck := true
	for _, c := range res.Cycles {
		switch {
		case c.Pod == stuck && firstStuck:
			firstStuck = false
			if c.Outcome != cycle.TimedOut || !c.DeletedAt.IsZero() || !strings.Contains(c.Error, "not ready for a cycle") {
				t.Errorf("cycle %d (%s): %s, deleted at %v, %q; want timed out, not ready, no delete", c.Index, c.Pod, c.Outcome, c.DeletedAt, c.Error)
			}
		case c.Outcome != cycle.Running:
			t.Errorf("cycle %d (%s): %s (%s), want running", c.Index, c.Pod, c.Outcome, c.Error)
		}
	}
	deleted := f.deletions()
	if n := len(deleted); n != cfg.Cycles-1 {
		t.Errorf("%d deletions %v, want %d (all but the timed-out cycle)", n, deleted, cfg.Cycles-1)
	}
	checkDeferrals(t, res, planIndices(t, plan, deleted))
}

// A pod's cycles never overlap, and with several in flight the deletions
// follow the dispatch rule.
func TestRunConcurrentCycles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := Config{Namespace: "ns", Targets: targets(6), Cycles: 40, Seed: 3, Concurrency: 4, CycleTimeout: 10 * time.Second}
	f, pods := newFakeStatefulSets(ctx, t, cfg.Targets, nil, nil)
	res, err := Run(ctx, f.client, pods, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cycles) != cfg.Cycles || res.Interrupted {
		t.Fatalf("%d cycles (interrupted %v), want %d", len(res.Cycles), res.Interrupted, cfg.Cycles)
	}
	plan := Plan(cfg)
	for i, c := range res.Cycles {
		if c.Index != i || c.Outcome != cycle.Running || c.Pod != workload.PodName(plan[i].StatefulSet, plan[i].Ordinal) {
			t.Errorf("cycle %d = %+v, want pod %v Running", i, c, plan[i])
		}
		if c.Round != i/6 { // a round deletes each of the pods once
			t.Errorf("cycle %d in round %d, want %d", i, c.Round, i/6)
		}
	}
	f.mu.Lock()
	overlap := f.overlap
	f.mu.Unlock()
	if overlap {
		t.Error("a pod was deleted again before its replacement existed")
	}
	checkDeferrals(t, res, planIndices(t, plan, dispatched(t, res, f)))
}

// slowDeletes makes every pod delete wait until `want` deletes are in
// progress together (or a second has passed), and records the most seen.
type slowDeletes struct {
	kubernetes.Interface
	want int

	mu         sync.Mutex
	inProgress int
	most       int
	all        chan struct{} // closed when want are in progress
}

type slowDeletesCore struct {
	typedcorev1.CoreV1Interface
	s *slowDeletes
}

type slowDeletesPods struct {
	typedcorev1.PodInterface
	s *slowDeletes
}

func (s *slowDeletes) CoreV1() typedcorev1.CoreV1Interface {
	return slowDeletesCore{s.Interface.CoreV1(), s}
}

func (c slowDeletesCore) Pods(ns string) typedcorev1.PodInterface {
	return slowDeletesPods{c.CoreV1Interface.Pods(ns), c.s}
}

func (p slowDeletesPods) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	s := p.s
	s.mu.Lock()
	s.inProgress++
	s.most = max(s.most, s.inProgress)
	if s.inProgress == s.want {
		close(s.all)
	}
	s.mu.Unlock()
	t := time.NewTimer(time.Second)
	select {
	case <-s.all:
	case <-t.C:
	}
	t.Stop()
	err := p.PodInterface.Delete(ctx, name, opts)
	s.mu.Lock()
	s.inProgress--
	s.mu.Unlock()
	return err
}

// The dispatcher does not wait for a delete's response before it starts the
// next cycle: with four slots, four deletes are in progress together. (It
// did wait once, which capped the churn at one cycle per API round trip.)
func TestRunDeletesDoNotWaitForEachOther(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := Config{Namespace: "ns", Targets: targets(4), Cycles: 4, Seed: 1, Concurrency: 4, CycleTimeout: 10 * time.Second}
	f, pods := newFakeStatefulSets(ctx, t, cfg.Targets, nil, nil)
	slow := &slowDeletes{Interface: f.client, want: cfg.Concurrency, all: make(chan struct{})}
	res, err := Run(ctx, slow, pods, cfg)
	if err != nil || len(res.Cycles) != cfg.Cycles {
		t.Fatalf("err %v, %d of %d cycles", err, len(res.Cycles), cfg.Cycles)
	}
	for _, c := range res.Cycles {
		if c.Outcome != cycle.Running {
			t.Errorf("cycle %d (%s): %s %s", c.Index, c.Pod, c.Outcome, c.Error)
		}
	}
	if slow.most != cfg.Concurrency {
		t.Errorf("at most %d deletes in progress together, want %d (one per free slot)", slow.most, cfg.Concurrency)
	}
	checkDeferrals(t, res, planIndices(t, Plan(cfg), dispatched(t, res, f)))
}

func TestRunInterruptedKeepsFinishedCycles(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(runningPod("web-0", 0))
	podView, err := workload.WatchPods(ctx, client, "ns")
	if err != nil {
		t.Fatal(err)
	}
	// Nobody recreates the pod: the first cycle waits until the cancel.
	done := make(chan cycle.Result)
	go func() {
		res, err := Run(ctx, client, podView, Config{Namespace: "ns", Targets: targets(1), Cycles: 3, CycleTimeout: time.Minute})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	if err := podView.WaitFor(ctx, func(p *workload.Pods) bool { return p.Get("web-0") == nil }); err != nil {
		t.Fatal(err)
	}
	cancel()
	res := <-done
	if !res.Interrupted || len(res.Cycles) != 0 {
		t.Errorf("interrupted %v with %d cycles, want interrupted with none", res.Interrupted, len(res.Cycles))
	}
}
