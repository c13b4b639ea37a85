package kubeletsim

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Timing of the upstream volume manager (pkg/kubelet/volumemanager).
const (
	reconcilerLoopSleepPeriod      = 100 * time.Millisecond // volume_manager.go
	podAttachAndMountRetryInterval = 300 * time.Millisecond // volume_manager.go
	podAttachAndMountTimeout       = 2*time.Minute + 3*time.Second
	initialDurationBeforeRetry     = 500 * time.Millisecond // goroutinemap/exponentialbackoff
	maxDurationBeforeRetry         = 2*time.Minute + 2*time.Second
	csiPluginName                  = "kubernetes.io/csi" // pkg/volume/csi.CSIPluginName
)

// CSIVolumeManager mirrors the kubelet's volume manager for attachable CSI
// volumes of PVC-backed pods, with controller-managed attach/detach:
//
//   - desired state (DSW): pod -> PVC -> PV -> CSI source, resolved with live
//     GETs as the desired state of world populator does (createVolumeSpec);
//   - volumes in use: desired or attached volumes (GetVolumesInUse); a volume
//     counts as "reported in use" only once a node status write carried it
//     (MarkVolumesAsReportedInUse), and the reconciler waits for that;
//   - attach: VerifyControllerAttachedVolume reads status.volumesAttached,
//     first from the node informer, then with a live GET;
//   - mount: WaitForAttach (one GET of the VolumeAttachment), MountDevice
//     (NodeStageVolume), SetUp (NodePublishVolume) per pod;
//   - unmount: TearDown (NodeUnpublishVolume) per pod; UnmountDevice
//     (NodeUnstageVolume) when no pod on the node uses the volume any more,
//     then the volume leaves the actual state (and volumes in use).
//
// Failed operations back off exponentially per volume (500 ms doubling to
// 2m2s), as nestedpendingoperations does. Events are the upstream ones:
// FailedMount from the mount operation; none from VerifyControllerAttachedVolume.
type CSIVolumeManager struct {
	nodeName   string
	driverName string
	rootDir    string
	client     kubernetes.Interface
	node       csi.NodeClient
	recorder   record.EventRecorder

	nodeLister corelisters.NodeLister
	nodeSynced cache.InformerSynced

	mu      sync.Mutex
	volumes map[corev1.UniqueVolumeName]*volume
	// podErrors are errors resolving a pod's volumes (DSW errors), returned
	// at once by WaitForAttachAndMount.
	podErrors map[types.UID][]string
}

// volume is one unique volume on this node: its desired pods and its actual
// state.
type volume struct {
	name   corev1.UniqueVolumeName
	pvName string
	handle string

	desired map[types.UID]*podVolume // DSW: pods that want it mounted

	reportedInUse   bool
	attached        bool   // ASW: controller attach verified
	devicePath      string // from status.volumesAttached
	globallyMounted bool   // NodeStageVolume done
	mounted         map[types.UID]*podVolume

	pending   bool // an operation is running
	backoff   time.Duration
	notBefore time.Time
}

// podVolume is one pod's use of a volume.
type podVolume struct {
	pod       *corev1.Pod
	outerName string // the volume's name in the pod spec
}

// NewCSIVolumeManager returns a volume manager for one node. node is the CSI
// node service of the driver instance serving that node.
func NewCSIVolumeManager(nodeName, driverName, rootDir string, client kubernetes.Interface, node csi.NodeClient) *CSIVolumeManager {
	return &CSIVolumeManager{
		nodeName: nodeName, driverName: driverName, rootDir: rootDir, client: client, node: node,
		volumes: map[corev1.UniqueVolumeName]*volume{}, podErrors: map[types.UID][]string{},
	}
}

// UniqueVolumeName is the name the attach/detach controller and the kubelet
// agree on for a CSI volume (util.GetUniqueVolumeName with
// csiPlugin.GetVolumeName): kubernetes.io/csi/<driver>^<volumeHandle>.
func UniqueVolumeName(driver, handle string) corev1.UniqueVolumeName {
	return corev1.UniqueVolumeName(csiPluginName + "/" + driver + "^" + handle)
}

// VolumeAttachmentName mirrors csi_attacher.go getAttachmentName:
// "csi-" + hex(sha256(volumeHandle + driverName + nodeName)).
func VolumeAttachmentName(handle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driver+node)))
}

