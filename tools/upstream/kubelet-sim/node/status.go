package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-helpers/apimachinery/lease"
	nodeutil "k8s.io/component-helpers/node/util"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/kubernetes/pkg/kubelet/nodestatus"
	"k8s.io/kubernetes/pkg/kubelet/status"
)

// Node is the simulated kubelet of one node.
type Node struct {
	cfg      Config
	log      klog.Logger
	recorder record.EventRecorder
	pods     *podWorkers
	// nodes is the kubelet's node lister (its informer of this one node),
	// read first by each status update.
	nodes corelisters.NodeLister
	// volumesInUse is the kubelet's volumesInUse status setter.
	volumesInUse nodestatus.Setter

	// started is when the node began.
	started time.Time
	// statuses is the status manager: the pod workers set statuses there.
	statuses status.Manager
	// relists are the PLEG's periodic relists, from started.
	relists *relistSchedule

	lastReport time.Time // when node status was last written
	// delayAfterChange is the one-time random delay added to the report
	// period after a status change (kubelet.delayAfterNodeStatusChange).
	delayAfterChange time.Duration
}

// NewNode validates cfg and returns a node ready to Run.
func NewNode(cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, started: time.Now()}
	n.relists = newRelistSchedule(n.started, cfg.RelistPeriod, cfg.Runtime.Relist)
	n.volumesInUse = nodestatus.VolumesInUse(cfg.Volumes.ReconcilerStatesHasBeenSynced, cfg.Volumes.VolumesInUse)
	return n, nil
}

// Run registers the node and serves it until ctx ends.
func (n *Node) Run(ctx context.Context) error {
	n.log = klog.FromContext(ctx).WithValues("node", n.cfg.NodeName)
	ctx = klog.NewContext(ctx, n.log)

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: n.cfg.Client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	n.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: n.cfg.NodeName})

	// kubelet.NewMainKubelet: the node informer, filtered to this node,
	// unless the caller shares one (kubelet-sim shares it with the volume
	// host, as the kubelet does).
	n.nodes = n.cfg.NodeLister
	if n.nodes == nil {
		factory := informers.NewSharedInformerFactoryWithOptions(n.cfg.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, n.cfg.NodeName).String()
		}))
		n.nodes = factory.Core().V1().Nodes().Lister()
		factory.Start(ctx.Done())
		defer factory.Shutdown()
	}

	if err := n.register(ctx); err != nil {
		return err
	}
	if err := n.cfg.Volumes.Start(ctx, n.recorder); err != nil {
		return fmt.Errorf("node %s: volume manager: %w", n.cfg.NodeName, err)
	}

	// The upstream kubelet heartbeats through its node Lease with this very
	// controller (kubelet.NewMainKubelet -> lease.NewController).
	renew := time.Duration(float64(time.Duration(n.cfg.NodeLeaseDurationSeconds)*time.Second) * nodeLeaseRenewIntervalFraction)
	leases := lease.NewController(clock.RealClock{}, n.cfg.HeartbeatClient, n.cfg.NodeName, n.cfg.NodeLeaseDurationSeconds,
		nil, renew, n.cfg.NodeName, corev1.NamespaceNodeLease, n.setLeaseOwner)
	n.pods = newPodWorkers(n)
	// Upstream's status manager, fed by the pod workers: one goroutine
	// writes the pods' statuses (a GET and a PATCH each) and deletes the
	// pods whose termination is finished. Its loop has no stop
	// (status.manager.Start runs wait.Forever): it outlives ctx, idle,
	// as it would in a kubelet.
	n.statuses = status.NewManager(n.cfg.Client, n.pods, n.pods, noStartupLatency{})
	n.statuses.Start(ctx)
	// The lease and pod loops end with ctx; Run returns only after they
	// have, so a stopped node leaves nothing running.
	var loops sync.WaitGroup
	loops.Go(func() { leases.Run(ctx) })
	loops.Go(func() { n.pods.run(ctx) })
	defer loops.Wait()

	n.syncNodeStatusLoop(ctx)
	return nil
}

