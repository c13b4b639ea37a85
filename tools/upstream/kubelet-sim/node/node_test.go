package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// gateVolumes is a volume manager whose mounts complete only when released.
type gateVolumes struct {
	release   chan struct{}
	unmounted atomic.Int32
	waits     atomic.Int32

	mu sync.Mutex
	// calls lists "admit <uid>" and "terminating <uid>" in order.
	calls []string
}

func (g *gateVolumes) AdmitPod(pod *corev1.Pod)     { g.record("admit " + string(pod.UID)) }
func (g *gateVolumes) PodTerminating(uid types.UID) { g.record("terminating " + string(uid)) }
func (g *gateVolumes) PodTerminated(uid types.UID)  { g.record("terminated " + string(uid)) }
func (g *gateVolumes) record(call string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, call)
}
func (g *gateVolumes) recorded() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.calls)
}

func (g *gateVolumes) WaitForAttachAndMount(ctx context.Context, _ *corev1.Pod) error {
	g.waits.Add(1)
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (g *gateVolumes) UnmountPodVolumes(context.Context, *corev1.Pod) error {
	g.unmounted.Add(1)
	return nil
}
func (g *gateVolumes) VolumesInUse() []corev1.UniqueVolumeName              { return nil }
func (g *gateVolumes) ReconcilerStatesHasBeenSynced() bool                  { return true }
func (g *gateVolumes) MarkVolumesAsReportedInUse([]corev1.UniqueVolumeName) {}
func (g *gateVolumes) Start(context.Context, record.EventRecorder) error    { return nil }

// startNode runs node-1 with cfg (its name, client and version filled in)
// until the test ends.
func startNode(t *testing.T, client *fake.Clientset, cfg Config) *Node {
	t.Helper()
	cfg.NodeName, cfg.Client, cfg.KubeletVersion = "node-1", client, "v1.37.2"
	if cfg.PodSyncBackOff == 0 {
		cfg.PodSyncBackOff = 10 * time.Millisecond // the kubelet's 10 s would only slow the tests
	}
	if cfg.RelistPeriod == 0 {
		cfg.RelistPeriod = 10 * time.Millisecond // the PLEG's 1 s would only slow the tests
	}
	n, err := NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = n.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return n
}

func boundPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "img"}}},
	}
}

// eventually polls cond until it holds. Its deadline is 30 s: a status
// whose write failed, or a deletion that waits for the terminal phase to
// come back, is retried at the status manager's periodic sync, every 10 s
// (upstream's, not configurable).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func getPod(client *fake.Clientset, name string) *corev1.Pod {
	p, err := client.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

// deleteGracefully deletes the pod as the API server records a graceful
// deletion (deletionTimestamp set), waits until the kubelet has confirmed it,
// and returns the pod as it was deleted.
func deleteGracefully(t *testing.T, client *fake.Clientset, name string) *corev1.Pod {
	t.Helper()
	p := getPod(client, name)
	now, grace := metav1.Now(), int64(30)
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	if _, err := client.CoreV1().Pods("ns").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deletion confirmed", func() bool { return getPod(client, name) == nil })
	return p
}

func TestNodeRegistersWithStatusAndLease(t *testing.T) {
	client := fake.NewClientset()
	startNode(t, client, Config{})
	eventually(t, "node Ready", func() bool {
		n, err := client.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	n, err := client.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Annotations[ControllerManagedAttachAnnotation] != "true" {
		t.Errorf("annotations %v", n.Annotations)
	}
	if n.Status.Capacity.Pods().Value() != 110 || n.Status.NodeInfo.KubeletVersion != "v1.37.2" {
		t.Errorf("status %+v", n.Status)
	}
	eventually(t, "node lease", func() bool {
		_, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), "node-1", metav1.GetOptions{})
		return err == nil
	})
}

