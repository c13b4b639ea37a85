package volumes

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/mount-utils"

	"k8s.io/kubernetes/pkg/kubelet/kubeletconfig"
	"k8s.io/kubernetes/pkg/volume"
	"k8s.io/kubernetes/pkg/volume/util/hostutil"
	"k8s.io/kubernetes/pkg/volume/util/subpath"
)

// host is the kubelet as the volume plugins see it: upstream's
// pkg/kubelet/volume_host.go kubeletVolumeHost, with kubelet-sim's own
// pieces behind it. It is a volume.KubeletVolumeHost, which is what makes the
// CSI plugin behave as it does in the kubelet (csiPlugin.Init: the CSIDriver
// lister from the host, no VolumeAttachment lister, so WaitForAttach, MountDevice
// and SetUp GET the VolumeAttachment live; CSINode initialisation).
//
// It deliberately is not a volume.AttachDetachVolumeHost: that is the
// attach/detach controller's host, and csiPlugin.Init drops its
// VolumeAttachment lister again for a kubelet host ("We don't run the
// volumeAttachmentLister in the kubelet context").
type host struct {
	hostConfig

	// informerFactory holds the CSIDriver informer only; VolumePluginMgr.Run
	// starts it (as kubelet.NewInitializedVolumePluginMgr sets it up).
	informerFactory  informers.SharedInformerFactory
	csiDriverLister  storagelisters.CSIDriverLister
	csiDriversSynced cache.InformerSynced
	// nodeLister is the kubelet's node informer (kubelet.NewMainKubelet:
	// field selector metadata.name=<node>), read by
	// GetAttachedVolumesFromNodeStatus, GetNodeLabels, GetNodeAllocatable.
	nodeLister  corelisters.NodeLister
	nodeFactory informers.SharedInformerFactory
	// stop ends WaitForCacheSync when the manager stops (upstream waits on
	// wait.NeverStop: the kubelet never stops its informers).
	stop <-chan struct{}

	mu         sync.Mutex
	kubeletErr error
}

var (
	_ volume.VolumeHost        = (*host)(nil)
	_ volume.KubeletVolumeHost = (*host)(nil)
)

// hostConfig is what newHost needs besides the informer factories.
type hostConfig struct {
	nodeName types.NodeName
	rootDir  string
	client   kubernetes.Interface
	recorder record.EventRecorder
	mounter  mount.Interface
	hostUtil hostutil.HostUtils
}

// newHost creates the host's informers (not started). csiFactory must be
// unfiltered; nodeFactory filtered to the node, as the kubelet's.
func newHost(c hostConfig, csiFactory, nodeFactory informers.SharedInformerFactory, stop <-chan struct{}) *host {
	// kubelet.NewInitializedVolumePluginMgr: the CSIDriver lister exists
	// before InitPlugins, because csiPlugin.Init reads it.
	csiDrivers := csiFactory.Storage().V1().CSIDrivers()
	nodes := nodeFactory.Core().V1().Nodes()
	return &host{
		hostConfig:      c,
		informerFactory: csiFactory, csiDriverLister: csiDrivers.Lister(), csiDriversSynced: csiDrivers.Informer().HasSynced,
		nodeLister: nodes.Lister(), nodeFactory: nodeFactory,
		stop: stop,
	}
}

// Paths: kubelet_getters.go (getPodsDir, getPluginDir, getPodVolumeDir, ...)
// with the kubeletconfig directory names.

func (h *host) GetPluginDir(pluginName string) string {
	return filepath.Join(h.rootDir, kubeletconfig.DefaultKubeletPluginsDirName, pluginName)
}

func (h *host) GetVolumeDevicePluginDir(pluginName string) string {
	return filepath.Join(h.rootDir, kubeletconfig.DefaultKubeletPluginsDirName, pluginName, kubeletconfig.DefaultKubeletVolumeDevicesDirName)
}

func (h *host) GetPodsDir() string {
	return filepath.Join(h.rootDir, kubeletconfig.DefaultKubeletPodsDirName)
}

func (h *host) podDir(podUID types.UID) string {
	return filepath.Join(h.GetPodsDir(), string(podUID))
}

func (h *host) GetPodVolumeDir(podUID types.UID, pluginName, volumeName string) string {
	return filepath.Join(h.podDir(podUID), kubeletconfig.DefaultKubeletVolumesDirName, pluginName, volumeName)
}

func (h *host) GetPodPluginDir(podUID types.UID, pluginName string) string {
	return filepath.Join(h.podDir(podUID), kubeletconfig.DefaultKubeletPluginsDirName, pluginName)
}

func (h *host) GetPodVolumeDeviceDir(podUID types.UID, pluginName string) string {
	return filepath.Join(h.podDir(podUID), kubeletconfig.DefaultKubeletVolumeDevicesDirName, pluginName)
}

func (h *host) GetKubeClient() kubernetes.Interface { return h.client }

// errOnlyCSI: the plugin manager holds the CSI plugin only, so there is no
// plugin to wrap (secret, configMap, ... are built on emptyDir upstream).
var errOnlyCSI = errors.New("kubelet-sim: only the CSI volume plugin is loaded")

func (h *host) NewWrapperMounter(string, volume.Spec, *corev1.Pod) (volume.Mounter, error) {
	return nil, errOnlyCSI
}

