package workload

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
)

func TestWaitForPodWakesOnItsOwnPodsEventsOnly(t *testing.T) {
	tests := []struct {
		name         string
		otherUpdates int // events of another pod while waiting
	}{
		{"no other events", 0},
		{"another pod's events", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pod := func(name string, phase corev1.PodPhase, gen int) *corev1.Pod {
				return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"gen": string(rune('a' + gen))}},
					Status: corev1.PodStatus{Phase: phase}}
			}
			client := fake.NewClientset(pod("web-0", corev1.PodPending, 0), pod("web-1", corev1.PodPending, 0))
			pods, err := WatchPods(ctx, client, "ns")
			if err != nil {
				t.Fatal(err)
			}
			var evaluations atomic.Int32
			done := make(chan error, 1)
			go func() {
				done <- pods.WaitForPod(ctx, "web-0", func(p *corev1.Pod) bool {
					evaluations.Add(1)
					return p != nil && p.Status.Phase == corev1.PodRunning
				})
			}()
			// The waiter has made its channel once it has evaluated cond.
			for evaluations.Load() == 0 {
				if ctx.Err() != nil {
					t.Fatal("WaitForPod never evaluated its condition")
				}
				time.Sleep(time.Millisecond)
			}
			for i := 1; i <= tt.otherUpdates; i++ {
				if _, err := client.CoreV1().Pods("ns").Update(ctx, pod("web-1", corev1.PodPending, i), metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			// The informer hands one handler its events in order: web-1's
			// are handled before this one.
			if _, err := client.CoreV1().Pods("ns").Update(ctx, pod("web-0", corev1.PodRunning, 1), metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("WaitForPod: %v", err)
			}
			if got := evaluations.Load(); got != 2 {
				t.Errorf("condition evaluated %d times, want 2 (at start, then on web-0's event; web-1's %d events must not wake it)", got, tt.otherUpdates)
			}
			if pods.Lister() == nil || pods.Informer() == nil {
				t.Fatal("no shared informer")
			}
			if l, _ := pods.Lister().List(labels.Everything()); len(l) != 2 {
				t.Errorf("Lister lists %d pods, want 2", len(l))
			}
		})
	}
}

func TestBoundSeenIsTheFirstSightingOnANode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	unbound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", UID: "u1"}}
	bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", UID: "u2"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	client := fake.NewClientset(unbound, bound)
	pods, err := WatchPods(ctx, client, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if got := pods.BoundSeen("u1"); !got.IsZero() {
		t.Errorf("unbound pod: BoundSeen = %v, want zero", got)
	}
	if pods.BoundSeen("u2").IsZero() || pods.BoundSeen("u2").Before(pods.FirstSeen("u2")) {
		t.Errorf("pod listed bound: BoundSeen %v, FirstSeen %v; want set, not before", pods.BoundSeen("u2"), pods.FirstSeen("u2"))
	}

	update := func(p *corev1.Pod) {
		t.Helper()
		if _, err := client.CoreV1().Pods("ns").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scheduled := unbound.DeepCopy()
	scheduled.Spec.NodeName = "n2"
	update(scheduled)
	if err := pods.WaitForPod(ctx, "web-0", func(p *corev1.Pod) bool { return p != nil && p.Spec.NodeName == "n2" }); err != nil {
		t.Fatal(err)
	}
	first := pods.BoundSeen("u1")
	if first.IsZero() || first.Before(pods.FirstSeen("u1")) {
		t.Fatalf("after binding: BoundSeen %v, FirstSeen %v; want set, not before", first, pods.FirstSeen("u1"))
	}
	running := scheduled.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	update(running)
	if err := pods.WaitForPod(ctx, "web-0", func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodRunning }); err != nil {
		t.Fatal(err)
	}
	if got := pods.BoundSeen("u1"); !got.Equal(first) {
		t.Errorf("a later update moved BoundSeen from %v to %v", first, got)
	}

	if err := client.CoreV1().Pods("ns").Delete(ctx, "web-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.WaitForPod(ctx, "web-0", func(p *corev1.Pod) bool { return p == nil }); err != nil {
		t.Fatal(err)
	}
	if got := pods.BoundSeen("u1"); !got.IsZero() {
		t.Errorf("deleted pod: BoundSeen = %v, want zero (forgotten)", got)
	}
}
