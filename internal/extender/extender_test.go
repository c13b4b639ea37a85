package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/strandlab/strandlab/internal/pinning"
)

func stsPod(set string, ordinal string) *corev1.Pod {
	yes := true
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: set + "-" + ordinal, Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: set, Controller: &yes}}}}
}

func TestKeyOf(t *testing.T) {
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns"}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want Key
		ok   bool
	}{
		{"statefulset pod", stsPod("web", "3"), Key{"ns", "web", 3}, true},
		{"set name with dashes", stsPod("my-db", "12"), Key{"ns", "my-db", 12}, true},
		{"no owner", plain, Key{}, false},
		{"name without ordinal", stsPod("web", "x"), Key{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := KeyOf(tc.pod)
			if got != tc.want || ok != tc.ok {
				t.Errorf("KeyOf = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
			if ok {
				back, ok := parseConfigMapKey("ns", got.configMapKey())
				if !ok || back != got {
					t.Errorf("ConfigMap key %q does not round-trip: %v", got.configMapKey(), back)
				}
			}
		})
	}
}

func TestFilter(t *testing.T) {
	pins := map[Key]string{{"ns", "web", 0}: "node-2", {"ns", "web", 1}: "node-9"}
	lookup := func(k Key) (string, bool) { n, ok := pins[k]; return n, ok }
	nodes := []string{"node-1", "node-2", "node-3"}
	tests := []struct {
		name       string
		pod        *corev1.Pod
		wantPassed []string
		wantFailed int
		reason     string
	}{
		{"pinned ordinal keeps only its node", stsPod("web", "0"), []string{"node-2"}, 2, "pinned to node node-2"},
		{"pinned node gone: fails everywhere, says why", stsPod("web", "1"), []string{}, 3, "node-9, which is not a candidate"},
		{"unpinned ordinal passes everywhere", stsPod("web", "2"), nodes, 0, ""},
		{"not a statefulset pod passes everywhere", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, nodes, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			passed, failed := Filter(tc.pod, nodes, lookup)
			if strings.Join(passed, ",") != strings.Join(tc.wantPassed, ",") || len(failed) != tc.wantFailed {
				t.Fatalf("passed %v failed %v", passed, failed)
			}
			for _, r := range failed {
				if !strings.Contains(r, tc.reason) {
					t.Errorf("reason %q lacks %q", r, tc.reason)
				}
			}
		})
	}
}

func filterOver(t *testing.T, h http.Handler, pod *corev1.Pod, nodes []string) extenderv1.ExtenderFilterResult {
	t.Helper()
	body, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: pod, NodeNames: &nodes})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/filter", bytes.NewReader(body)))
	var res extenderv1.ExtenderFilterResult
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
		t.Fatalf("response %q: %v", rec.Body.String(), err)
	}
	return res
}

// Sticky: the first placement is recorded in the ConfigMap and enforced
// afterwards, also by a new extender instance (a restart).
func TestStickyPinning(t *testing.T) {
	client := fake.NewClientset()
	e, err := New(pinning.Config{Sticky: true}, client)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = e.Run(ctx) }()
	nodes := []string{"node-1", "node-2", "node-3"}

	pod := stsPod("web", "0")
	if res := filterOver(t, e.Handler(), pod, nodes); len(*res.NodeNames) != 3 {
		t.Fatalf("first placement restricted: %+v", res)
	}
	pod.Spec.NodeName = "node-3"
	if _, err := client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := client.CoreV1().ConfigMaps("ns").Get(ctx, pinning.DefaultConfigMapName, metav1.GetOptions{})
		return err == nil && cm.Data["web.0"] == "node-3", nil
	}); err != nil {
		t.Fatal("first placement not recorded in the ConfigMap")
	}
	replacement := stsPod("web", "0")
	if res := filterOver(t, e.Handler(), replacement, nodes); len(*res.NodeNames) != 1 || (*res.NodeNames)[0] != "node-3" {
		t.Fatalf("replacement not pinned: %+v", res)
	}

	restarted, err := New(pinning.Config{Sticky: true}, client)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = restarted.Run(ctx) }()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		n, ok := restarted.Pinned(Key{"ns", "web", 0})
		return ok && n == "node-3", nil
	}); err != nil {
		t.Fatal("a restarted extender does not know the recorded pin")
	}
}