func (h *host) NewWrapperUnmounter(string, volume.Spec, types.UID) (volume.Unmounter, error) {
	return nil, errOnlyCSI
}

func (h *host) GetMounter() mount.Interface { return h.mounter }

// getNode mirrors Kubelet.GetNode: the node informer, never a live GET.
func (h *host) getNode() (*corev1.Node, error) {
	node, err := h.nodeLister.Get(string(h.nodeName))
	if err != nil {
		return nil, fmt.Errorf("error retrieving node: %v", err)
	}
	return node, nil
}

// GetNodeAllocatable mirrors kubeletVolumeHost.GetNodeAllocatable, except
// that getNodeAnyWay's fallback (the node the kubelet would register) is an
// error here.
func (h *host) GetNodeAllocatable() (corev1.ResourceList, error) {
	node, err := h.getNode()
	if err != nil {
		return nil, err
	}
	return node.Status.Allocatable, nil
}

// GetSecretFunc and GetConfigMapFunc read live; the kubelet's secret and
// configMap managers cache by watch. The CSI plugin reads its secrets
// through the client itself (getCredentialsFromSecret), so neither is on
// the CSI path.
func (h *host) GetSecretFunc() func(namespace, name string) (*corev1.Secret, error) {
	return func(namespace, name string) (*corev1.Secret, error) {
		return h.client.CoreV1().Secrets(namespace).Get(context.TODO(), name, metav1.GetOptions{})
	}
}

func (h *host) GetConfigMapFunc() func(namespace, name string) (*corev1.ConfigMap, error) {
	return func(namespace, name string) (*corev1.ConfigMap, error) {
		return h.client.CoreV1().ConfigMaps(namespace).Get(context.TODO(), name, metav1.GetOptions{})
	}
}

// GetServiceAccountTokenFunc requests the token as token.Manager does
// (ServiceAccounts.CreateToken), without its cache. The CSI plugin needs a
// non-nil func (csiMountMgr.podServiceAccountTokenAttrs) and calls it only
// for a CSIDriver with spec.tokenRequests, which strandlab's has not.
func (h *host) GetServiceAccountTokenFunc() func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
		return h.client.CoreV1().ServiceAccounts(namespace).CreateToken(context.TODO(), name, tr, metav1.CreateOptions{})
	}
}

func (h *host) DeleteServiceAccountTokenFunc() func(types.UID) {
	return func(types.UID) {}
}

func (h *host) GetNodeLabels() (map[string]string, error) {
	node, err := h.getNode()
	if err != nil {
		return nil, err
	}
	return node.Labels, nil
}

func (h *host) GetNodeName() types.NodeName { return h.nodeName }

// GetAttachedVolumesFromNodeStatus mirrors kubeletVolumeHost's: the node
// informer's status.volumesAttached. GenerateVerifyControllerAttachedVolumeFunc
// uses it as a precondition (no operation, no backoff while the volume is
// absent) before its live GET of the node.
func (h *host) GetAttachedVolumesFromNodeStatus() (map[corev1.UniqueVolumeName]string, error) {
	node, err := h.getNode()
	if err != nil {
		return nil, err
	}
	out := make(map[corev1.UniqueVolumeName]string, len(node.Status.VolumesAttached))
	for _, av := range node.Status.VolumesAttached {
		out[av.Name] = av.DevicePath
	}
	return out, nil
}

func (h *host) GetEventRecorder() record.EventRecorder { return h.recorder }

// GetSubpather: subpaths are set up by the container runtime path, which
// kubelet-sim has not; the fake does nothing.
func (h *host) GetSubpather() subpath.Interface { return &subpath.FakeSubpath{} }

// KubeletVolumeHost.

// SetKubeletError records the storage error the kubelet would put in its
// runtime state (kubeletVolumeHost.SetKubeletError -> setStorageState): the
// CSI plugin sets "CSINode is not yet initialized" until CSINode exists, and
// the kubelet reports NotReady meanwhile. KubeletError exposes it.
func (h *host) SetKubeletError(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kubeletErr = err
}

func (h *host) kubeletError() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.kubeletErr
}

func (h *host) GetInformerFactory() informers.SharedInformerFactory { return h.informerFactory }

func (h *host) CSIDriverLister() storagelisters.CSIDriverLister { return h.csiDriverLister }

func (h *host) CSIDriversSynced() cache.InformerSynced { return h.csiDriversSynced }

// WaitForCacheSync mirrors kubeletVolumeHost.WaitForCacheSync, bounded by
// the manager's lifetime instead of wait.NeverStop.
func (h *host) WaitForCacheSync() error {
	if !cache.WaitForCacheSync(h.stop, h.csiDriversSynced) {
		return errors.New("failed to wait for cache sync for CSIDriverLister")
	}
	return nil
}

func (h *host) GetHostUtil() hostutil.HostUtils { return h.hostUtil }

var errNoProjected = errors.New("kubelet-sim: projected volume sources are not supported")

func (h *host) GetTrustAnchorsByName(context.Context, string, bool) ([]byte, error) {
	return nil, errNoProjected
}

func (h *host) GetTrustAnchorsBySigner(context.Context, string, *metav1.LabelSelector, bool) ([]byte, error) {
	return nil, errNoProjected
}

func (h *host) GetPodCertificateCredentialBundle(context.Context, string, string, string, string, int) ([]byte, []byte, error) {
	return nil, nil, errNoProjected
}