// register creates the Node object, or adopts an existing one (a restarted
// kubelet), as kubelet.registerWithAPIServer does.
func (n *Node) register(ctx context.Context) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.cfg.NodeName,
			Labels: map[string]string{
				corev1.LabelHostname:   n.cfg.NodeName,
				corev1.LabelOSStable:   runtime.GOOS,
				corev1.LabelArchStable: runtime.GOARCH,
			},
			Annotations: map[string]string{ControllerManagedAttachAnnotation: "true"},
		},
	}
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 10, Cap: 7 * time.Second},
		func(ctx context.Context) (bool, error) {
			_, err := n.cfg.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			switch {
			case err == nil:
				n.log.V(2).Info("Registered node")
				return true, nil
			case apierrors.IsAlreadyExists(err):
				n.log.V(2).Info("Node already registered")
				return true, nil
			default:
				n.log.Info("Unable to register node, will retry", "err", err)
				return false, nil
			}
		})
	if err != nil {
		return fmt.Errorf("register node %s: %w", n.cfg.NodeName, err)
	}
	return n.updateNodeStatus(ctx, true)
}

// syncNodeStatusLoop writes node status every NodeStatusUpdateFrequency
// (with the kubelet's 4% sliding jitter) when it changed or
// NodeStatusReportFrequency passed (kubelet.syncNodeStatus). Volumes the
// volume manager newly needs are reported at the next tick, not at once, as
// upstream: that delay is part of what the harness measures.
func (n *Node) syncNodeStatusLoop(ctx context.Context) {
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		if err := n.updateNodeStatus(ctx, false); err != nil && ctx.Err() == nil {
			n.log.Error(err, "Error updating node status, will retry")
		}
	}, n.cfg.NodeStatusUpdateFrequency, 0.04, true)
}

// updateNodeStatus mirrors kubelet.updateNodeStatus: up to
// nodeStatusUpdateRetry tries, the first reading the node from the lister
// and the others from the API server.
func (n *Node) updateNodeStatus(ctx context.Context, force bool) error {
	const nodeStatusUpdateRetry = 5
	var err error
	for try := 0; try < nodeStatusUpdateRetry; try++ {
		if err = n.tryUpdateNodeStatus(ctx, try, force); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n.log.V(4).Info("Error updating node status, will retry", "err", err)
	}
	return err
}

// tryUpdateNodeStatus mirrors kubelet.tryUpdateNodeStatus: read the node
// (the lister on the first try, a live GET after), set the fields the
// kubelet owns, and send a two-way strategic merge patch
// (nodeutil.PatchNodeStatus), so fields owned by others such as
// status.volumesAttached are never overwritten. Unchanged status is sent only
// once the report period (plus the random delay drawn after the last change)
// has passed; either way, what the node lists in volumesInUse is marked as
// reported (kubelet.markVolumesFromNode). force (registration) always sends.
func (n *Node) tryUpdateNodeStatus(ctx context.Context, try int, force bool) error {
	var original *corev1.Node
	var err error
	if try == 0 && n.nodes != nil {
		original, err = n.nodes.Get(n.cfg.NodeName)
	} else {
		original, err = n.cfg.HeartbeatClient.CoreV1().Nodes().Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", n.cfg.NodeName, err)
	}
	node := original.DeepCopy()
	if err := n.setNodeStatus(ctx, node); err != nil {
		return err
	}
	changed := !equality.Semantic.DeepEqual(original.Status, node.Status)
	if !changed && !force && !n.reportPeriodExpired() {
		n.cfg.Volumes.MarkVolumesAsReportedInUse(node.Status.VolumesInUse)
		return nil
	}
	// A change (or the first report) draws a new one-time delay, so that
	// nodes changed together do not report together from then on; a report
	// made because the period expired resets it (kubelet.calculateDelay).
	if changed || force || n.lastReport.IsZero() {
		n.delayAfterChange = time.Duration(float64(n.cfg.NodeStatusReportFrequency) * (-0.5 + rand.Float64()))
	} else {
		n.delayAfterChange = 0
	}
	// Heartbeat times only move when status is actually reported (the
	// kubelet's setters stamp them; nodeStatusHasChanged ignores them).
	now := metav1.Now()
	for i := range node.Status.Conditions {
		node.Status.Conditions[i].LastHeartbeatTime = now
	}
	updated, _, err := nodeutil.PatchNodeStatus(n.cfg.HeartbeatClient.CoreV1(), types.NodeName(n.cfg.NodeName), original, node)
	if err != nil {
		return err
	}
	n.lastReport = time.Now()
	// kubelet.markVolumesFromNode: what the server now lists is "reported".
	n.cfg.Volumes.MarkVolumesAsReportedInUse(updated.Status.VolumesInUse)
	return nil
}

