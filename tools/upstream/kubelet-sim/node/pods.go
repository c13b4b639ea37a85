package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/tools/upstream/kubelet-sim/volumes"
)

// podWorkers runs one worker goroutine per pod bound to the node, like the
// kubelet's pod workers: each pod's updates are handled in order, and
// different pods never wait for each other.
type podWorkers struct {
	node *Node

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	nextIP  int
	// running counts the goroutines of the pod workers (and their retries),
	// joined when run returns.
	running sync.WaitGroup
	// syncs tells of the status manager's syncs: each pod status written.
	syncs statusSyncs
}

// statusSyncs wakes whoever waits for the status manager's next sync.
type statusSyncs struct {
	mu sync.Mutex
	ch chan struct{}
}

// next is closed at the next sync after the call.
func (s *statusSyncs) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// synced wakes those waiting for this sync.
func (s *statusSyncs) synced() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// podWorker holds the latest known version of one pod; nil means the pod is
// gone from the API server.
type podWorker struct {
	updates chan *corev1.Pod // capacity 1: only the newest version matters
	// latest is the newest version the informer delivered, as the
	// kubelet's pod manager holds it while the pod worker is busy (the
	// status manager's canBeDeleted reads it there).
	latest atomic.Pointer[corev1.Pod]
}

func newPodWorkers(n *Node) *podWorkers {
	return &podWorkers{node: n, workers: map[types.UID]*podWorker{}}
}

// run watches the pods bound to this node, with the same field selector the
// kubelet's API source uses (config.NewSourceApiserver).
func (pw *podWorkers) run(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(pw.node.cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", pw.node.cfg.NodeName).String()
		}))
	inf := factory.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { pw.update(ctx, obj.(*corev1.Pod)) },
		UpdateFunc: func(oldObj, obj any) { pw.replaced(ctx, oldObj.(*corev1.Pod), obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				pw.deleted(pod.UID)
			}
		},
	})
	factory.Start(ctx.Done())
	<-ctx.Done()
	// No handler runs after Shutdown, so no worker starts after it.
	factory.Shutdown()
	pw.running.Wait()
}

func (pw *podWorkers) update(ctx context.Context, pod *corev1.Pod) {
	pw.mu.Lock()
	w, ok := pw.workers[pod.UID]
	if !ok {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			if pod.DeletionTimestamp == nil {
				pw.mu.Unlock()
				return // a finished pod nobody deletes: nothing to do
			}
		}
		w = &podWorker{updates: make(chan *corev1.Pod, 1)}
		pw.workers[pod.UID] = w
		pw.nextIP++
		ip := fmt.Sprintf("10.244.%d.%d", pw.node.cfg.PodCIDRIndex%256, 2+pw.nextIP%250)
		if pod.Spec.HostNetwork {
			// generateAPIPodStatus (pkg/kubelet/kubelet_pods.go): a
			// host-network pod's IPs are its node's.
			ip = nodeInternalIP
		}
		pw.running.Go(func() { pw.work(ctx, pod.UID, w, ip) })
	}
	pw.mu.Unlock()
	// Admission: the pod manager has the pod before its worker syncs it.
	pw.node.cfg.Volumes.AdmitPod(pod)
	w.latest.Store(pod)
	w.send(pod)
}

// replaced handles an update. The informer keys pods by namespace/name, so
// a pod deleted and re-created under the same name while the watch was down
// arrives as one update from the old pod to the new: the kubelet tracks pods
// by UID (podStorage.merge in pkg/kubelet/config), so the old pod's worker
// hears of its deletion and tears its volumes down.
func (pw *podWorkers) replaced(ctx context.Context, old, pod *corev1.Pod) {
	if old.UID != pod.UID {
		pw.deleted(old.UID)
	}
	pw.update(ctx, pod)
}

func (pw *podWorkers) deleted(uid types.UID) {
	pw.mu.Lock()
	w, ok := pw.workers[uid]
	pw.mu.Unlock()
	if ok {
		w.send(nil)
	}
}