func TestBadRequestIsAnError(t *testing.T) {
	e, err := New(pinning.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	e.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/filter", strings.NewReader("{")))
	var res extenderv1.ExtenderFilterResult
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || !strings.Contains(res.Error, "bad filter request") {
		t.Errorf("result %+v, %v", res, err)
	}
}

// countedWatch counts the pod watches open against the fake API server.
type countedWatch struct {
	watch.Interface
	open *atomic.Int32
	once sync.Once
}

func (w *countedWatch) Stop() {
	w.once.Do(func() { w.open.Add(-1) })
	w.Interface.Stop()
}

// The pod watch runs at start (recording pods bound before the extender
// ran) and then only while an ordinal that passed the filter unpinned has
// no recorded placement: during the churn every ordinal is pinned, and
// its pods' events need not reach the extender at all.
func TestPodWatchRunsOnlyWhilePlacementsPending(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	early := stsPod("web", "0")
	early.Spec.NodeName = "node-3"
	client := fake.NewClientset(early)
	var open atomic.Int32
	client.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		open.Add(1)
		return true, &countedWatch{Interface: w, open: &open}, nil
	})
	e, err := New(pinning.Config{Sticky: true}, client)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.Run(ctx) }()
	nodes := []string{"node-1", "node-2", "node-3"}
	until := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return cond(), nil
		}); err != nil {
			t.Fatalf("never: %s (pod watches open: %d)", what, open.Load())
		}
	}
	pinnedTo := func(k Key, node string) func() bool {
		return func() bool { n, ok := e.Pinned(k); return ok && n == node }
	}

	until("the pod bound before the extender ran is pinned and the watch stops", func() bool {
		n, ok := e.Pinned(Key{"ns", "web", 0})
		return ok && n == "node-3" && open.Load() == 0
	})

	steps := []struct {
		name string
		do   func(t *testing.T)
		want func() bool
	}{
		{"an unpinned ordinal passes the filter: the watch starts", func(t *testing.T) {
			pod := stsPod("web", "1")
			pod.UID = "web-1-a"
			if res := filterOver(t, e.Handler(), pod, nodes); len(*res.NodeNames) != 3 {
				t.Fatalf("first placement restricted: %+v", res)
			}
		}, func() bool { return open.Load() == 1 }},
		{"it is bound: its placement is recorded and the watch stops", func(t *testing.T) {
			pod := stsPod("web", "1")
			pod.UID, pod.Spec.NodeName = "web-1-a", "node-2"
			if _, err := client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, func() bool { return pinnedTo(Key{"ns", "web", 1}, "node-2")() && open.Load() == 0 }},
		{"a pinned ordinal passes the filter: nothing is pending", func(t *testing.T) {
			if res := filterOver(t, e.Handler(), stsPod("web", "1"), nodes); len(*res.NodeNames) != 1 || (*res.NodeNames)[0] != "node-2" {
				t.Fatalf("replacement not pinned: %+v", res)
			}
		}, func() bool { return !e.placementsPending() && open.Load() == 0 }},
		{"an unpinned pod deleted before it is bound: the watch stops", func(t *testing.T) {
			pod := stsPod("web", "2")
			pod.UID = "web-2-a"
			filterOver(t, e.Handler(), pod, nodes)
			until("the watch starts", func() bool { return open.Load() == 1 })
			if _, err := client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := client.CoreV1().Pods("ns").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, func() bool { _, ok := e.Pinned(Key{"ns", "web", 2}); return !ok && open.Load() == 0 }},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do(t)
			until(s.name, s.want)
		})
	}
	cm, err := client.CoreV1().ConfigMaps("ns").Get(ctx, pinning.DefaultConfigMapName, metav1.GetOptions{})
	if err != nil || cm.Data["web.0"] != "node-3" || cm.Data["web.1"] != "node-2" {
		t.Fatalf("recorded pins: %v, %v", cm, err)
	}
}
