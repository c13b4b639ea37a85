package volumes

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/csidriver"
	"github.com/strandlab/strandlab/internal/csinames"
	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/workload"
	"github.com/strandlab/strandlab/manifests"
)

const ns = "vols"

// attachedSince watches node status and records when each volume first
// appeared in volumesAttached.
func attachedSince(ctx context.Context, t *testing.T, c kubernetes.Interface) func(node string, v corev1.UniqueVolumeName) time.Time {
	var mu sync.Mutex
	seen := map[string]time.Time{}
	w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			mu.Lock()
			for _, av := range n.Status.VolumesAttached {
				if k := n.Name + "/" + string(av.Name); seen[k].IsZero() {
					seen[k] = time.Now()
				}
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return func(node string, v corev1.UniqueVolumeName) time.Time {
		mu.Lock()
		defer mu.Unlock()
		return seen[node+"/"+string(v)]
	}
}

func TestAttachPath(t *testing.T) {
	f := features.New("statefulset with one PVC per pod").
		Assess("pods run only after their volume is in node status, attached by the real sidecar", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := suite.Clientset(t, cfg)
			since := attachedSince(ctx, t, c)
			if err := workload.CreateNamespace(ctx, c, ns); err != nil {
				t.Fatal(err)
			}
			if err := workload.Create(ctx, c, workload.StatefulSet{Namespace: ns, Name: "db", Replicas: 3, VolumesPerPod: 1, StorageClass: manifests.StorageClassName}); err != nil {
				t.Fatal(err)
			}
			pods, err := workload.WatchPods(ctx, c, ns)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			if err := pods.WaitFor(wctx, func(p *workload.Pods) bool {
				for i := 0; i < 3; i++ {
					if !workload.IsRunning(p.Get(workload.PodName("db", i))) {
						return false
					}
				}
				return true
			}); err != nil {
				t.Fatalf("pods not Running: %v", err)
			}
			for i := 0; i < 3; i++ {
				pod := pods.Get(workload.PodName("db", i))
				pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-0-"+pod.Name, metav1.GetOptions{})
				if err != nil || pvc.Status.Phase != corev1.ClaimBound {
					t.Fatalf("PVC of %s: %v %v", pod.Name, pvc.Status.Phase, err)
				}
				pv, err := c.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
				if err != nil || pv.Spec.CSI == nil || pv.Annotations["pv.kubernetes.io/provisioned-by"] != manifests.CSIDriverName {
					t.Fatalf("PV %s not provisioned by the CSI provisioner: %+v %v", pvc.Spec.VolumeName, pv.Annotations, err)
				}
				va, err := c.StorageV1().VolumeAttachments().Get(ctx, csinames.VolumeAttachmentName(pv.Spec.CSI.VolumeHandle, manifests.CSIDriverName, pod.Spec.NodeName), metav1.GetOptions{})
				if err != nil || !va.Status.Attached || va.Spec.Attacher != manifests.CSIDriverName {
					t.Fatalf("VolumeAttachment for %s: %+v %v", pod.Name, va, err)
				}
				name := csinames.UniqueVolumeName(manifests.CSIDriverName, pv.Spec.CSI.VolumeHandle)
				attached := since(pod.Spec.NodeName, name)
				running := workload.RunningSince(pod)
				if attached.IsZero() {
					t.Fatalf("%s is Running but %s never appeared in %s's volumesAttached", pod.Name, name, pod.Spec.NodeName)
				}
				// RunningSince has the API's one-second precision.
				if running.Before(attached.Truncate(time.Second)) {
					t.Errorf("%s Running at %v, before its volume was in node status at %v", pod.Name, running, attached)
				}
				node, err := c.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("read node %s: %v", pod.Spec.NodeName, err)
				}
				inUse := false
				for _, v := range node.Status.VolumesInUse {
					inUse = inUse || v == name
				}
				if !inUse {
					t.Errorf("%s not in %s's volumesInUse while mounted", name, node.Name)
				}
			}
			return ctx
		}).
		Assess("delete/recreate keeps the pod's volume and mounts it again", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := suite.Clientset(t, cfg)
			old, err := c.CoreV1().Pods(ns).Get(ctx, "db-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.CoreV1().Pods(ns).Delete(ctx, "db-1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			pods, err := workload.WatchPods(ctx, c, ns)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			if err := pods.WaitFor(wctx, func(p *workload.Pods) bool {
				pod := p.Get("db-1")
				return pod != nil && pod.UID != old.UID && workload.IsRunning(pod)
			}); err != nil {
				t.Fatalf("replacement not Running: %v", err)
			}
			return ctx
		}).
		Assess("after an API server restart, kubelets heartbeat, confirm deletions and mount new volumes again", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := suite.Clientset(t, cfg)
			before, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "node-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Provider.Cluster().(cluster.APIServerRestarter).RestartAPIServer(ctx); err != nil {
				t.Fatal(err)
			}
			// The lease is renewed every 10 s: a renewal after the restart
			// shows the kubelets reconnected.
			if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
				l, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "node-1", metav1.GetOptions{})
				return err == nil && l.Spec.RenewTime.After(before.Spec.RenewTime.Time), nil
			}); err != nil {
				t.Fatalf("node lease not renewed after the restart: %v", err)
			}
			// kube-scheduler must be watching pods again before db-2 goes:
			// see schedulerRelisted.
			schedulerRelisted(ctx, t, c)
			// Graceful deletion still completes: the kubelet unmounts and
			// confirms it through the restarted server.
			old, err := c.CoreV1().Pods(ns).Get(ctx, "db-2", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.CoreV1().Pods(ns).Delete(ctx, "db-2", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			pods, err := workload.WatchPods(ctx, c, ns)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			if err := pods.WaitFor(wctx, func(p *workload.Pods) bool {
				pod := p.Get("db-2")
				return pod == nil || pod.UID != old.UID
			}); err != nil {
				t.Fatalf("deletion of db-2 not confirmed after the restart: %v", err)
			}
			// A new volume is attached and mounted through the restarted
			// server, for a pod that kube-scheduler places.
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "after-restart", Namespace: ns},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr(manifests.StorageClassName),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
				},
			}
			if _, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				got, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
				return err == nil && got.Status.Phase == corev1.ClaimBound, nil
			}); err != nil {
				t.Fatalf("PVC not bound after the restart: %v", err)
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "after-restart", Namespace: ns},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}},
				},
			}
			if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := pods.WaitFor(wctx, func(p *workload.Pods) bool { return workload.IsRunning(p.Get("after-restart")) }); err != nil {
				t.Fatalf("pod with a new volume not Running after the restart: %v\n%s%s", err, describe(pods.Get("after-restart")), notScheduledHint(pods.Get("after-restart")))
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// schedulerRelisted waits until kube-scheduler has seen a pod created after
// the API server restart, that is until its pod informer has listed pods
// again. After the restart its reflectors re-list, each after a backoff
// (the restarted server first refuses connections, then answers 403 while
// its authorizer starts), a few seconds at worst. A pod the scheduler placed
// that is deleted and re-created under the same name within that gap -
// db-2, which the StatefulSet re-creates within a second of its deletion -
// reaches the scheduler in the re-list as one update from the old pod to
// the new (client-go keys objects by namespace/name), and v1.37.2's
// scheduler (Scheduler.updatePod -> updateAssignedPodInCache ->
// cacheImpl.UpdatePod) takes the different spec.nodeName for cache
// corruption and exits: "Pod updated on a different node than previously
// added to". Nothing schedules after that. docs/scheduler-restart.md has the
// reproduction.
//
// The probe fits no node, so the scheduler's answer is the condition
// PodScheduled=False, and no kubelet runs it.
func schedulerRelisted(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "scheduler-probe", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"strandlab.io/scheduler-probe": "no-such-node"},
			Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	created, err := c.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		err := c.CoreV1().Pods(ns).Delete(ctx, probe.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(created.UID))})
		if err != nil {
			t.Errorf("delete %s: %v", probe.Name, err)
		}
	}()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := c.CoreV1().Pods(ns).Get(ctx, probe.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("kube-scheduler did not try a pod created after the restart: %v", err)
	}
}