func TestPodLifecycle(t *testing.T) {
	tests := []struct {
		name string
		// failPatches makes the first n pod status patches fail with
		// patchErr (default a 500): the ContainerCreating status is not
		// written, and the status manager writes the next one (Running)
		// when the pod worker sets it.
		failPatches int32
		patchErr    error
		// deleteWhileMounting deletes the pod before its volumes are released.
		deleteWhileMounting bool
	}{
		{name: "pod starts once volumes are mounted, then graceful deletion"},
		{name: "status patch errors are retried", failPatches: 1},
		{name: "status patch conflicts are retried", failPatches: 1,
			patchErr: apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "web-0", errors.New("the object has been modified"))},
		{name: "pod deleted while its volumes are still attaching never runs", deleteWhileMounting: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			var failed atomic.Int32
			var deletes []metav1.DeleteOptions
			var mu sync.Mutex
			client.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if failed.Load() < tc.failPatches {
					failed.Add(1)
					if tc.patchErr != nil {
						return true, nil, tc.patchErr
					}
					return true, nil, apierrors.NewInternalError(errors.New("injected"))
				}
				return false, nil, nil
			})
			client.PrependReactor("delete", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				deletes = append(deletes, a.(clienttesting.DeleteActionImpl).DeleteOptions)
				mu.Unlock()
				return false, nil, nil
			})
			vols := &gateVolumes{release: make(chan struct{})}
			startNode(t, client, Config{Volumes: vols})

			pod := boundPod("web-0")
			if _, err := client.CoreV1().Pods("ns").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.failPatches == 0 {
				eventually(t, "ContainerCreating while volumes mount", func() bool {
					p := getPod(client, "web-0")
					return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
						p.Status.ContainerStatuses[0].State.Waiting.Reason == "ContainerCreating" && p.Status.Phase == corev1.PodPending
				})
			}
			eventually(t, "volume wait started", func() bool { return vols.waits.Load() > 0 })
			if tc.failPatches > 0 {
				eventually(t, "the failed patches", func() bool { return failed.Load() == tc.failPatches })
			}

			if !tc.deleteWhileMounting {
				close(vols.release)
				eventually(t, "Running", func() bool {
					p := getPod(client, "web-0")
					return p != nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" &&
						len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
				})
			}

			deleteGracefully(t, client, "web-0")
			if vols.unmounted.Load() == 0 {
				t.Error("volumes were not unmounted before the deletion was confirmed")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(deletes) != 1 || deletes[0].GracePeriodSeconds == nil || *deletes[0].GracePeriodSeconds != 0 ||
				deletes[0].Preconditions == nil || deletes[0].Preconditions.UID == nil {
				t.Errorf("deletion not confirmed with grace 0 and a UID precondition: %+v", deletes)
			}
			if tc.failPatches > 0 && failed.Load() < tc.failPatches {
				t.Errorf("only %d injected failures were hit", failed.Load())
			}
		})
	}
}

