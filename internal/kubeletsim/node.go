package kubeletsim

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-helpers/apimachinery/lease"
	nodeutil "k8s.io/component-helpers/node/util"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Node is the simulated kubelet of one node.
type Node struct {
	cfg      Config
	log      klog.Logger
	recorder record.EventRecorder
	pods     *podWorkers

	lastReport time.Time // when node status was last written
}

// NewNode validates cfg and returns a node ready to Run.
func NewNode(cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Node{cfg: cfg}, nil
}

// Run registers the node and serves it until ctx ends.
func (n *Node) Run(ctx context.Context) error {
	n.log = klog.FromContext(ctx).WithValues("node", n.cfg.NodeName)
	ctx = klog.NewContext(ctx, n.log)

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: n.cfg.Client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	n.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: n.cfg.NodeName})

	if err := n.register(ctx); err != nil {
		return err
	}
	if err := n.cfg.Volumes.Start(ctx, n.recorder); err != nil {
		return fmt.Errorf("node %s: volume manager: %w", n.cfg.NodeName, err)
	}

	// The upstream kubelet heartbeats through its node Lease with this very
	// controller (kubelet.NewMainKubelet -> lease.NewController).
	renew := time.Duration(float64(time.Duration(n.cfg.NodeLeaseDurationSeconds)*time.Second) * nodeLeaseRenewIntervalFraction)
	leases := lease.NewController(clock.RealClock{}, n.cfg.Client, n.cfg.NodeName, n.cfg.NodeLeaseDurationSeconds,
		nil, renew, n.cfg.NodeName, corev1.NamespaceNodeLease, n.setLeaseOwner)
	n.pods = newPodWorkers(n)
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

// updateNodeStatus mirrors kubelet.tryUpdateNodeStatus: read the node, set
// the fields the kubelet owns, and send a two-way strategic merge patch
// (nodeutil.PatchNodeStatus), so fields owned by others such as
// status.volumesAttached are never overwritten. It retries on errors like
// kubelet.updateNodeStatus (nodeStatusUpdateRetry times).
func (n *Node) updateNodeStatus(ctx context.Context, force bool) error {
	const nodeStatusUpdateRetry = 5
	var err error
	for i := 0; i < nodeStatusUpdateRetry; i++ {
		if err = n.tryUpdateNodeStatus(ctx, force); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}

func (n *Node) tryUpdateNodeStatus(ctx context.Context, force bool) error {
	node, err := n.cfg.Client.CoreV1().Nodes().Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node: %w", err)
	}
	original := node.DeepCopy()
	n.setNodeStatus(node)
	changed := !equality.Semantic.DeepEqual(original.Status, node.Status)
	if !changed && !force && time.Since(n.lastReport) < n.cfg.NodeStatusReportFrequency {
		n.cfg.Volumes.MarkVolumesAsReportedInUse(node.Status.VolumesInUse)
		return nil
	}
	if changed || force || time.Since(n.lastReport) >= n.cfg.NodeStatusReportFrequency {
		// Heartbeat times only move when status is actually reported
		// (kubelet: setters run only on report).
		now := metav1.Now()
		for i := range node.Status.Conditions {
			node.Status.Conditions[i].LastHeartbeatTime = now
		}
	}
	updated, _, err := nodeutil.PatchNodeStatus(n.cfg.Client.CoreV1(), types.NodeName(n.cfg.NodeName), original, node)
	if err != nil {
		return err
	}
	n.lastReport = time.Now()
	// kubelet.markVolumesFromNode: what the server now lists is "reported".
	n.cfg.Volumes.MarkVolumesAsReportedInUse(updated.Status.VolumesInUse)
	return nil
}

// setNodeStatus sets what the kubelet's node status setters own
// (pkg/kubelet/nodestatus): addresses, capacity, node info, the four
// conditions, and volumes in use.
func (n *Node) setNodeStatus(node *corev1.Node) {
	s := &node.Status
	s.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
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
	setCondition(s, corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")

	inUse := n.cfg.Volumes.VolumesInUse()
	slices.Sort(inUse)
	s.VolumesInUse = inUse
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
	node, err := n.cfg.Client.CoreV1().Nodes().Get(context.TODO(), n.cfg.NodeName, metav1.GetOptions{})
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
