package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/status"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"github.com/strandlab/strandlab/tools/upstream/kubelet-sim/volumes"
)

// podWorkers runs one worker goroutine per pod bound to the node, like the
// kubelet's pod workers: each pod's updates are handled in order, and
// different pods never wait for each other. Statuses go to the node's status
// manager (upstream's), which writes them on its own goroutine; the pod
// workers also answer the questions that manager asks the kubelet (the pod
// manager's copy of a pod, whether its containers could still run).
type podWorkers struct {
	node *Node

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	nextIP  int
	// running counts the goroutines of the pod workers (and their retries),
	// joined when run returns.
	running sync.WaitGroup
}

// podWorker holds the latest known version of one pod; nil means the pod is
// gone from the API server.
type podWorker struct {
	updates chan *corev1.Pod // capacity 1: only the newest version matters
	// latest is the newest version the informer delivered, as the
	// kubelet's pod manager holds it while the pod worker is busy (the
	// status manager's canBeDeleted reads it there at its periodic sync).
	latest atomic.Pointer[corev1.Pod]
	// terminated: the pod's terminating sync has ended, so no container of
	// it can run (podSyncStatus.terminatedAt, set by completeTerminating).
	terminated atomic.Bool
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

// The pod manager and the pod workers as upstream's status manager asks
// them (status.PodManager, status.PodDeletionSafetyProvider). strandlab's
// pods have no static or mirror pods, so UIDs translate to themselves.
var (
	_ status.PodManager                = (*podWorkers)(nil)
	_ status.PodDeletionSafetyProvider = (*podWorkers)(nil)
)

// GetPodByUID is the newest version of the pod the informer delivered.
func (pw *podWorkers) GetPodByUID(uid types.UID) (*corev1.Pod, bool) {
	pw.mu.Lock()
	w, ok := pw.workers[uid]
	pw.mu.Unlock()
	if !ok {
		return nil, false
	}
	pod := w.latest.Load()
	return pod, pod != nil
}

// GetMirrorPodByPod: there are no mirror pods.
func (pw *podWorkers) GetMirrorPodByPod(*corev1.Pod) (*corev1.Pod, bool) { return nil, false }

// TranslatePodUID: a pod's UID is its own.
func (pw *podWorkers) TranslatePodUID(uid types.UID) kubetypes.ResolvedPodUID {
	return kubetypes.ResolvedPodUID(uid)
}

// GetUIDTranslations: none.
func (pw *podWorkers) GetUIDTranslations() (map[kubetypes.ResolvedPodUID]kubetypes.MirrorPodUID, map[kubetypes.MirrorPodUID]kubetypes.ResolvedPodUID) {
	return map[kubetypes.ResolvedPodUID]kubetypes.MirrorPodUID{}, map[kubetypes.MirrorPodUID]kubetypes.ResolvedPodUID{}
}

// PodCouldHaveRunningContainers is podWorkers.CouldHaveRunningContainers:
// true until the pod's terminating sync has ended; a pod without a worker
// has none (the workers have synced every pod since they started).
func (pw *podWorkers) PodCouldHaveRunningContainers(pod *corev1.Pod) bool {
	pw.mu.Lock()
	w, ok := pw.workers[pod.UID]
	pw.mu.Unlock()
	return ok && !w.terminated.Load()
}

// noStartupLatency: the pod startup latency tracker upstream feeds from the
// status manager; kubelet-sim exports no such metric.
type noStartupLatency struct{}

func (noStartupLatency) RecordStatusUpdated(klog.Logger, *corev1.Pod) {}
func (noStartupLatency) DeletePodStartupState(types.UID)              {}

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
	if prev := w.latest.Load(); pod.DeletionTimestamp != nil && (prev == nil || prev.DeletionTimestamp == nil) {
		// podWorkers.UpdatePod's line, so that the termination's stages
		// read alike from both kubelets' logs (tools/diagnostics).
		klog.FromContext(ctx).V(4).Info("Pod is marked for graceful deletion, begin teardown", "pod", klog.KObj(pod), "podUID", pod.UID)
	}
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
// stop it and unmount (kubelet.SyncPod, SyncTerminatingPod,
// SyncTerminatedPod). The status manager deletes the pod once its
// termination is finished and the API server has its terminal phase.
func (pw *podWorkers) work(ctx context.Context, uid types.UID, w *podWorker, ip string) {
	n := pw.node
	defer pw.remove(ctx, uid)

	var (
		pod         *corev1.Pod
		startCancel context.CancelFunc = func() {}
		startDone   chan error
		running     bool
		terminated  bool
		// lastSync is when the pod's previous sync ended (podWorkerLoop's
		// lastSyncTime): a terminating or terminated sync waits for the
		// PLEG's first relist after it.
		lastSync time.Time
	)
	defer startCancel()
	for {
		var startResult chan error = startDone
		select {
		case <-ctx.Done():
			if startDone != nil {
				<-startDone // the start sees ctx end too
			}
			return
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
				if err := pw.terminate(ctx, w, pod, &running, &lastSync); err != nil {
					lastSync = time.Now()
					if ctx.Err() == nil {
						klog.FromContext(ctx).Error(err, "Terminating pod failed, will retry on next update", "pod", klog.KObj(pod))
						pw.running.Go(func() { pw.retryLater(ctx, w, pod) })
					}
					continue
				}
				terminated = true
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

// remove forgets a pod whose worker ended, and the statuses of pods no
// worker has (Kubelet.HandlePodCleanups: RemoveOrphanedStatuses).
func (pw *podWorkers) remove(ctx context.Context, uid types.UID) {
	pw.mu.Lock()
	delete(pw.workers, uid)
	live := make(map[types.UID]bool, len(pw.workers))
	for u := range pw.workers {
		live[u] = true
	}
	pw.mu.Unlock()
	pw.node.statuses.RemoveOrphanedStatuses(klog.FromContext(ctx), live)
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
// Each status goes to the status manager, which writes it when its
// goroutine comes to it (Kubelet.SyncPod's SetPodStatus: the sync does not
// wait for the API server).
func (pw *podWorkers) start(ctx context.Context, pod *corev1.Pod, ip string) error {
	n := pw.node
	log := klog.FromContext(ctx)
	now := metav1.Now()
	creating := pw.currentStatus(pod)
	s := &creating
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
	n.statuses.SetPodStatus(log, pod, creating)

	if err := n.cfg.Volumes.WaitForAttachAndMount(ctx, pod); err != nil {
		pw.recordMountFailure(ctx, pod, err)
		return err
	}
	// kuberuntime's SyncPod: the sandbox, then the containers; the kubelet
	// reads the pod back (the PLEG's on-demand relist) and its next sync
	// sets the status Running.
	containers := len(pod.Spec.InitContainers) + len(pod.Spec.Containers)
	if err := n.cfg.Runtime.StartPod(ctx, containers); err != nil {
		return err
	}
	if err := n.cfg.Runtime.ReadBack(ctx, containers); err != nil {
		return err
	}

	running := *creating.DeepCopy()
	now = metav1.Now()
	s = &running
	s.Phase = corev1.PodRunning
	s.PodIP, s.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	setPodCondition(s, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "")
	setPodCondition(s, corev1.ContainersReady, corev1.ConditionTrue, "")
	setPodCondition(s, corev1.PodReady, corev1.ConditionTrue, "")
	s.ContainerStatuses = containerStatuses(pod, func(c corev1.Container) corev1.ContainerState {
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
	}, true)
	n.statuses.SetPodStatus(log, pod, running)
	for _, c := range pod.Spec.Containers {
		n.recorder.Eventf(pod, corev1.EventTypeNormal, "Started", "Started container %s", c.Name)
	}
	log.V(3).Info("Pod running", "pod", klog.KObj(pod))
	return nil
}

// currentStatus is the pod's status as the kubelet last generated it: the
// status manager's, or the API server's before the first
// (generateAPIPodStatus starts from statusManager.GetPodStatus).
func (pw *podWorkers) currentStatus(pod *corev1.Pod) corev1.PodStatus {
	if st, ok := pw.node.statuses.GetPodStatus(pod.UID); ok {
		return *st.DeepCopy()
	}
	return *pod.Status.DeepCopy()
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

// terminate runs the pod's terminating sync, then its terminated sync
// (Kubelet.SyncTerminatingPod, SyncTerminatedPod, v1.37.2). The terminating
// sync sets the status as it was (forced: the pod has a deletion
// timestamp), stops the containers in the runtime's time if they run (the
// containers of a pod whose start never finished do not; a retried
// termination does not stop them twice), reads the pod back and sets the
// terminal status; then the pod's containers can no longer run
// (completeTerminating), which lets the populator drop its volumes. The
// terminated sync sets the terminal status again, waits until the volumes
// are unmounted (WaitForUnmount) and marks the pod finished
// (statusManager.TerminatePod); the status manager then deletes it.
//
// The status manager writes the terminal phase only once the pod's
// containers can no longer run (mergePodStatus keeps the old phase while
// PodCouldHaveRunningContainers): if its goroutine comes to the terminating
// sync's status before completeTerminating, the phase goes out with the
// terminated sync's.
//
// Each of the two syncs first waits in podWorkerLoop for the pod cache to
// be newer than the pod's previous sync (podCache.GetNewerThan), and on
// termination only the PLEG's periodic relist makes it so: the on-demand
// relist is asked for after a SyncPod that changed something
// (Kubelet.SyncPod's postSync, RequestPodRelist), never after a
// terminating sync. So the containers stop at the first relist after the
// last sync (at once for a pod that has run a while; up to a period for
// one deleted just after it started, or whose start was cancelled), and
// the terminated sync begins at the relist after the terminating one.
func (pw *podWorkers) terminate(ctx context.Context, w *podWorker, pod *corev1.Pod, running *bool, lastSync *time.Time) error {
	n := pw.node
	log := klog.FromContext(ctx)
	if err := n.awaitRelist(ctx, *lastSync); err != nil {
		return err
	}
	// The sync's lines are Kubelet.SyncTerminatingPod's and
	// SyncTerminatedPod's, for tools/diagnostics.
	log.V(4).Info("SyncTerminatingPod enter", "pod", klog.KObj(pod), "podUID", pod.UID)
	before := pw.currentStatus(pod)
	n.statuses.SetPodStatus(log, pod, before)
	if *running {
		for _, c := range pod.Spec.Containers {
			n.recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", c.Name)
		}
		if err := n.cfg.Runtime.StopPod(ctx, len(pod.Spec.Containers)); err != nil {
			return err
		}
		*running = false
		// SyncTerminatingPod reads the stopped pod back (GetPodStatus).
		if err := n.cfg.Runtime.ReadBack(ctx, len(pod.Spec.Containers)); err != nil {
			return err
		}
	}
	now := metav1.Now()
	stopped := *before.DeepCopy()
	s := &stopped
	// kubelet.generateAPIPodStatus: a terminal pod whose containers all
	// exited 0 is Succeeded.
	s.Phase = corev1.PodSucceeded
	setPodCondition(s, corev1.PodReadyToStartContainers, corev1.ConditionFalse, "")
	setPodCondition(s, corev1.ContainersReady, corev1.ConditionFalse, "PodCompleted")
	setPodCondition(s, corev1.PodReady, corev1.ConditionFalse, "PodCompleted")
	s.ContainerStatuses = containerStatuses(pod, func(c corev1.Container) corev1.ContainerState {
		t := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: now}
		for _, old := range before.ContainerStatuses {
			if old.Name == c.Name && old.State.Running != nil {
				t.StartedAt = old.State.Running.StartedAt
			}
		}
		return corev1.ContainerState{Terminated: t}
	}, false)
	n.statuses.SetPodStatus(log, pod, stopped)
	log.V(4).Info("Pod termination stopped all running containers", "pod", klog.KObj(pod), "podUID", pod.UID)
	terminatingEnded := time.Now()
	*lastSync = terminatingEnded
	w.terminated.Store(true)
	n.cfg.Volumes.PodTerminated(pod.UID)
	// podWorkers.completeTerminating's line, so that the teardown's stages
	// read alike from both kubelets' logs (tools/diagnostics).
	log.V(4).Info("Pod terminated all containers successfully", "podUID", pod.UID)

	// SyncTerminatedPod, after the relist that follows the terminating sync.
	if err := n.awaitRelist(ctx, terminatingEnded); err != nil {
		return err
	}
	log.V(4).Info("SyncTerminatedPod enter", "pod", klog.KObj(pod), "podUID", pod.UID)
	latest := w.latest.Load()
	n.statuses.SetPodStatus(log, latest, stopped)
	if err := n.cfg.Volumes.UnmountPodVolumes(ctx, pod); err != nil {
		return fmt.Errorf("unmount volumes: %w", err)
	}
	n.statuses.TerminatePod(log, latest)
	log.V(3).Info("Pod terminated", "pod", klog.KObj(pod))
	return nil
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
