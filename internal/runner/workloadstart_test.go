package runner

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/strandlab/strandlab/internal/workload"
)

func TestWaitWorkloadRunning(t *testing.T) {
	pod := func(name string, running bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
		if running {
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		// start: the pods' states at first; later: pods that become
		// Running after the wait began, one every 50 ms.
		start   []*corev1.Pod
		later   []string
		wantErr string
	}{
		{name: "already running", start: []*corev1.Pod{pod("web-0", true), pod("web-1", true)}},
		{name: "pods start while waiting, each within the stall", start: []*corev1.Pod{pod("web-0", false), pod("web-1", false), pod("web-2", false)},
			later: []string{"web-0", "web-1", "web-2"}},
		{name: "one pod never starts", start: []*corev1.Pod{pod("web-0", true), pod("web-1", false), pod("web-2", false)},
			later: []string{"web-2"}, wantErr: "workload: 2 of 3 pods Running, none more for 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			client := fake.NewClientset()
			var names []string
			for _, p := range tc.start {
				names = append(names, p.Name)
				if _, err := client.CoreV1().Pods(Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			pods, err := workload.WatchPods(ctx, client, Namespace)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for _, name := range tc.later {
					select {
					case <-ctx.Done():
						return
					case <-time.After(50 * time.Millisecond):
					}
					_, _ = client.CoreV1().Pods(Namespace).UpdateStatus(ctx, pod(name, true), metav1.UpdateOptions{})
				}
			}()
			var progress bytes.Buffer
			took, err := waitWorkloadRunning(ctx, pods, names, &progress, 300*time.Millisecond)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			case tc.wantErr != "" && took < 300*time.Millisecond:
				t.Errorf("gave up after %v, before the stall of 300ms", took)
			}
			if !strings.HasPrefix(progress.String(), ">> waiting for ") {
				t.Errorf("progress = %q", progress.String())
			}
			for _, name := range names {
				if tc.wantErr == "" && !workload.IsRunning(pods.Get(name)) {
					t.Errorf("returned while %s is not Running", name)
				}
			}
		})
	}
}

func TestWaitWorkloadRunningEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: Namespace}})
	pods, err := workload.WatchPods(ctx, client, Namespace)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := waitWorkloadRunning(ctx, pods, []string{"web-0"}, &bytes.Buffer{}, time.Hour); err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