// send replaces any pending update with pod.
func (w *podWorker) send(pod *corev1.Pod) {
	for {
		select {
		case w.updates <- pod:
			return
		default:
			select {
			case <-w.updates:
			default:
			}
		}
	}
}

// work drives one pod: mount its volumes and start it; on graceful deletion
// stop it, unmount, and confirm the deletion (kubelet.syncPod,
// syncTerminatingPod, syncTerminatedPod, then the status manager's delete).
func (pw *podWorkers) work(ctx context.Context, uid types.UID, w *podWorker, ip string) {
	n := pw.node
	defer func() {
		pw.mu.Lock()
		delete(pw.workers, uid)
		pw.mu.Unlock()
	}()

	var (
		pod         *corev1.Pod
		startCancel context.CancelFunc = func() {}
		startDone   chan error
		running     bool
		terminated  bool
		confirmed   bool
		// lastSync is when the pod's previous sync ended (podWorkerLoop's
		// lastSyncTime): a terminating or terminated sync waits for the
		// PLEG's first relist after it.
		lastSync time.Time
		// statusSync fires at the status manager's next periodic sync
		// while a terminated pod waits to be confirmed deleted; syncWake
		// at its next sync for another pod's status (either syncBatch
		// looks at every pod: status.manager.needsUpdate).
		statusSync *time.Timer
		syncWake   <-chan struct{}
	)
	defer func() {
		startCancel()
		if statusSync != nil {
			statusSync.Stop()
		}
	}()
	// confirm deletes the terminated pod once the API server has its
	// terminal phase, or waits for the status manager's next sync.
	confirm := func() {
		if confirmed {
			return
		}
		err := pw.confirmDeletion(ctx, w.latest.Load())
		if err == nil {
			confirmed = true
			return
		}
		if !errors.Is(err, errNotTerminalYet) && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Confirming deletion failed, will retry at the next status sync", "pod", klog.KObj(pod))
		}
		syncWake = pw.syncs.next()
		statusSync = resetTimer(statusSync, n.untilStatusSync(time.Now()))
	}
	for {
		var startResult chan error = startDone
		var syncTick <-chan time.Time
		var syncOther <-chan struct{}
		if terminated && !confirmed && statusSync != nil {
			syncTick, syncOther = statusSync.C, syncWake
		}
		select {
		case <-ctx.Done():
			if startDone != nil {
				<-startDone // the start sees ctx end too
			}
			return
		case <-syncTick:
			confirm()
		case <-syncOther:
			confirm()
		case p := <-w.updates:
			if p == nil { // gone from the API server
				startCancel()
				if startDone != nil {
					<-startDone
				}
				if !terminated && pod != nil {
					// Force-deleted: still tear the volumes down.
					n.cfg.Volumes.PodTerminating(pod.UID)
					if err := n.cfg.Volumes.UnmountPodVolumes(ctx, pod); err != nil && ctx.Err() == nil {
						klog.FromContext(ctx).Error(err, "Unmount after forced deletion failed", "pod", klog.KObj(pod))
					}
				}
				return
			}
			pod = p
			if pod.DeletionTimestamp != nil && !terminated {
				n.cfg.Volumes.PodTerminating(pod.UID)
				startCancel()
				if startDone != nil {
					<-startDone // the cancelled SyncPod ends
					startDone = nil
					lastSync = time.Now()
				}
				if err := pw.terminate(ctx, pod, &running, &lastSync); err != nil {
					lastSync = time.Now()
					if ctx.Err() == nil {
						klog.FromContext(ctx).Error(err, "Terminating pod failed, will retry on next update", "pod", klog.KObj(pod))
						pw.running.Go(func() { pw.retryLater(ctx, w, pod) })
					}
					continue
				}
				terminated = true
				// The status manager's TerminatePod syncs at once.
				confirm()
				continue
			}
			if startDone == nil && !running && !terminated {
				sctx, cancel := context.WithCancel(ctx)
				startCancel = cancel
				startDone = make(chan error, 1)
				go func(pod *corev1.Pod) { startDone <- pw.start(sctx, pod, ip) }(pod)
			}
		case err := <-startResult:
			startDone = nil
			lastSync = time.Now()
			if err == nil {
				running = true
			} else if ctx.Err() == nil && pod.DeletionTimestamp == nil {
				klog.FromContext(ctx).Error(err, "Starting pod failed, will retry", "pod", klog.KObj(pod))
				pw.running.Go(func() { pw.retryLater(ctx, w, pod) })
			}
		}
	}
}

