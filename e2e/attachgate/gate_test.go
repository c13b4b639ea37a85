// Package attachgate proves the simulated kubelet's attach gate against a
// cluster whose kube-controller-manager runs without the attach/detach
// controller: nobody attaches, so the pod must never run, and once the
// kubelet's 2m3s wait for the volume times out it says so with FailedMount.
package attachgate

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/csinames"
	"github.com/strandlab/strandlab/internal/workload"
	"github.com/strandlab/strandlab/manifests"
)

var s suite.Suite

func TestMain(m *testing.M) {
	os.Exit(suite.Run(m, "e2e-attachgate", cluster.Spec{
		Nodes: 1, NodeStatusUpdateFrequency: time.Second,
		ControllerManagerArgs: []string{"--controllers=*,-persistentvolume-attach-detach-controller"},
		FailedMountOnTimeout:  true,
	}, &s))
}

func TestPodWaitsForAttachForever(t *testing.T) {
	const ns = "gate"
	f := features.New("no attach/detach controller").
		Assess("the pod stays ContainerCreating with its volume in use but never attached, emits FailedMount after the wait times out, and never runs", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := suite.Clientset(t, cfg)
			if err := workload.CreateNamespace(ctx, c, ns); err != nil {
				t.Fatal(err)
			}
			if err := workload.Create(ctx, c, workload.StatefulSet{Namespace: ns, Name: "db", Replicas: 1, VolumesPerPod: 1, StorageClass: manifests.StorageClassName}); err != nil {
				t.Fatal(err)
			}
			pods, err := workload.WatchPods(ctx, c, ns)
			if err != nil {
				t.Fatal(err)
			}
			// The kubelet takes the pod, shows it ContainerCreating and
			// reports the volume in use.
			var volume corev1.UniqueVolumeName
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			err = wait.PollUntilContextCancel(wctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				pod := pods.Get("db-0")
				if pod == nil || len(pod.Status.ContainerStatuses) == 0 || pod.Status.ContainerStatuses[0].State.Waiting == nil ||
					pod.Status.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
					return false, nil
				}
				node, err := c.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
				if err != nil {
					return false, fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
				}
				if len(node.Status.VolumesInUse) == 0 {
					return false, nil
				}
				volume = node.Status.VolumesInUse[0]
				return true, nil
			})
			if err != nil {
				t.Fatalf("waiting for db-0 ContainerCreating with its volume in use: %v", err)
			}
			// Watch the pod from here until the kubelet's wait for its
			// volume has timed out (2m3s) and been reported: it must never run.
			observe, stopObserving := context.WithCancel(ctx)
			defer stopObserving()
			ran := make(chan struct{})
			go func() {
				if pods.WaitFor(observe, func(p *workload.Pods) bool { return workload.IsRunning(p.Get("db-0")) }) == nil {
					close(ran)
				}
			}()
			// The cluster's kubelets record the timeout as kubelets up to
			// v1.27 did (cluster.Spec.FailedMountOnTimeout; v1.37.2 records
			// none, see TestMountFailureEvents in tools/upstream/kubelet-sim/node).
			specName := podVolumeName(pods.Get("db-0"))
			want := "Unable to attach or mount volumes: unmounted volumes=[" + specName + "], unattached volumes=[" + specName +
				"], failed to process volumes=[]: timed out waiting for the condition"
			var failedMount *corev1.Event
			ectx, cancelEvents := context.WithTimeout(ctx, 4*time.Minute)
			defer cancelEvents()
			err = wait.PollUntilContextCancel(ectx, time.Second, true, func(ctx context.Context) (bool, error) {
				evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
					"reason": "FailedMount", "involvedObject.name": "db-0"}).String()})
				if err != nil || len(evs.Items) == 0 {
					return false, nil
				}
				failedMount = &evs.Items[0]
				return true, nil
			})
			if err != nil {
				t.Fatalf("no FailedMount event for db-0 after the kubelet's 2m3s wait: %v", err)
			}
			if failedMount.Message != want || failedMount.Type != corev1.EventTypeWarning || failedMount.Source.Component != "kubelet" {
				t.Errorf("FailedMount event: %s %q from %s\nwant: Warning %q from kubelet", failedMount.Type, failedMount.Message, failedMount.Source.Component, want)
			}
			stopObserving()
			select {
			case <-ran:
				t.Fatal("pod reported Running although nothing attached its volume")
			default:
			}
			if pod := pods.Get("db-0"); pod == nil || pod.Status.Phase != corev1.PodPending || len(pod.Status.ContainerStatuses) == 0 ||
				pod.Status.ContainerStatuses[0].State.Waiting == nil || pod.Status.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
				t.Errorf("pod is no longer Pending in ContainerCreating: %+v", pod)
			}
			// A failed read would look like "nothing attached": it fails the test.
			node, err := c.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get node node-1: %v", err)
			}
			if len(node.Status.VolumesAttached) != 0 {
				t.Errorf("volumesAttached %v without an attach/detach controller", node.Status.VolumesAttached)
			}
			vas, err := c.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("list VolumeAttachments: %v", err)
			}
			if len(vas.Items) != 0 {
				t.Errorf("VolumeAttachments exist: %d", len(vas.Items))
			}
			if prefix := string(csinames.UniqueVolumeName(manifests.CSIDriverName, "")); !strings.HasPrefix(string(volume), prefix) {
				t.Errorf("volume in use %q is not a unique name of the form %s<handle>", volume, prefix)
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// podVolumeName is the name in pod's spec of its first PVC volume, as the
// kubelet's messages name it.
func podVolumeName(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return v.Name
		}
	}
	return ""
}
