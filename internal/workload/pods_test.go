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
