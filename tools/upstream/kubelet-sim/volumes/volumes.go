// Package volumes runs, for one simulated node, the kubelet's own volume
// manager (k8s.io/kubernetes/pkg/kubelet/volumemanager) with the real CSI
// volume plugin (pkg/volume/csi) talking gRPC to the node's CSI driver. What
// the kubelet itself hands NewVolumeManager is provided here: the volume host
// (host.go), the pod manager and pod state provider (PodSet), a fake mounter
// and host utils (the local provider makes no real mounts; the driver
// publishes by symlink), and the driver's registration, done through the CSI
// plugin's registration handler as the kubelet's plugin manager does.
//
// Manager is the VolumeManager of package node (WaitForAttachAndMount,
// UnmountPodVolumes, VolumesInUse, ReconcilerStatesHasBeenSynced,
// MarkVolumesAsReportedInUse, Start): kubelet-sim's pod and node status
// loops drive upstream's volume manager through it.
//
// One node per process: the CSI plugin keeps its registered drivers
// (csiDrivers, keyed by driver name only), its node info manager (nim) and
// its registration handler (PluginHandler) in package variables. Two nodes
// of one driver in one process would share one endpoint and one node's
// CSINode/annotation updates, and the second registration fails outright
// ("Another driver with the same name is already registered"). Start
// refuses a second Manager in the same process.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/mount-utils"

	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/volumemanager"
	"k8s.io/kubernetes/pkg/volume"
	"k8s.io/kubernetes/pkg/volume/csi"
	"k8s.io/kubernetes/pkg/volume/util/hostutil"
	"k8s.io/kubernetes/pkg/volume/util/volumepathhandler"
)

// CSIVersions are the CSI versions the driver reports in its registration
// GetInfo (docs/csi-driver.md: supported versions ["1.0.0"]).
var CSIVersions = []string{"1.0.0"}

// registrationRetryPeriod mirrors the plugin manager's reconciler period
// (pkg/kubelet/pluginmanager/plugin_manager.go loopSleepDuration): a failed
// registration is retried at its next pass.
const registrationRetryPeriod = time.Second

// csiNodeInitPollPeriod is how often register looks whether the CSI
// plugin's CSINode initialisation (first attempt after 30 ms) is done.
const csiNodeInitPollPeriod = 20 * time.Millisecond

// Config describes one node's volume manager.
type Config struct {
	NodeName string
	// Client acts as system:node:<NodeName>.
	Client kubernetes.Interface
	// DriverName is the CSI driver to register.
	DriverName string
	// Endpoint is the path of the node's CSI socket (a unix socket), the
	// endpoint node-driver-registrar would report to the kubelet.
	Endpoint string
	// RootDir is the kubelet's root directory (--root-dir); pods/ and
	// plugins/ go under it. Paths inside it are the kubelet's.
	RootDir string
	// SourcesReady reports whether the pod loop has seen all pods bound to
	// the node (the kubelet's config.SourcesReady; the populator's initial
	// pass and the reconciler's first cleanup wait for it). nil: always.
	SourcesReady func() bool
	// NodeInformers is the kubelet's informer factory of its own Node
	// (filtered to NodeName), shared with the node status loop as the
	// kubelet shares its nodeLister; nil: the manager makes its own.
	NodeInformers informers.SharedInformerFactory
}

// Manager is one node's volume manager.
type Manager struct {
	cfg      Config
	pods     *PodSet
	mounter  *mount.FakeMounter
	hostUtil *hostutil.FakeHostUtil

	mu         sync.Mutex
	vm         volumemanager.VolumeManager // nil until Start
	host       *host
	registered bool
}

