package volumes

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/strandlab/strandlab/internal/cluster/local"
	"github.com/strandlab/strandlab/internal/kubeletsim"
	"github.com/strandlab/strandlab/internal/workload"
)

const ns = "vols"

func client(t *testing.T) kubernetes.Interface {
	rc := s.Provider.KubernetesRestConfig()
	rc.QPS, rc.Burst = 100, 200
	return kubernetes.NewForConfigOrDie(rc)
}

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
			c := client(t)
			since := attachedSince(ctx, t, c)
			if err := workload.CreateNamespace(ctx, c, ns); err != nil {
				t.Fatal(err)
			}
			if err := workload.Create(ctx, c, workload.StatefulSet{Namespace: ns, Name: "db", Replicas: 3, VolumesPerPod: 1, StorageClass: local.StorageClassName}); err != nil {
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
				if err != nil || pv.Spec.CSI == nil || pv.Annotations["pv.kubernetes.io/provisioned-by"] != local.DefaultCSIDriverName {
					t.Fatalf("PV %s not provisioned by the CSI provisioner: %+v %v", pvc.Spec.VolumeName, pv.Annotations, err)
				}
				va, err := c.StorageV1().VolumeAttachments().Get(ctx, kubeletsim.VolumeAttachmentName(pv.Spec.CSI.VolumeHandle, local.DefaultCSIDriverName, pod.Spec.NodeName), metav1.GetOptions{})
				if err != nil || !va.Status.Attached || va.Spec.Attacher != local.DefaultCSIDriverName {
					t.Fatalf("VolumeAttachment for %s: %+v %v", pod.Name, va, err)
				}
				name := kubeletsim.UniqueVolumeName(local.DefaultCSIDriverName, pv.Spec.CSI.VolumeHandle)
				attached := since(pod.Spec.NodeName, name)
				running := workload.RunningSince(pod)
				if attached.IsZero() {
					t.Fatalf("%s is Running but %s never appeared in %s's volumesAttached", pod.Name, name, pod.Spec.NodeName)
				}
				// RunningSince has the API's one-second precision.
				if running.Before(attached.Truncate(time.Second)) {
					t.Errorf("%s Running at %v, before its volume was in node status at %v", pod.Name, running, attached)
				}
				node, _ := c.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
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
			c := client(t)
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
		}).Feature()
	s.Env.Test(t, f)
}