// Start runs the node informer and the reconciler until ctx ends.
func (m *CSIVolumeManager) Start(ctx context.Context, recorder record.EventRecorder) error {
	if err := m.startWithoutReconciler(ctx, recorder); err != nil {
		return err
	}
	go wait.UntilWithContext(ctx, m.reconcile, reconcilerLoopSleepPeriod)
	return nil
}

// startWithoutReconciler is Start without the reconciler loop: tests run
// reconcile passes themselves, one step at a time.
func (m *CSIVolumeManager) startWithoutReconciler(ctx context.Context, recorder record.EventRecorder) error {
	m.recorder = recorder
	if err := m.registerCSIDriver(ctx); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(m.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", m.nodeName).String()
	}))
	nodes := factory.Core().V1().Nodes()
	m.nodeLister, m.nodeSynced = nodes.Lister(), nodes.Informer().HasSynced
	factory.Start(ctx.Done())
	return nil
}

// VolumesInUse returns desired and attached volumes, sorted
// (volume_manager.go GetVolumesInUse).
func (m *CSIVolumeManager) VolumesInUse() []corev1.UniqueVolumeName {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []corev1.UniqueVolumeName
	for name, v := range m.volumes {
		if len(v.desired) > 0 || v.attached {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// MarkVolumesAsReportedInUse records which volumes the node status written
// to the API server lists in volumesInUse (MarkVolumesReportedInUse).
func (m *CSIVolumeManager) MarkVolumesAsReportedInUse(reported []corev1.UniqueVolumeName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, v := range m.volumes {
		v.reportedInUse = slices.Contains(reported, name)
	}
}

// WaitForAttachAndMount adds the pod's volumes to the desired state and
// waits until all are mounted for it (volume_manager.go
// WaitForAttachAndMount): 300 ms polls, at most 2m3s.
func (m *CSIVolumeManager) WaitForAttachAndMount(ctx context.Context, pod *corev1.Pod) error {
	expected := m.addPod(ctx, pod)
	if len(expected) == 0 {
		return nil
	}
	err := wait.PollUntilContextTimeout(ctx, podAttachAndMountRetryInterval, podAttachAndMountTimeout, true, func(ctx context.Context) (bool, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if errs := m.podErrors[pod.UID]; len(errs) > 0 {
			delete(m.podErrors, pod.UID)
			return false, errors.New(strings.Join(errs, "; "))
		}
		return len(m.unmountedLocked(pod, expected)) == 0, nil
	})
	if err == nil {
		return nil
	}
	m.mu.Lock()
	unmounted := m.unmountedLocked(pod, expected)
	unattached, unprocessed := m.unattachedLocked(pod, unmounted)
	m.mu.Unlock()
	if len(unmounted) == 0 {
		return nil // mounted meanwhile (upstream returns nil here too)
	}
	slices.Sort(unattached)
	return &VolumeWaitError{Unmounted: unmounted, Unattached: unattached, Unprocessed: unprocessed, Err: err}
}

// unmountedLocked lists the pod's volumes (spec names) not yet mounted for it.
func (m *CSIVolumeManager) unmountedLocked(pod *corev1.Pod, expected []string) []string {
	mounted := map[string]bool{}
	for _, v := range m.volumes {
		if pv, ok := v.mounted[pod.UID]; ok {
			mounted[pv.outerName] = true
		}
	}
	var out []string
	for _, name := range expected {
		if !mounted[name] {
			out = append(out, name)
		}
	}
	return out
}

func (m *CSIVolumeManager) unattachedLocked(pod *corev1.Pod, unmounted []string) (unattached, unprocessed []string) {
	inDSW := map[string]*volume{}
	for _, v := range m.volumes {
		if pv, ok := v.desired[pod.UID]; ok {
			inDSW[pv.outerName] = v
		}
	}
	for _, name := range unmounted {
		v, ok := inDSW[name]
		switch {
		case !ok:
			unprocessed = append(unprocessed, name)
		case !v.attached:
			unattached = append(unattached, name)
		}
	}
	return unattached, unprocessed
}

// addPod resolves the pod's PVC volumes to CSI volumes and adds them to the
// desired state (populator processPodVolumes / createVolumeSpec). It returns
// the pod's volume names this manager must mount: those of its driver and
// those it failed to resolve.
func (m *CSIVolumeManager) addPod(ctx context.Context, pod *corev1.Pod) []string {
	var errs, expected []string
	for _, pv := range pod.Spec.Volumes {
		if pv.PersistentVolumeClaim == nil {
			continue
		}
		handle, pvName, err := m.resolve(ctx, pod.Namespace, pv.PersistentVolumeClaim.ClaimName)
		if err != nil {
			errs = append(errs, fmt.Sprintf("error processing PVC %s/%s: %v", pod.Namespace, pv.PersistentVolumeClaim.ClaimName, err))
			expected = append(expected, pv.Name)
			continue
		}
		if handle == "" {
			continue // another driver's volume: not simulated here
		}
		expected = append(expected, pv.Name)
		name := UniqueVolumeName(m.driverName, handle)
		m.mu.Lock()
		v, ok := m.volumes[name]
		if !ok {
			v = &volume{name: name, pvName: pvName, handle: handle, desired: map[types.UID]*podVolume{}, mounted: map[types.UID]*podVolume{}}
			m.volumes[name] = v
		}
		v.desired[pod.UID] = &podVolume{pod: pod, outerName: pv.Name}
		m.mu.Unlock()
	}
	m.mu.Lock()
	if len(errs) > 0 {
		m.podErrors[pod.UID] = errs
	} else {
		delete(m.podErrors, pod.UID)
	}
	m.mu.Unlock()
	return expected
}

// resolve mirrors getPVCExtractPV and getPVSpec: live GETs, with their
// error texts. It returns an empty handle for a PV of another driver.
func (m *CSIVolumeManager) resolve(ctx context.Context, ns, claim string) (handle, pvName string, err error) {
	pvc, err := m.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("failed to fetch PVC from API server: %v", err)
	}
	if pvc.DeletionTimestamp != nil && !slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection") {
		return "", "", errors.New("PVC is being deleted")
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		return "", "", errors.New("PVC is not bound")
	}
	if pvc.Spec.VolumeName == "" {
		return "", "", errors.New("PVC has empty pvc.Spec.VolumeName")
	}
	pv, err := m.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("failed to fetch PV %s from API server: %v", pvc.Spec.VolumeName, err)
	}
	if pv.Spec.ClaimRef == nil {
		return "", "", fmt.Errorf("found PV object %s but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim", pv.Name)
	}
	if pv.Spec.ClaimRef.UID != pvc.UID {
		return "", "", fmt.Errorf("found PV object %s but its pv.Spec.ClaimRef.UID %s does not point to claim.UID %s", pv.Name, pv.Spec.ClaimRef.UID, pvc.UID)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != m.driverName {
		return "", pv.Name, nil
	}
	return pv.Spec.CSI.VolumeHandle, pv.Name, nil
}

// UnmountPodVolumes removes the pod from the desired state and waits until
// none of its volumes is mounted for it (WaitForUnmount, 300 ms polls, at
// most 2m3s). The device unmount (NodeUnstage) happens afterwards in the
// reconciler; the kubelet does not wait for it before confirming deletion.
func (m *CSIVolumeManager) UnmountPodVolumes(ctx context.Context, pod *corev1.Pod) error {
	m.mu.Lock()
	for _, v := range m.volumes {
		delete(v.desired, pod.UID)
		if len(v.desired) == 0 {
			// The DSW entry goes with its last pod; a new one starts
			// unreported (DeletePodFromVolume, then AddPodToVolume).
			v.reportedInUse = false
		}
	}
	delete(m.podErrors, pod.UID)
	m.mu.Unlock()
	return wait.PollUntilContextTimeout(ctx, podAttachAndMountRetryInterval, podAttachAndMountTimeout, true, func(context.Context) (bool, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, v := range m.volumes {
			if _, ok := v.mounted[pod.UID]; ok {
				return false, nil
			}
		}
		return true, nil
	})
}

// reconcile is one pass of the reconciler (reconciler_common.go reconcile):
// unmount first, then attach/mount, then device unmount.
func (m *CSIVolumeManager) reconcile(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for name, v := range m.volumes {
		if v.pending || now.Before(v.notBefore) {
			continue
		}
		switch {
		case len(m.unmountTargets(v)) > 0:
			pv := m.unmountTargets(v)[0]
			m.run(ctx, v, "UnmountVolume", func(ctx context.Context) error { return m.tearDown(ctx, v, pv) })
		case len(v.desired) > 0 && !v.attached:
			if !v.reportedInUse {
				continue // "volume not marked in-use": wait for a node status write
			}
			if !m.inNodeStatusFromInformer(name) {
				continue // precondition: not yet in the (cached) node status; no backoff
			}
			m.run(ctx, v, "VerifyControllerAttachedVolume", func(ctx context.Context) error { return m.verifyControllerAttached(ctx, v) })
		case len(v.desired) > 0 && len(m.mountTargets(v)) > 0:
			pv := m.mountTargets(v)[0]
			m.run(ctx, v, "MountVolume", func(ctx context.Context) error { return m.mount(ctx, v, pv) })
		case len(v.desired) == 0 && len(v.mounted) == 0 && v.globallyMounted:
			m.run(ctx, v, "UnmountDevice", func(ctx context.Context) error { return m.unmountDevice(ctx, v) })
		case len(v.desired) == 0 && len(v.mounted) == 0:
			// MarkVolumeAsDetached: bookkeeping only, the controller detaches.
			klog.FromContext(ctx).V(3).Info("Volume detached", "volume", name, "devicePath", v.devicePath)
			delete(m.volumes, name)
		}
	}
}

func (m *CSIVolumeManager) unmountTargets(v *volume) []*podVolume {
	var out []*podVolume
	for uid, pv := range v.mounted {
		if _, ok := v.desired[uid]; !ok {
			out = append(out, pv)
		}
	}
	return out
}

func (m *CSIVolumeManager) mountTargets(v *volume) []*podVolume {
	var out []*podVolume
	for uid, pv := range v.desired {
		if _, ok := v.mounted[uid]; !ok {
			out = append(out, pv)
		}
	}
	return out
}

// run starts op for v in the background with the volume's exponential
// backoff (nestedpendingoperations): one operation per volume at a time.
func (m *CSIVolumeManager) run(ctx context.Context, v *volume, opName string, op func(context.Context) error) {
	v.pending = true
	go func() {
		err := op(ctx)
		m.mu.Lock()
		defer m.mu.Unlock()
		v.pending = false
		if err == nil {
			v.backoff, v.notBefore = 0, time.Time{}
			return
		}
		if v.backoff == 0 {
			v.backoff = initialDurationBeforeRetry
		} else {
			v.backoff = min(2*v.backoff, maxDurationBeforeRetry)
		}
		v.notBefore = time.Now().Add(v.backoff)
		klog.FromContext(ctx).V(2).Info("Operation failed", "operation", opName, "volume", v.name, "durationBeforeRetry", v.backoff, "err", err)
	}()
}

func (m *CSIVolumeManager) inNodeStatusFromInformer(name corev1.UniqueVolumeName) bool {
	if m.nodeLister == nil || !m.nodeSynced() {
		return true // no cache: the precheck is skipped, as upstream does on lister errors
	}
	node, err := m.nodeLister.Get(m.nodeName)
	if err != nil {
		return true
	}
	for _, av := range node.Status.VolumesAttached {
		if av.Name == name {
			return true
		}
	}
	return false
}

// verifyControllerAttached mirrors GenerateVerifyControllerAttachedVolumeFunc:
// a live GET of the node, and the volume must be in status.volumesAttached.
func (m *CSIVolumeManager) verifyControllerAttached(ctx context.Context, v *volume) error {
	m.mu.Lock()
	reported := v.reportedInUse
	m.mu.Unlock()
	if !reported {
		return errors.New("Volume has not been added to the list of VolumesInUse in the node's volume status")
	}
	node, err := m.client.CoreV1().Nodes().Get(ctx, m.nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("VerifyControllerAttachedVolume failed fetching node from API server: %w", err)
	}
	for _, av := range node.Status.VolumesAttached {
		if av.Name == v.name {
			m.mu.Lock()
			v.attached, v.devicePath = true, av.DevicePath
			m.mu.Unlock()
			klog.FromContext(ctx).V(3).Info("Controller attach succeeded", "volume", v.name, "devicePath", av.DevicePath)
			return nil
		}
	}
	return fmt.Errorf("Volume not attached according to node status for volume %q", v.pvName)
}

// mount mirrors GenerateMountVolumeFunc for CSI: WaitForAttach (one GET of
// the VolumeAttachment), MountDevice (NodeStageVolume) once per node, then
// SetUp (NodePublishVolume) for the pod. Failures are FailedMount events on
// the pod, with the upstream wording.
func (m *CSIVolumeManager) mount(ctx context.Context, v *volume, pv *podVolume) error {
	fail := func(step string, err error) error {
		m.recorder.Eventf(pv.pod, corev1.EventTypeWarning, "FailedMount", "MountVolume.%s failed for volume %q : %v", step, v.pvName, err)
		return err
	}
	vaName := VolumeAttachmentName(v.handle, m.driverName, m.nodeName)
	va, err := m.client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
	if err != nil {
		return fail("WaitForAttach", fmt.Errorf("volume %s has GET error for volume attachment %s: %w", v.handle, vaName, err))
	}
	if err := attachmentStatus(va, v.handle); err != nil {
		return fail("WaitForAttach", err)
	}
	m.mu.Lock()
	staged := v.globallyMounted
	m.mu.Unlock()
	staging := m.stagingPath(v.handle)
	if !staged {
		if err := os.MkdirAll(staging, 0o750); err != nil {
			return fail("MountDevice", err)
		}
		_, err := m.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
			VolumeId: v.handle, PublishContext: va.Status.AttachmentMetadata, StagingTargetPath: staging,
			VolumeCapability: mountCapability(),
		})
		if err != nil {
			return fail("MountDevice", err)
		}
		m.mu.Lock()
		v.globallyMounted = true
		m.mu.Unlock()
	}
	target := m.targetPath(pv.pod.UID, v.pvName)
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return fail("SetUp", err)
	}
	_, err = m.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: v.handle, PublishContext: va.Status.AttachmentMetadata, StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: mountCapability(),
	})
	if err != nil {
		return fail("SetUp", err)
	}
	// Recorded even if the pod went away meanwhile, so that the reconciler
	// tears the mount down.
	m.mu.Lock()
	v.mounted[pv.pod.UID] = pv
	m.mu.Unlock()
	return nil
}

