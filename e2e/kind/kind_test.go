package kind

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vladimirvivien/gexe"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/usage"
	"github.com/strandlab/strandlab/internal/workload"
	"github.com/strandlab/strandlab/manifests"
)

func TestRealKubelets(t *testing.T) {
	f := features.New("kind nodes").
		Assess("every worker is Ready with a real kubelet of the pinned version on containerd", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := s.Provider.Cluster()
			t.Logf("the kind cluster (%d workers) started in %s", nodeCount, c.StartDuration().Round(time.Second))
			if got := len(c.Nodes()); got != nodeCount {
				t.Fatalf("cluster has %d workers, want %d", got, nodeCount)
			}
			for _, name := range c.Nodes() {
				n, err := suite.Clientset(t, cfg).CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if v := n.Status.NodeInfo.KubeletVersion; v != c.KubernetesVersion() {
					t.Errorf("node %s: kubelet %q, API server %q", name, v, c.KubernetesVersion())
				}
				if rt := n.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(rt, "containerd://") {
					t.Errorf("node %s: runtime %q, want containerd", name, rt)
				}
				if !strings.HasPrefix(n.Spec.ProviderID, "kind://") {
					t.Errorf("node %s: provider ID %q, want a kind node", name, n.Spec.ProviderID)
				}
			}
			return ctx
		}).
		Assess("the report's components name the real kubelet and the node image", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			got := map[string]string{}
			for _, comp := range s.Provider.Cluster().Components() {
				got[comp.Name] = comp.Version
			}
			if want := s.Provider.Cluster().KubernetesVersion() + " (real)"; got["kubelet"] != want {
				t.Errorf("components: kubelet %q, want %q", got["kubelet"], want)
			}
			if got["kind-node-image"] == "" {
				t.Errorf("components name no node image: %v", got)
			}
			return ctx
		}).
		Assess("the control-plane node weighs as much as the workers together, and the CSI driver's pods are not BestEffort", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			client := suite.Clientset(t, cfg)
			cps, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
			if err != nil || len(cps.Items) != 1 {
				t.Fatalf("want one control-plane node: %v (%v)", cps, err)
			}
			// kind names a node's container as the node.
			p := gexe.RunProc("docker inspect --format {{.HostConfig.CpuShares}} " + cps.Items[0].Name)
			if got, want := strings.TrimSpace(p.Result()), fmt.Sprint(1024*nodeCount); p.Err() != nil || got != want {
				t.Errorf("control-plane container's CPU shares %q (%v), want %s", got, p.Err(), want)
			}
			pods, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			for _, pod := range pods.Items {
				if !strings.HasPrefix(pod.Name, "strandlab-csi-") {
					continue
				}
				seen++
				if pod.Status.QOSClass == corev1.PodQOSBestEffort {
					t.Errorf("pod %s is BestEffort: a busy node starves it (cpu.shares 2)", pod.Name)
				}
			}
			if seen == 0 {
				t.Errorf("no strandlab-csi pod in kube-system")
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

func TestVolumeThroughRealKubelet(t *testing.T) {
	const ns, sts = "e2e-kind-volume", "web"
	f := features.New("a StatefulSet pod with a CSI volume").
		Assess("its pod runs: the volume was attached by the A/D controller and mounted by the kubelet", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			client := suite.Clientset(t, cfg)
			if err := workload.CreateNamespace(ctx, client, ns); err != nil {
				t.Fatal(err)
			}
			if err := workload.Create(ctx, client, workload.StatefulSet{Namespace: ns, Name: sts, Replicas: 1, VolumesPerPod: 1,
				StorageClass: manifests.StorageClassName, NoService: true}); err != nil {
				t.Fatal(err)
			}
			pod := waitRunning(ctx, t, client, ns, workload.PodName(sts, 0))
			pvc, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-0-"+pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pv := pvc.Spec.VolumeName
			pvObj, err := client.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
			if err != nil || pvObj.Spec.CSI == nil {
				t.Fatalf("PV %s of a CSI volume: %v", pv, err)
			}
			// The unique volume name the kubelet and the controller both use.
			unique := corev1.UniqueVolumeName("kubernetes.io/csi/" + pvObj.Spec.CSI.Driver + "^" + pvObj.Spec.CSI.VolumeHandle)
			vas, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			attached := false
			for _, va := range vas.Items {
				if va.Spec.Source.PersistentVolumeName != nil && *va.Spec.Source.PersistentVolumeName == pv && va.Spec.NodeName == pod.Spec.NodeName {
					attached = va.Status.Attached
				}
			}
			if !attached {
				t.Errorf("no attached VolumeAttachment of %s to %s", pv, pod.Spec.NodeName)
			}
			node, err := client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The kubelet reports what it mounted (volumesInUse); the
			// controller what it attached (volumesAttached).
			if !slices.Contains(node.Status.VolumesInUse, unique) || !slices.ContainsFunc(node.Status.VolumesAttached, func(v corev1.AttachedVolume) bool { return v.Name == unique }) {
				t.Errorf("node %s: volumesInUse %v, volumesAttached %v; want both to list %s", node.Name, node.Status.VolumesInUse, node.Status.VolumesAttached, unique)
			}
			return ctx
		}).
		Assess("a replacement pod runs again after the pod is deleted (one churn cycle)", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			client := suite.Clientset(t, cfg)
			name := workload.PodName(sts, 0)
			old, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// What the cycle cost, from the nodes' control groups, as the
			// runner reads it around a churn (docs/performance.md).
			sampler := cluster.InstrumentsOf(s.Provider.Cluster()).Usage
			if sampler == nil {
				t.Fatal("the kind cluster does not sample its components' usage")
			}
			before, err := sampler.SampleUsage(ctx)
			if err != nil {
				t.Fatalf("sample usage before the cycle: %v", err)
			}
			if err := client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			pod := waitRunning(ctx, t, client, ns, name)
			if pod.UID == old.UID {
				t.Errorf("pod %s was not replaced", name)
			}
			after, err := sampler.SampleUsage(ctx)
			if err != nil {
				t.Fatalf("sample usage after the cycle: %v", err)
			}
			cpu := usage.CPU(before, after)
			t.Logf("CPU seconds of the cycle by component: %v", cpu)
			for _, c := range []string{"kubelet", "containerd", "kube-apiserver", "etcd", "kube-controller-manager", "csi-driver", "csi-attacher"} {
				if cpu[c] <= 0 {
					t.Errorf("component %s: %v CPU seconds in a cycle that deleted, detached, attached and started a pod; want > 0 (all: %v)", c, cpu[c], cpu)
				}
			}
			if _, ok := cpu["workload"]; !ok {
				t.Errorf("no workload figure: %v", cpu)
			}
			if mem := usage.Memory(after); mem["kubelet"].Processes != nodeCount+1 || mem["kubelet"].MaxProcessMiB <= 0 {
				t.Errorf("kubelet memory: %+v; want a peak for each of the %d nodes' kubelets", mem["kubelet"], nodeCount+1)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if err := suite.Clientset(t, cfg).CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete namespace %s: %v", ns, err)
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// waitRunning polls until the pod named name (any UID, but Running) runs, or
// fails the test with the pod's last state.
func waitRunning(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return workload.IsRunning(p) && p.DeletionTimestamp == nil, nil
	})
	if err != nil {
		state := "never created"
		if pod != nil {
			state = fmt.Sprintf("phase %s, conditions %+v", pod.Status.Phase, pod.Status.Conditions)
		}
		t.Fatalf("pod %s/%s not Running within 3m: %s", ns, name, state)
	}
	return pod
}