// resetTimer returns a timer that fires after d: t, stopped and reset, or
// a new one.
func resetTimer(t *time.Timer, d time.Duration) *time.Timer {
	if t == nil {
		return time.NewTimer(d)
	}
	t.Reset(d) // since Go 1.23 Reset leaves no stale value in the channel
	return t
}

// retryLater resends pod to its worker after the pod workers' back-off
// (podWorkers.completeWork after a failed sync: backOffPeriod plus up to 50%
// jitter), unless a newer update arrived meanwhile.
func (pw *podWorkers) retryLater(ctx context.Context, w *podWorker, pod *corev1.Pod) {
	const workerBackOffPeriodJitterFactor = 0.5 // pod_workers.go
	t := time.NewTimer(wait.Jitter(pw.node.cfg.PodSyncBackOff, workerBackOffPeriodJitterFactor))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
		select {
		case w.updates <- pod:
		default: // a newer update is pending; it will be handled instead
		}
	}
}

// start shows the pod ContainerCreating, waits for its volumes, spends the
// runtime's time to start the sandbox and containers and to read the pod
// back, then reports it Running with every container started and ready.
func (pw *podWorkers) start(ctx context.Context, pod *corev1.Pod, ip string) error {
	n := pw.node
	now := metav1.Now()
	creating := pod.DeepCopy()
	s := &creating.Status
	s.Phase = corev1.PodPending
	s.HostIP, s.HostIPs = "127.0.0.1", []corev1.HostIP{{IP: "127.0.0.1"}}
	if s.StartTime == nil {
		s.StartTime = &now
	}
	setPodCondition(s, corev1.PodInitialized, corev1.ConditionTrue, "")
	setPodCondition(s, corev1.PodReadyToStartContainers, corev1.ConditionFalse, "")
	setPodCondition(s, corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady")
	setPodCondition(s, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady")
	s.ContainerStatuses = containerStatuses(pod, func(c corev1.Container) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	}, false)
	if err := pw.patchStatus(ctx, pod, creating); err != nil {
		return err
	}

	if err := n.cfg.Volumes.WaitForAttachAndMount(ctx, pod); err != nil {
		pw.recordMountFailure(ctx, pod, err)
		return err
	}
	// kuberuntime's SyncPod: the sandbox, then the containers; the kubelet
	// reads the pod back (the PLEG's on-demand relist) before it writes
	// the pod Running.
	containers := len(pod.Spec.InitContainers) + len(pod.Spec.Containers)
	if err := n.cfg.Runtime.StartPod(ctx, containers); err != nil {
		return err
	}
	if err := n.cfg.Runtime.ReadBack(ctx, containers); err != nil {
		return err
	}

	running := creating.DeepCopy()
	now = metav1.Now()
	s = &running.Status
	s.Phase = corev1.PodRunning
	s.PodIP, s.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	setPodCondition(s, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "")
	setPodCondition(s, corev1.ContainersReady, corev1.ConditionTrue, "")
	setPodCondition(s, corev1.PodReady, corev1.ConditionTrue, "")
	s.ContainerStatuses = containerStatuses(pod, func(c corev1.Container) corev1.ContainerState {
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
	}, true)
	if err := pw.patchStatus(ctx, creating, running); err != nil {
		return err
	}
	for _, c := range pod.Spec.Containers {
		n.recorder.Eventf(pod, corev1.EventTypeNormal, "Started", "Started container %s", c.Name)
	}
	klog.FromContext(ctx).V(3).Info("Pod running", "pod", klog.KObj(pod))
	return nil
}

// recordMountFailure mirrors Kubelet.SyncPod (pkg/kubelet/kubelet.go,
// v1.37.2) when WaitForAttachAndMount fails: FailedMount "Unable to attach
// or mount volumes: <err>", unless the wait was interrupted (wait.Interrupted:
// the timeout, or the pod going away). With FailedMountOnTimeout a timeout is
// recorded too, with v1.27's text: its SyncPod recorded every failure and
// its WaitForAttachAndMount polled with wait.PollImmediate. A pod deleted
// meanwhile is not: its wait was cancelled, not timed out.
func (pw *podWorkers) recordMountFailure(ctx context.Context, pod *corev1.Pod, err error) {
	const reason, prefix = "FailedMount", "Unable to attach or mount volumes: "
	if !wait.Interrupted(err) {
		pw.node.recorder.Eventf(pod, corev1.EventTypeWarning, reason, prefix+"%v", err)
		return
	}
	if !pw.node.cfg.FailedMountOnTimeout || ctx.Err() != nil {
		return
	}
	if msg, ok := volumes.LegacyTimeoutMessage(err); ok {
		pw.node.recorder.Eventf(pod, corev1.EventTypeWarning, reason, prefix+"%s", msg)
	}
}

// terminate stops the containers in the runtime's time if they run (the
// containers of a pod whose start never finished do not; a retried
// termination does not stop them twice), writes the terminal status and
// waits until the volumes are unmounted (syncTerminatingPod, then
// syncTerminatedPod's WaitForUnmount).
//
// Each of the two syncs first waits in podWorkerLoop for the pod cache to
// be newer than the pod's previous sync (podCache.GetNewerThan), and on
// termination only the PLEG's periodic relist makes it so: the on-demand
// relist is asked for after a SyncPod that changed something
// (Kubelet.SyncPod's postSync, RequestPodRelist), never after a
// terminating sync. So the containers stop at the first relist after the
// last sync (at once for a pod that has run a while; up to a period for
// one deleted just after it started, or whose start was cancelled), and
// the terminated sync waits for the relist after the terminating one.
// The volumes' teardown does not wait for that: the populator drops a pod
// whose terminating sync has ended (ShouldPodRuntimeBeRemoved), so the
// pod is done at the later of its unmount and that relist.
func (pw *podWorkers) terminate(ctx context.Context, pod *corev1.Pod, running *bool, lastSync *time.Time) error {
	n := pw.node
	if err := n.awaitRelist(ctx, *lastSync); err != nil {
		return err
	}
	if *running {
		for _, c := range pod.Spec.Containers {
			n.recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", c.Name)
		}
		if err := n.cfg.Runtime.StopPod(ctx, len(pod.Spec.Containers)); err != nil {
			return err
		}
		*running = false
		// syncTerminatingPod reads the stopped pod back (GetPodStatus).
		if err := n.cfg.Runtime.ReadBack(ctx, len(pod.Spec.Containers)); err != nil {
			return err
		}
	}
	now := metav1.Now()
	stopped := pod.DeepCopy()
	s := &stopped.Status
	// kubelet.generateAPIPodStatus: a terminal pod whose containers all
	// exited 0 is Succeeded.
	s.Phase = corev1.PodSucceeded
	setPodCondition(s, corev1.PodReadyToStartContainers, corev1.ConditionFalse, "")
	setPodCondition(s, corev1.ContainersReady, corev1.ConditionFalse, "PodCompleted")
	setPodCondition(s, corev1.PodReady, corev1.ConditionFalse, "PodCompleted")
	s.ContainerStatuses = containerStatuses(pod, func(c corev1.Container) corev1.ContainerState {
		t := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: now}
		for _, old := range pod.Status.ContainerStatuses {
			if old.Name == c.Name && old.State.Running != nil {
				t.StartedAt = old.State.Running.StartedAt
			}
		}
		return corev1.ContainerState{Terminated: t}
	}, false)
	if err := pw.patchStatus(ctx, pod, stopped); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	terminatingEnded := time.Now()
	*lastSync = terminatingEnded
	if err := n.cfg.Volumes.UnmountPodVolumes(ctx, pod); err != nil {
		return fmt.Errorf("unmount volumes: %w", err)
	}
	// SyncTerminatedPod runs after the relist that follows the terminating
	// sync; its WaitForUnmount then returns at once if the unmount ended
	// first.
	return n.awaitRelist(ctx, terminatingEnded)
}