// nextRelist is when the first periodic PLEG relist begun after t has
// filled the pod cache (relistSchedule.after).
func (n *Node) nextRelist(t time.Time) time.Time {
	return n.relists.after(t)
}

// awaitRelist waits until nextRelist(t).
func (n *Node) awaitRelist(ctx context.Context, t time.Time) error {
	d := time.Until(n.nextRelist(t))
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// reportPeriodExpired is kubelet.isUpdateStatusPeriodExpired.
func (n *Node) reportPeriodExpired() bool {
	return time.Since(n.lastReport) >= n.cfg.NodeStatusReportFrequency+n.delayAfterChange
}

// nodeInternalIP is every simulated node's address: they all run on
// this host.
const nodeInternalIP = "127.0.0.1"

// setNodeStatus sets what the kubelet's node status setters own
// (pkg/kubelet/nodestatus): addresses, capacity, node info, the four
// conditions, and volumes in use (the last through the kubelet's own
// setter, nodestatus.VolumesInUse).
func (n *Node) setNodeStatus(ctx context.Context, node *corev1.Node) error {
	s := &node.Status
	s.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: nodeInternalIP},
		{Type: corev1.NodeHostName, Address: n.cfg.NodeName},
	}
	s.Capacity = n.cfg.Capacity.DeepCopy()
	s.Allocatable = n.cfg.Capacity.DeepCopy()
	s.NodeInfo.KubeletVersion = n.cfg.KubeletVersion
	s.NodeInfo.OperatingSystem = runtime.GOOS
	s.NodeInfo.Architecture = runtime.GOARCH
	s.NodeInfo.ContainerRuntimeVersion = "strandlab-sim://0"
	s.NodeInfo.MachineID = n.cfg.NodeName
	s.NodeInfo.SystemUUID = n.cfg.NodeName
	s.NodeInfo.BootID = n.cfg.NodeName

	setCondition(s, corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available")
	setCondition(s, corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure")
	setCondition(s, corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available")
	// nodestatus.ReadyCondition: a storage error set by a volume plugin
	// (the CSI plugin until it has initialised the node's CSINode) keeps
	// the node NotReady.
	if err := n.storageError(); err != nil {
		setCondition(s, corev1.NodeReady, corev1.ConditionFalse, "KubeletNotReady", err.Error())
	} else {
		setCondition(s, corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
	}

	return n.volumesInUse(ctx, node)
}

// storageError is the error the volume plugins set on the kubelet
// (VolumeHost SetKubeletError), from a volume manager that has one.
func (n *Node) storageError() error {
	if v, ok := n.cfg.Volumes.(interface{ KubeletError() error }); ok {
		return v.KubeletError()
	}
	return nil
}

// setCondition updates a condition in place, moving LastTransitionTime only
// when the status changes (nodestatus.ReadyCondition and friends).
func setCondition(s *corev1.NodeStatus, t corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) {
	now := metav1.Now()
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = status, reason, message
		return
	}
	s.Conditions = append(s.Conditions, corev1.NodeCondition{
		Type: t, Status: status, Reason: reason, Message: message,
		LastHeartbeatTime: now, LastTransitionTime: now,
	})
}

// setLeaseOwner makes the node the owner of its Lease so the Lease goes with
// the Node; it mirrors pkg/kubelet/util.SetNodeOwnerFunc.
func (n *Node) setLeaseOwner(l *coordinationv1.Lease) error {
	if len(l.OwnerReferences) > 0 {
		return nil
	}
	node, err := n.cfg.HeartbeatClient.CoreV1().Nodes().Get(context.TODO(), n.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	l.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: corev1.SchemeGroupVersion.WithKind("Node").Version,
		Kind:       "Node",
		Name:       node.Name,
		UID:        node.UID,
	}}
	return nil
}