// attachmentStatus mirrors csiAttacher.verifyAttachmentStatus.
func attachmentStatus(va *storagev1.VolumeAttachment, handle string) error {
	switch {
	case va.DeletionTimestamp != nil:
		return errors.New("volume attachment is being deleted")
	case va.Status.Attached:
		return nil
	case va.Status.AttachError != nil:
		return errors.New(va.Status.AttachError.Message)
	default:
		return fmt.Errorf("volume %s is not attached for volume attachment %s", handle, va.Name)
	}
}

// tearDown mirrors GenerateUnmountVolumeFunc: NodeUnpublishVolume, then the
// pod's mount directory goes.
func (m *CSIVolumeManager) tearDown(ctx context.Context, v *volume, pv *podVolume) error {
	target := m.targetPath(pv.pod.UID, v.pvName)
	if _, err := m.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.handle, TargetPath: target}); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Dir(target)); err != nil {
		return err
	}
	m.mu.Lock()
	delete(v.mounted, pv.pod.UID)
	m.mu.Unlock()
	return nil
}

// unmountDevice mirrors GenerateUnmountDeviceFunc: NodeUnstageVolume once
// no pod on the node uses the volume.
func (m *CSIVolumeManager) unmountDevice(ctx context.Context, v *volume) error {
	staging := m.stagingPath(v.handle)
	if _, err := m.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.handle, StagingTargetPath: staging}); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Dir(staging)); err != nil {
		return err
	}
	m.mu.Lock()
	v.globallyMounted = false
	m.mu.Unlock()
	return nil
}

// stagingPath mirrors csi_attacher.go makeDeviceMountPath.
func (m *CSIVolumeManager) stagingPath(handle string) string {
	return filepath.Join(m.rootDir, "plugins", csiPluginName, m.driverName, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))), "globalmount")
}

// targetPath mirrors csi_mounter.go getTargetPath.
func (m *CSIVolumeManager) targetPath(uid types.UID, pvName string) string {
	return filepath.Join(m.rootDir, "pods", string(uid), "volumes", strings.ReplaceAll(csiPluginName, "/", "~"), pvName, "mount")
}

func mountCapability() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}
