package workload

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// A version's time is when it reached the harness, so it is never later than
// a read of the cache that sees it: a timeline's cause never follows the
// detector's finding made from that read.
func TestSeenAtPrecedesEveryReadThatSeesTheVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := fake.NewClientset()
	pods, err := WatchPods(ctx, client, "ns")
	if err != nil {
		t.Fatal(err)
	}
	for i, node := range []string{"", "n1"} {
		before := time.Now()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", UID: "u1"}, Spec: corev1.PodSpec{NodeName: node}}
		if i == 0 {
			_, err = client.CoreV1().Pods("ns").Create(ctx, p, metav1.CreateOptions{})
		} else {
			_, err = client.CoreV1().Pods("ns").Update(ctx, p, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		var cached *corev1.Pod
		for cached == nil || cached.Spec.NodeName != node {
			if ctx.Err() != nil {
				t.Fatalf("pod with node %q never reached the cache", node)
			}
			cached = pods.Get("web-0")
			time.Sleep(time.Millisecond)
		}
		read := time.Now()
		if seen := SeenAt(cached); seen.Before(before) || seen.After(read) {
			t.Errorf("version %d: SeenAt %v, want within [%v, %v] (sent, read from the cache)", i, seen, before, read)
		}
	}
}

func TestSeenAt(t *testing.T) {
	stamped, err := StampSeen(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	// The clock moves on: a stamp is the time of the stamping, not of the
	// reading.
	for start := time.Now(); !time.Now().After(start); {
	}
	before := time.Now()
	tests := []struct {
		name string
		obj  any
		now  bool // SeenAt is the time of the call
	}{
		{"stamped", stamped, false},
		{"not stamped", &corev1.Node{}, true},
		{"a tombstone of a stamped object: learnt of now", cache.DeletedFinalStateUnknown{Key: "n1", Obj: stamped}, true},
		{"not an object", "n1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SeenAt(tt.obj)
			if tt.now && got.Before(before) {
				t.Errorf("SeenAt = %v, want now (not before %v)", got, before)
			}
			if !tt.now && !got.Before(before) {
				t.Errorf("SeenAt = %v, want the stamp, before %v", got, before)
			}
		})
	}
	if _, err := StampSeen("n1"); err != nil {
		t.Errorf("StampSeen of a non-object: %v, want it passed through", err)
	}
}