// New validates cfg and returns a manager to Start.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.NodeName == "":
		return nil, errors.New("volumes: node name must not be empty")
	case cfg.Client == nil:
		return nil, fmt.Errorf("volumes: node %s: no API client", cfg.NodeName)
	case cfg.DriverName == "" || cfg.Endpoint == "":
		return nil, fmt.Errorf("volumes: node %s: CSI driver name and endpoint are required", cfg.NodeName)
	case cfg.RootDir == "":
		return nil, fmt.Errorf("volumes: node %s: no root directory", cfg.NodeName)
	}
	if cfg.SourcesReady == nil {
		cfg.SourcesReady = func() bool { return true }
	}
	if cfg.NodeInformers == nil {
		cfg.NodeInformers = NodeInformers(cfg.Client, cfg.NodeName)
	}
	return &Manager{
		cfg: cfg, pods: NewPodSet(),
		mounter:  mount.NewFakeMounter(nil),
		hostUtil: hostutil.NewFakeHostUtil(nil),
	}, nil
}

// processSlot is the one Manager per process the CSI plugin's package
// variables allow (see the package comment).
var processSlot struct {
	sync.Mutex
	owner *Manager
}

func (m *Manager) claimProcess() error {
	processSlot.Lock()
	defer processSlot.Unlock()
	if o := processSlot.owner; o != nil && o != m {
		return fmt.Errorf("volumes: node %s: node %s already runs the CSI plugin in this process; upstream's CSI plugin keeps drivers and node info in package variables, so one process serves one node", m.cfg.NodeName, o.cfg.NodeName)
	}
	processSlot.owner = m
	return nil
}

func (m *Manager) releaseProcess() {
	processSlot.Lock()
	defer processSlot.Unlock()
	if processSlot.owner == m {
		processSlot.owner = nil
	}
}

// NodeInformers is the kubelet's node informer factory
// (kubelet.NewMainKubelet): one Node, selected by name.
func NodeInformers(client kubernetes.Interface, nodeName string) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, nodeName).String()
	}))
}

// Pods is the pod set the volume manager reads (see PodSet).
func (m *Manager) Pods() *PodSet { return m.pods }

// Start builds the volume manager as kubelet.NewMainKubelet does (the
// volume plugin manager with the CSI plugin, then NewVolumeManager with
// controller attach/detach enabled), runs it (volumeManager.Run), and, once
// the CSI plugin has initialised the node's CSINode, registers the CSI
// driver through csi.PluginHandler as the plugin manager does for a
// node-driver-registrar socket (ValidatePlugin, RegisterPlugin), retrying
// every second until it succeeds or ctx ends. The node must be
// registered already: the CSI plugin's Init starts initialising its CSINode,
// owned by the Node, and exits the process if that fails for ~140 s
// (csi_plugin.go initializeCSINode).
func (m *Manager) Start(ctx context.Context, recorder record.EventRecorder) error {
	if err := m.claimProcess(); err != nil {
		return err
	}
	c := m.cfg
	h := newHost(hostConfig{
		nodeName: types.NodeName(c.NodeName), rootDir: c.RootDir, client: c.Client, recorder: recorder,
		mounter: m.mounter, hostUtil: m.hostUtil,
	},
		// kubelet.NewInitializedVolumePluginMgr: resync 0.
		informers.NewSharedInformerFactory(c.Client, 0),
		c.NodeInformers,
		ctx.Done())
	if err := os.MkdirAll(h.GetPodsDir(), 0o750); err != nil {
		m.releaseProcess()
		return err
	}
	// The kubelet starts its node informer in NewMainKubelet, before the
	// volume manager runs.
	h.nodeFactory.Start(ctx.Done())

	plugins := &volume.VolumePluginMgr{}
	if err := plugins.InitPlugins(csi.ProbeVolumePlugins(), nil /* no dynamic prober */, h); err != nil {
		m.releaseProcess()
		return fmt.Errorf("volumes: node %s: init volume plugins: %w", c.NodeName, err)
	}
	vm := volumemanager.NewVolumeManager(
		true, // controllerAttachDetachEnabled: the node carries the annotation
		types.NodeName(c.NodeName),
		m.pods, m.pods,
		c.Client,
		plugins,
		m.mounter,
		m.hostUtil,
		h.GetPodsDir(),
		recorder,
		volumepathhandler.NewBlockVolumePathHandler(), // block volumes only; strandlab's are filesystem
		nil, 0, // volume health: CSIVolumeHealth is alpha, off
	)
	m.mu.Lock()
	m.vm, m.host = vm, h
	m.mu.Unlock()

	ready := config.NewSourcesReady(func(sets.Set[string]) bool { return c.SourcesReady() })
	go vm.Run(ctx, ready)

	return m.register(ctx, h)
}