// notScheduledHint explains a pod that kube-scheduler never tried.
func notScheduledHint(pod *corev1.Pod) string {
	if pod == nil || pod.Spec.NodeName != "" || len(pod.Status.Conditions) > 0 {
		return ""
	}
	return "\nno node and no PodScheduled condition: kube-scheduler never tried it; did it exit? (its log; docs/scheduler-restart.md)"
}

func describe(pod *corev1.Pod) string {
	if pod == nil {
		return "no pod"
	}
	return fmt.Sprintf("uid %s node %q phase %s deleting %v conditions %+v containers %+v",
		pod.UID, pod.Spec.NodeName, pod.Status.Phase, pod.DeletionTimestamp != nil, pod.Status.Conditions, pod.Status.ContainerStatuses)
}

func ptr[T any](v T) *T { return &v }

// A scenario's csiErrors reach the real csi-attacher through strandlab's
// driver: the claim's attaches fail as many times as the rule says, the
// VolumeAttachment shows the driver's error, the attacher's retry attaches
// it, and the journal the report counts holds each failed call.
func TestCSIFaults(t *testing.T) {
	f := features.New("csiErrors").
		Assess("the chosen claim's first attaches fail with the injected error, then its pod runs", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := suite.Clientset(t, cfg)
			const faultyNS = "vols-faulty"
			if err := workload.CreateNamespace(ctx, c, faultyNS); err != nil {
				t.Fatal(err)
			}
			// The VolumeAttachment carries the error until the retry that
			// succeeds clears it: watch for it from before it exists.
			sawError := make(chan string, 1)
			vaWatch, err := c.StorageV1().VolumeAttachments().Watch(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer vaWatch.Stop()
			go func() {
				for ev := range vaWatch.ResultChan() {
					va, ok := ev.Object.(*storagev1.VolumeAttachment)
					if ok && va.Status.AttachError != nil && strings.Contains(va.Status.AttachError.Message, csidriver.InjectedMessage) {
						select {
						case sawError <- va.Status.AttachError.Message:
						default:
						}
					}
				}
			}()
			if err := workload.Create(ctx, c, workload.StatefulSet{Namespace: faultyNS, Name: "faulty", Replicas: 1, VolumesPerPod: 1, StorageClass: manifests.StorageClassName}); err != nil {
				t.Fatal(err)
			}
			pods, err := workload.WatchPods(ctx, c, faultyNS)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			if err := pods.WaitFor(wctx, func(p *workload.Pods) bool { return workload.IsRunning(p.Get("faulty-0")) }); err != nil {
				t.Fatalf("faulty-0 not Running after its failed attaches: %v", err)
			}
			select {
			case msg := <-sawError:
				t.Logf("attachError: %s", msg)
			case <-time.After(10 * time.Second):
				// The error came before the pod ran; this only bounds the
				// watch goroutine's lag behind it.
				t.Errorf("no VolumeAttachment showed the driver's injected error (%q)", csidriver.InjectedMessage)
			}
			pvc, err := c.CoreV1().PersistentVolumeClaims(faultyNS).Get(ctx, faultyClaim, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			journal, err := cluster.InstrumentsOf(s.Provider.Cluster()).CSIFaults.CSIFaultJournal(ctx)
			if err != nil {
				t.Fatal(err)
			}
			node := pods.Get("faulty-0").Spec.NodeName
			n := 0
			for _, e := range journal {
				if e.Kind != fault.JournalCSIError || e.Verb != "ControllerPublishVolume" || e.Name != pvc.Spec.VolumeName || e.Node != node {
					t.Errorf("journal entry %+v: want only failed attaches of %s to %s", e, pvc.Spec.VolumeName, node)
				}
				n++
			}
			if n != faultyAttaches {
				t.Errorf("journal has %d failed attaches, want the rule's count, %d", n, faultyAttaches)
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}