// The node status patch must never carry fields the kubelet does not own,
// such as status.volumesAttached written by the attach/detach controller.
func TestNodeStatusPatchLeavesVolumesAttachedAlone(t *testing.T) {
	client := fake.NewClientset()
	var patches [][]byte
	var mu sync.Mutex
	client.PrependReactor("patch", "nodes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		patches = append(patches, a.(clienttesting.PatchActionImpl).Patch)
		mu.Unlock()
		return false, nil, nil
	})
	n, err := NewNode(Config{NodeName: "node-1", Client: client, KubeletVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Status: corev1.NodeStatus{VolumesAttached: []corev1.AttachedVolume{{Name: "kubernetes.io/csi/d^v1", DevicePath: ""}}}}
	if _, err := client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.cfg.setDefaults()
	if err := n.updateNodeStatus(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.VolumesAttached) != 1 {
		t.Errorf("volumesAttached changed by the kubelet: %+v", got.Status.VolumesAttached)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range patches {
		if strings.Contains(string(p), "volumesAttached") {
			t.Errorf("patch touches volumesAttached: %s", p)
		}
	}
}

// failOnceVolumes fails a pod's first volume wait with err (nil: it waits
// until the pod goes away), then mounts at once.
type failOnceVolumes struct {
	NoVolumes
	err   error
	waits atomic.Int32
}

func (f *failOnceVolumes) WaitForAttachAndMount(ctx context.Context, _ *corev1.Pod) error {
	if f.waits.Add(1) > 1 {
		return nil
	}
	if f.err != nil {
		return f.err
	}
	<-ctx.Done()
	return waitError("[data]", "[data]", "[]", ctx.Err())
}

// waitError is volumeManager.WaitForAttachAndMount's error, as v1.37.2
// words and wraps it.
func waitError(unmounted, unattached, unprocessed string, err error) error {
	return fmt.Errorf("unmounted volumes=%s, unattached volumes=%s, failed to process volumes=%s: %w", unmounted, unattached, unprocessed, err)
}

// eventMessages lists the messages of the pod events with reason.
func eventMessages(client *fake.Clientset, reason string) []string {
	evs, err := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return []string{"list events: " + err.Error()}
	}
	var out []string
	for _, e := range evs.Items {
		if e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// A failed wait for volumes is a FailedMount event as the kubelet's SyncPod
// records it: always for a volume that could not be resolved, never for the
// wait's timeout in v1.37.2, and for the timeout with v1.27's text when
// FailedMountOnTimeout is set. A pod deleted while waiting records nothing.
func TestMountFailureEvents(t *testing.T) {
	timeout := waitError("[data]", "[data]", "[]", context.DeadlineExceeded)
	tests := []struct {
		name                 string
		err                  error // nil: the pod is deleted while waiting
		failedMountOnTimeout bool
		want                 []string
	}{
		{
			name: "a volume that cannot be resolved is recorded",
			err:  waitError("[data]", "[]", "[data]", errors.New(`error processing PVC ns/data-web-0: PVC is not bound`)),
			want: []string{"Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: error processing PVC ns/data-web-0: PVC is not bound"},
		},
		{name: "v1.37.2 records no timeout", err: timeout},
		{
			name: "FailedMountOnTimeout records the timeout as v1.27 did", err: timeout, failedMountOnTimeout: true,
			want: []string{"Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data], failed to process volumes=[]: timed out waiting for the condition"},
		},
		{name: "a pod deleted while waiting records nothing", failedMountOnTimeout: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			vols := &failOnceVolumes{err: tc.err}
			n := startNode(t, client, Config{Volumes: vols, FailedMountOnTimeout: tc.failedMountOnTimeout, PodSyncBackOff: 10 * time.Millisecond})
			if _, err := client.CoreV1().Pods("ns").Create(context.Background(), boundPod("web-0"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.err != nil {
				// The retry mounts and starts the pod; its Started event
				// comes through the same recorder after any FailedMount.
				eventually(t, "Running after the retry", func() bool {
					p := getPod(client, "web-0")
					return p != nil && p.Status.Phase == corev1.PodRunning
				})
				eventually(t, "the Started event", func() bool { return len(eventMessages(client, "Started")) > 0 })
			} else {
				eventually(t, "volume wait started", func() bool { return vols.waits.Load() > 0 })
				p := deleteGracefully(t, client, "web-0")
				// Anything the cancelled wait recorded is delivered before this.
				n.recorder.Eventf(p, corev1.EventTypeNormal, "Marker", "end of test")
				eventually(t, "the marker event", func() bool { return len(eventMessages(client, "Marker")) > 0 })
			}
			if got := eventMessages(client, "FailedMount"); !slices.Equal(got, tc.want) {
				t.Errorf("FailedMount events:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// A pod re-created under the same name while the watch was down arrives as
// one update from the old pod to the new; the old pod's worker must hear of
// its deletion (the kubelet keys pods by UID).
func TestReplacedPodEndsTheOldWorker(t *testing.T) {
	for _, tc := range []struct {
		name       string
		newUID     types.UID
		oldDeleted bool
	}{
		{"same pod, new version", "uid-1", false},
		{"re-created under the same name", "uid-2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pw := newPodWorkers(&Node{cfg: Config{Volumes: NoVolumes{}}})
			old := &podWorker{updates: make(chan *corev1.Pod, 1)}
			pw.workers["uid-1"] = old
			oldPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", UID: "uid-1"}}
			newPod := oldPod.DeepCopy()
			newPod.UID = tc.newUID
			newPod.Status.Phase = corev1.PodSucceeded // a finished pod starts no worker: nothing runs
			pw.replaced(context.Background(), oldPod, newPod)
			var got *corev1.Pod
			select {
			case got = <-old.updates:
			default:
				t.Fatal("the old worker got no update")
			}
			if deleted := got == nil; deleted != tc.oldDeleted {
				t.Errorf("old worker told the pod is gone = %v, want %v", deleted, tc.oldDeleted)
			}
		})
	}
}

// The volume manager hears of a pod when the kubelet admits it, before
// the pod's first sync writes a status (HandlePodAdditions puts it in the
// pod manager, which the desired state populator reads), and of its
// termination as soon as its deletion arrives.
func TestVolumeManagerHearsOfAdmissionAndTermination(t *testing.T) {
	client := fake.NewClientset()
	vols := &gateVolumes{release: make(chan struct{})}
	var firstPatch []string // vols' calls when the first pod status patch came
	var once sync.Once
	client.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { firstPatch = vols.recorded() })
		return false, nil, nil
	})
	startNode(t, client, Config{Volumes: vols})
	if _, err := client.CoreV1().Pods("ns").Create(context.Background(), boundPod("web-0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "volume wait started", func() bool { return vols.waits.Load() > 0 })
	if !slices.Contains(firstPatch, "admit uid-web-0") {
		t.Errorf("calls before the first status patch: %q; want the pod admitted", firstPatch)
	}
	close(vols.release)
	eventually(t, "Running", func() bool { p := getPod(client, "web-0"); return p != nil && p.Status.Phase == corev1.PodRunning })
	deleteGracefully(t, client, "web-0")
	if !slices.Contains(vols.recorded(), "terminating uid-web-0") {
		t.Errorf("calls %q; want the pod's termination", vols.recorded())
	}
}

// The status manager deletes a terminated pod only once the API server has
// its terminal phase (canBeDeleted reads the pod the GET or the PATCH
// returned, or at the periodic sync the pod manager's copy). Here the API
// server swallows every terminal status, so the phase arrives only when
// the test writes it; the deletion must follow it, at the next periodic
// sync, and never precede it.
func TestDeletionWaitsForTheTerminalPhase(t *testing.T) {
	client := fake.NewClientset()
	var holdTerminal atomic.Bool
	holdTerminal.Store(true)
	var swallowed atomic.Int32
	client.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchActionImpl)
		if p.GetName() == "web-0" && holdTerminal.Load() && strings.Contains(string(p.Patch), string(corev1.PodSucceeded)) {
			swallowed.Add(1)
			return true, &corev1.Pod{}, nil // accepted, not recorded (the reactor holds the fake's lock: no client call here)
		}
		return false, nil, nil
	})
	gvr := corev1.SchemeGroupVersion.WithResource("pods")
	var mu sync.Mutex
	var phasesAtDelete []corev1.PodPhase
	client.PrependReactor("delete", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		obj, err := client.Tracker().Get(gvr, "ns", "web-0")
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			phasesAtDelete = append(phasesAtDelete, obj.(*corev1.Pod).Status.Phase)
		}
		return false, nil, nil
	})
	vols := &gateVolumes{release: make(chan struct{})}
	close(vols.release)
	startNode(t, client, Config{Volumes: vols})
	if _, err := client.CoreV1().Pods("ns").Create(context.Background(), boundPod("web-0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Running", func() bool { p := getPod(client, "web-0"); return p != nil && p.Status.Phase == corev1.PodRunning })
	p := getPod(client, "web-0")
	now, grace := metav1.Now(), int64(30)
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	if _, err := client.CoreV1().Pods("ns").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The terminated sync has unmounted, and its terminal status or
	// TerminatePod's has been swallowed.
	eventually(t, "the volumes unmounted and a terminal status swallowed", func() bool {
		return vols.unmounted.Load() > 0 && swallowed.Load() > 0
	})
	holdTerminal.Store(false)
	p = getPod(client, "web-0")
	if p == nil {
		t.Fatal("web-0 deleted while the API server had no terminal phase")
	}
	p.Status.Phase = corev1.PodSucceeded
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deletion once the phase is terminal", func() bool { return getPod(client, "web-0") == nil })
	mu.Lock()
	defer mu.Unlock()
	if len(phasesAtDelete) != 1 || phasesAtDelete[0] != corev1.PodSucceeded {
		t.Errorf("phases the API server had at each delete: %v, want one delete at %s", phasesAtDelete, corev1.PodSucceeded)
	}
}

// A terminating pod waits for the PLEG: its containers stop at the first
// periodic relist after its last sync (podCache.GetNewerThan in
// podWorkerLoop; the pod is deleted here just after it ran, within the
// relist period), and its deletion is confirmed no earlier than the relist
// after that one (the terminated sync). The Running write stands for the
// end of the pod's start: both come within microseconds, so a relist
// falls between them about once in 10,000 runs.
func TestTerminationWaitsForTheRelist(t *testing.T) {
	const period = 400 * time.Millisecond
	client := fake.NewClientset()
	var mu sync.Mutex
	var runningAt, stoppedAt, deletedAt time.Time
	var n *Node
	var terminalTooSoon atomic.Bool
	client.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		patch := string(a.(clienttesting.PatchActionImpl).Patch)
		// The status manager sends the terminal phase only once the
		// pod's containers can no longer run (mergePodStatus).
		if strings.Contains(patch, string(corev1.PodSucceeded)) && n.pods.PodCouldHaveRunningContainers(boundPod("web-0")) {
			terminalTooSoon.Store(true)
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.Contains(patch, string(corev1.PodRunning)):
			runningAt = time.Now()
		case stoppedAt.IsZero() && strings.Contains(patch, `"terminated"`):
			stoppedAt = time.Now()
		}
		return false, nil, nil
	})
	client.PrependReactor("delete", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		deletedAt = time.Now()
		return false, nil, nil
	})
	n = startNode(t, client, Config{RelistPeriod: period})
	if _, err := client.CoreV1().Pods("ns").Create(context.Background(), boundPod("web-0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Running", func() bool { p := getPod(client, "web-0"); return p != nil && p.Status.Phase == corev1.PodRunning })
	deleteGracefully(t, client, "web-0")
	if terminalTooSoon.Load() {
		t.Error("the terminal phase was sent while the pod's containers could still run")
	}

	mu.Lock()
	defer mu.Unlock()
	if runningAt.IsZero() || stoppedAt.IsZero() || deletedAt.IsZero() {
		t.Fatalf("missing a step: Running at %v, stopped at %v, deleted at %v", runningAt, stoppedAt, deletedAt)
	}
	first := n.nextRelist(runningAt)
	if stoppedAt.Before(first) {
		t.Errorf("containers stopped %v after Running, before the first relist after it (%v after)",
			stoppedAt.Sub(runningAt), first.Sub(runningAt))
	}
	if second := n.nextRelist(first); deletedAt.Before(second) {
		t.Errorf("deletion confirmed %v after Running, before the relist after the terminating sync (%v after)",
			deletedAt.Sub(runningAt), second.Sub(runningAt))
	}
}

func TestNextRelist(t *testing.T) {
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	n := &Node{cfg: Config{RelistPeriod: time.Second}, started: start, relists: newRelistSchedule(start, time.Second, nil)}
	tests := []struct {
		after, want time.Duration
	}{
		{after: -time.Second, want: 0},
		{after: 0, want: time.Second},
		{after: 300 * time.Millisecond, want: time.Second},
		{after: time.Second, want: 2 * time.Second},
		{after: 2500 * time.Millisecond, want: 3 * time.Second},
	}
	for _, tc := range tests {
		if got := n.nextRelist(start.Add(tc.after)); !got.Equal(start.Add(tc.want)) {
			t.Errorf("nextRelist(start%+v) = start%+v, want start%+v", tc.after, got.Sub(start), tc.want)
		}
	}
}