// register does what the plugin manager's GenerateRegisterPluginFunc does
// with the handler once node-driver-registrar answered GetInfo.
func (m *Manager) register(ctx context.Context, h *host) error {
	c := m.cfg
	log := klog.FromContext(ctx).WithValues("node", c.NodeName, "driver", c.DriverName)
	// Register only once the CSI plugin has initialised the node's CSINode
	// (initializeCSINode clears the kubelet error). The real kubelet gets
	// this order for free: its plugin manager starts with the runtime and
	// the registrar's socket appears only once the driver's pod runs, long
	// after the first 30 ms attempt. Registering earlier races it: the
	// registration creates a CSINode owned by an empty node UID (nim's
	// nodeID is set by the initialiser), which the initialiser then deletes
	// as owned by another node (nodeinfomanager ensureNodeOwnsCSINode) and
	// recreates without the driver.
	err := wait.PollUntilContextCancel(ctx, csiNodeInitPollPeriod, true, func(context.Context) (bool, error) {
		return h.kubeletError() == nil, nil
	})
	if err != nil {
		return fmt.Errorf("volumes: node %s: register CSI driver %s: CSINode not initialised: %w (last error: %v)", c.NodeName, c.DriverName, err, h.kubeletError())
	}
	for {
		err := csi.PluginHandler.ValidatePlugin(ctx, c.DriverName, c.Endpoint, CSIVersions)
		if err == nil {
			err = csi.PluginHandler.RegisterPlugin(ctx, c.DriverName, c.Endpoint, CSIVersions, nil)
		}
		if err == nil {
			m.mu.Lock()
			m.registered = true
			m.mu.Unlock()
			log.V(2).Info("CSI driver registered", "endpoint", c.Endpoint)
			return nil
		}
		log.V(2).Info("CSI driver registration failed, will retry", "err", err)
		t := time.NewTimer(registrationRetryPeriod)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("volumes: node %s: register CSI driver %s: %w (last error: %v)", c.NodeName, c.DriverName, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Release deregisters the driver (csi.PluginHandler.DeRegisterPlugin, which
// also removes it from the CSINode and the node annotation) and frees the
// process for another Manager. kubelet-sim need not call it at exit; tests
// that start several managers one after another do.
func (m *Manager) Release(ctx context.Context) {
	m.mu.Lock()
	registered := m.registered
	m.registered = false
	m.mu.Unlock()
	if registered {
		csi.PluginHandler.DeRegisterPlugin(ctx, m.cfg.DriverName, m.cfg.Endpoint)
	}
	m.releaseProcess()
}

func (m *Manager) manager() volumemanager.VolumeManager {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.vm
}

var errNotStarted = errors.New("volumes: volume manager not started")

// AdmitPod adds the pod, or its newer version, to the pod set, which the
// desired state populator reads (node.VolumeManager).
func (m *Manager) AdmitPod(pod *corev1.Pod) { m.pods.Add(pod) }

// PodTerminating marks the pod's containers as being stopped
// (node.VolumeManager).
func (m *Manager) PodTerminating(uid types.UID) { m.pods.Terminating(uid) }

// PodTerminated marks the pod's containers as stopped, which lets the
// populator drop its volumes from the desired state (node.VolumeManager).
func (m *Manager) PodTerminated(uid types.UID) { m.pods.Terminated(uid) }

// WaitForAttachAndMount adds the pod to the pod set (if it was not
// admitted yet) and waits, for the
// volumes VolumeManagerPod keeps, as the kubelet's SyncPod does (volumeManager.WaitForAttachAndMount: 300 ms polls,
// at most 2m3s; its error text and wrapping, so wait.Interrupted tells a
// timeout or a cancelled wait).
func (m *Manager) WaitForAttachAndMount(ctx context.Context, pod *corev1.Pod) error {
	vm := m.manager()
	if vm == nil {
		return errNotStarted
	}
	m.pods.Add(pod)
	return vm.WaitForAttachAndMount(ctx, VolumeManagerPod(pod))
}

// UnmountPodVolumes marks the pod's containers stopped (if PodTerminated
// has not), which lets the
// populator drop its volumes from the desired state, and waits until none
// is mounted for it (volumeManager.WaitForUnmount, as syncTerminatedPod
// does). The pod then leaves the pod set. The device unmount (NodeUnstage)
// and the volume's leaving the actual state, and so volumesInUse, follow in
// the reconciler, as upstream.
func (m *Manager) UnmountPodVolumes(ctx context.Context, pod *corev1.Pod) error {
	vm := m.manager()
	if vm == nil {
		return errNotStarted
	}
	m.pods.Terminated(pod.UID)
	if err := vm.WaitForUnmount(ctx, pod); err != nil {
		return err
	}
	m.pods.Remove(pod.UID)
	return nil
}

// VolumesInUse is volumeManager.GetVolumesInUse (nil before Start).
func (m *Manager) VolumesInUse() []corev1.UniqueVolumeName {
	if vm := m.manager(); vm != nil {
		return vm.GetVolumesInUse()
	}
	return nil
}

// MarkVolumesAsReportedInUse is volumeManager.MarkVolumesAsReportedInUse.
func (m *Manager) MarkVolumesAsReportedInUse(reported []corev1.UniqueVolumeName) {
	if vm := m.manager(); vm != nil {
		vm.MarkVolumesAsReportedInUse(reported)
	}
}

// ReconcilerStatesHasBeenSynced is what the kubelet's VolumesInUse node
// status setter waits for before it sets status.volumesInUse
// (nodestatus.VolumesInUse).
func (m *Manager) ReconcilerStatesHasBeenSynced() bool {
	if vm := m.manager(); vm != nil {
		return vm.ReconcilerStatesHasBeenSynced()
	}
	return false
}

// KubeletError is the storage error the volume plugins set on the kubelet
// (SetKubeletError): non-nil while the CSI plugin has not initialised the
// node's CSINode, during which the kubelet reports the node NotReady.
func (m *Manager) KubeletError() error {
	m.mu.Lock()
	h := m.host
	m.mu.Unlock()
	if h == nil {
		return errNotStarted
	}
	return h.kubeletError()
}

// NodeLister is the node informer the volume host reads (the kubelet's
// nodeLister), for the node status loop to share; nil before Start.
func (m *Manager) NodeLister() corelisters.NodeLister {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.host == nil {
		return nil
	}
	return m.host.nodeLister
}

// legacyWaitTimeout is what wait.PollImmediate returned on timeout
// (wait.ErrWaitTimeout), the end of v1.27's FailedMount message.
const legacyWaitTimeout = "timed out waiting for the condition"

// LegacyTimeoutMessage turns a WaitForAttachAndMount error that ended with
// the wait's timeout into the text kubelets up to v1.27 recorded
// ("unmounted volumes=[...], ...: timed out waiting for the condition"),
// for kubelet-sim's --failed-mount-on-timeout. ok is false for any other
// error. Upstream's error is a wrapped fmt error, so the cause is replaced
// in its text.
func LegacyTimeoutMessage(err error) (msg string, ok bool) {
	if !errors.Is(err, context.DeadlineExceeded) {
		return "", false
	}
	text, cause := err.Error(), context.DeadlineExceeded.Error()
	if !strings.HasSuffix(text, ": "+cause) || !strings.HasPrefix(text, "unmounted volumes=") {
		return "", false
	}
	return strings.TrimSuffix(text, cause) + legacyWaitTimeout, true
}