// errNotTerminalYet: the pod manager's copy of the pod does not have its
// terminal phase yet.
var errNotTerminalYet = errors.New("terminal phase not back from the API server yet")

// confirmDeletion deletes the terminated pod with grace period 0 and a UID
// precondition, as the status manager does (status.manager.syncPod), but
// only once canBeDeleted holds: the pod the informer last delivered has a
// terminal phase, so the API server has recorded how it ended.
func (pw *podWorkers) confirmDeletion(ctx context.Context, latest *corev1.Pod) error {
	if latest.Status.Phase != corev1.PodSucceeded && latest.Status.Phase != corev1.PodFailed {
		return errNotTerminalYet
	}
	err := pw.node.cfg.Client.CoreV1().Pods(latest.Namespace).Delete(ctx, latest.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      metav1.NewUIDPreconditions(string(latest.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("confirm deletion: %w", err)
	}
	klog.FromContext(ctx).V(3).Info("Pod deletion confirmed", "pod", klog.KObj(latest))
	return nil
}

// patchStatus sends the difference between old and new status as a
// strategic merge patch with a UID precondition, retrying transient errors;
// it mirrors pkg/util/pod.PatchPodStatus used by the status manager.
func (pw *podWorkers) patchStatus(ctx context.Context, old, updated *corev1.Pod) error {
	oldJSON, err := json.Marshal(corev1.Pod{Status: old.Status})
	if err != nil {
		return err
	}
	newJSON, err := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: old.UID}, Status: updated.Status})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Pod{})
	if err != nil {
		return fmt.Errorf("status patch for pod %s/%s: %w", old.Namespace, old.Name, err)
	}
	var lastErr error
	err = wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Steps: 8, Cap: 2 * time.Second},
		func(ctx context.Context) (bool, error) {
			_, lastErr = pw.node.cfg.Client.CoreV1().Pods(old.Namespace).Patch(ctx, old.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
			switch {
			case lastErr == nil:
				pw.syncs.synced()
				return true, nil
			case apierrors.IsNotFound(lastErr), apierrors.IsConflict(lastErr), apierrors.IsInvalid(lastErr):
				return false, lastErr // UID changed or pod gone: retrying cannot help
			default:
				return false, nil
			}
		})
	if err != nil && lastErr != nil {
		return fmt.Errorf("patch status of pod %s/%s: %w", old.Namespace, old.Name, lastErr)
	}
	return err
}

func containerStatuses(pod *corev1.Pod, state func(corev1.Container) corev1.ContainerState, ready bool) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		st := state(c)
		started := st.Running != nil
		out = append(out, corev1.ContainerStatus{
			Name:        c.Name,
			Image:       c.Image,
			ImageID:     "sim://" + c.Image,
			ContainerID: fmt.Sprintf("sim://%s-%s", pod.UID, c.Name),
			Ready:       ready,
			Started:     &started,
			State:       st,
		})
	}
	return out
}

func setPodCondition(s *corev1.PodStatus, t corev1.PodConditionType, status corev1.ConditionStatus, reason string) {
	now := metav1.Now()
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if c.Type == t {
			if c.Status != status {
				c.LastTransitionTime = now
			}
			c.Status, c.Reason = status, reason
			return
		}
	}
	s.Conditions = append(s.Conditions, corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: now})
}
