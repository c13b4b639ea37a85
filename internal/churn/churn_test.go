package churn

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

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

// statefulSetSim recreates a deleted pod as Running, like the StatefulSet
// controller plus a kubelet, and records each pod's deletions.
type statefulSetSim struct {
	mu       sync.Mutex
	deleted  []string
	inFlight map[string]bool
	overlap  bool
}

func runningPod(name string, gen int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(fmt.Sprintf("%s-%d", name, gen))},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func TestRunConcurrentCyclesInPlanOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const pods = 6
	client := fake.NewClientset()
	for i := range pods {
		if _, err := client.CoreV1().Pods("ns").Create(ctx, runningPod(workload.PodName("web", i), 0), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sim := &statefulSetSim{inFlight: map[string]bool{}}
	w, err := client.CoreV1().Pods("ns").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gen := 0
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Deleted {
				continue
			}
			name := ev.Object.(*corev1.Pod).Name
			sim.mu.Lock()
			sim.deleted = append(sim.deleted, name)
			if sim.inFlight[name] {
				sim.overlap = true
			}
			sim.inFlight[name] = true
			gen++
			g := gen
			sim.mu.Unlock()
			// The replacement comes back a little later, as from a controller.
			go func() {
				select {
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
					return
				}
				sim.mu.Lock()
				sim.inFlight[name] = false
				sim.mu.Unlock()
				_, _ = client.CoreV1().Pods("ns").Create(ctx, runningPod(name, g), metav1.CreateOptions{})
			}()
		}
	}()
	podView, err := workload.WatchPods(ctx, client, "ns")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Namespace: "ns", Targets: targets(pods), Cycles: 40, Seed: 3, Concurrency: 4, CycleTimeout: 10 * time.Second}
	res, err := Run(ctx, client, podView, cfg)
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
		if c.Round != i/pods { // a round deletes each of the pods once
			t.Errorf("cycle %d in round %d, want %d", i, c.Round, i/pods)
		}
	}
	sim.mu.Lock()
	defer sim.mu.Unlock()
	if sim.overlap {
		t.Error("a pod was deleted again before its replacement existed")
	}
	var want []string
	for _, p := range plan {
		want = append(want, workload.PodName(p.StatefulSet, p.Ordinal))
	}
	if !slices.Equal(sim.deleted, want) {
		t.Errorf("deletions %v, want the plan's order %v", sim.deleted, want)
	}
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
