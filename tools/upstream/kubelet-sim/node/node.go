// Package node is strandlab's simulated kubelet of one node, the only
// simulated component of a local cluster. A Node registers the Node object,
// keeps its status and Lease fresh, and runs the lifecycle of the pods bound
// to it (Pending -> Running, graceful deletion, deletion confirmed). No
// container runs: a start or stop takes the time a real runtime's does
// (package containerruntime), and termination waits for the PLEG's relists
// as the pod workers do. Everything
// the kubelet says to the API server (node status, leases, pod status,
// deletion) is said as the upstream kubelet says it, under the node's own
// identity (system:node:<name>).
//
// Volumes are not simulated: they are behind the VolumeManager interface,
// which kubelet-sim fills with upstream's own volume manager and CSI plugin
// (package volumes). What is simulated, and the upstream function each
// stand-in replaces, is listed in docs/kubelet-sim.md.
package node

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/strandlab/strandlab/tools/upstream/kubelet-sim/containerruntime"
)

// Defaults of the upstream kubelet (KubeletConfiguration v1beta1 defaults).
const (
	DefaultNodeStatusUpdateFrequency = 10 * time.Second
	DefaultNodeStatusReportFrequency = 5 * time.Minute
	DefaultNodeLeaseDurationSeconds  = 40
	// nodeLeaseRenewIntervalFraction mirrors kubelet.nodeLeaseRenewIntervalFraction.
	nodeLeaseRenewIntervalFraction = 0.25
	// DefaultPodSyncBackOff is how long a pod worker waits before it syncs a
	// pod again after a failed sync (kubelet.backOffPeriod), plus up to 50%
	// jitter (pod_workers.go workerBackOffPeriodJitterFactor).
	DefaultPodSyncBackOff = 10 * time.Second
	// DefaultRelistPeriod is the PLEG's periodic relist
	// (kubelet.genericPlegRelistPeriod): a pod worker's terminating and
	// terminated syncs each wait for a relist begun after the pod's
	// previous sync ended (podWorkers.podWorkerLoop, podCache.GetNewerThan).
	DefaultRelistPeriod = time.Second
)

// ControllerManagedAttachAnnotation tells the attach/detach controller that
// it, not the kubelet, attaches this node's volumes
// (volumehelper.ControllerManagedAttachAnnotation). The controller ignores
// nodes without it (and their pods).
const ControllerManagedAttachAnnotation = "volumes.kubernetes.io/controller-managed-attach-detach"

// Config describes one simulated node.
type Config struct {
	NodeName string
	// Client acts as system:node:<NodeName>.
	Client kubernetes.Interface
	// HeartbeatClient is the node's client for its status and Lease, as
	// the kubelet's own (cmd/kubelet/app.RunKubelet's heartbeat client):
	// no client-side rate limit, so a busy pod sync never delays a status
	// update, and a timeout (main.go builds it). nil: Client.
	HeartbeatClient kubernetes.Interface
	// KubeletVersion is reported in node.status.nodeInfo.
	KubeletVersion string
	// Capacity of the node; defaults to 8 CPUs, 32Gi memory, 110 pods.
	Capacity corev1.ResourceList
	// PodCIDRIndex makes pod IPs unique across nodes: 10.244.<index>.x.
	PodCIDRIndex int
	// Volumes is the volume manager; nil means pods have no attachable volumes.
	Volumes VolumeManager
	// NodeLister is the kubelet's informer of its own Node, shared with the
	// volume host; nil: the node starts its own.
	NodeLister corelisters.NodeLister

	NodeStatusUpdateFrequency time.Duration
	NodeStatusReportFrequency time.Duration
	NodeLeaseDurationSeconds  int32

	// FailedMountOnTimeout records a FailedMount event when a pod's volumes
	// are not mounted within the wait's 2m3s, as kubelets up to v1.27 did.
	// v1.28 and later (v1.37.2 included) record none for a timeout
	// (kubernetes #127004), so a stranded volume shows no event at all.
	FailedMountOnTimeout bool

	// Runtime is the container runtime: the time a pod's sandbox and
	// containers take to start and stop, and the PLEG's relist before a
	// started container is reported. nil: an instant runtime.
	Runtime *containerruntime.Runtime

	// PodSyncBackOff is the pod workers' back-off after a failed sync
	// (default DefaultPodSyncBackOff, the kubelet's); tests shorten it.
	PodSyncBackOff time.Duration
	// RelistPeriod is the PLEG's periodic relist (default
	// DefaultRelistPeriod, the kubelet's); tests shorten it.
	RelistPeriod time.Duration
}

func (c *Config) setDefaults() error {
	if c.NodeName == "" {
		return fmt.Errorf("node: name must not be empty")
	}
	if c.Client == nil {
		return fmt.Errorf("node %s: no API client", c.NodeName)
	}
	if c.Capacity == nil {
		c.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("8"),
			corev1.ResourceMemory:           resource.MustParse("32Gi"),
			corev1.ResourcePods:             resource.MustParse("110"),
			corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		}
	}
	if c.Volumes == nil {
		c.Volumes = NoVolumes{}
	}
	if c.HeartbeatClient == nil {
		c.HeartbeatClient = c.Client
	}
	if c.NodeStatusUpdateFrequency == 0 {
		c.NodeStatusUpdateFrequency = DefaultNodeStatusUpdateFrequency
	}
	if c.NodeStatusReportFrequency == 0 {
		c.NodeStatusReportFrequency = DefaultNodeStatusReportFrequency
	}
	if c.PodSyncBackOff == 0 {
		c.PodSyncBackOff = DefaultPodSyncBackOff
	}
	if c.RelistPeriod == 0 {
		c.RelistPeriod = DefaultRelistPeriod
	}
	if c.NodeLeaseDurationSeconds == 0 {
		c.NodeLeaseDurationSeconds = DefaultNodeLeaseDurationSeconds
	}
	return nil
}
