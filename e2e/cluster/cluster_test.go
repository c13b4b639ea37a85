package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/apfcount"
	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/csinames"
	"github.com/strandlab/strandlab/internal/procstat"
	"github.com/strandlab/strandlab/internal/usage"
	"github.com/strandlab/strandlab/internal/workload"
)

func TestControlPlane(t *testing.T) {
	f := features.New("local control plane").
		Assess("all nodes are Ready and managed by the attach/detach controller", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			nodes, err := suite.Clientset(t, cfg).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes.Items) != nodeCount {
				t.Fatalf("got %d nodes, want %d", len(nodes.Items), nodeCount)
			}
			for _, n := range nodes.Items {
				if n.Annotations[csinames.ControllerManagedAttachAnnotation] != "true" {
					t.Errorf("node %s lacks %s=true", n.Name, csinames.ControllerManagedAttachAnnotation)
				}
				ready := false
				for _, c := range n.Status.Conditions {
					ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
				}
				if !ready {
					t.Errorf("node %s is not Ready: %+v", n.Name, n.Status.Conditions)
				}
				if n.Status.NodeInfo.KubeletVersion != "v1.37.2" {
					t.Errorf("node %s reports kubelet %q", n.Name, n.Status.NodeInfo.KubeletVersion)
				}
			}
			return ctx
		}).
		Assess("every component reports the pinned version", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := s.Provider.Cluster()
			want := map[string]string{"etcd": "3.7.0", "kube-apiserver": "v1.37.2", "kube-controller-manager": "v1.37.2", "kube-scheduler": "v1.37.2"}
			got := map[string]string{}
			for _, comp := range c.Components() {
				got[comp.Name] = comp.Version
			}
			for name, v := range want {
				if got[name] != v {
					t.Errorf("%s reports version %q, want %q", name, got[name], v)
				}
			}
			if c.KubernetesVersion() != "v1.37.2" {
				t.Errorf("API server reports %q", c.KubernetesVersion())
			}
			return ctx
		}).
		Assess("kube-controller-manager authenticates as itself, not as an admin", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			dir := s.Provider.Cluster().(cluster.StateDirCluster).StateDir()
			rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "pki", "kube-controller-manager.kubeconfig"))
			if err != nil {
				t.Fatal(err)
			}
			kcm := kubernetes.NewForConfigOrDie(rc)
			review, err := kcm.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			u := review.Status.UserInfo
			if u.Username != "system:kube-controller-manager" {
				t.Errorf("controller manager is %q", u.Username)
			}
			for _, g := range u.Groups {
				if g == "system:masters" {
					t.Errorf("controller manager is in system:masters")
				}
			}
			if _, err := kcm.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); err != nil {
				t.Errorf("list secrets (granted to the controller manager by RBAC): %v", err)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
			if _, err := kcm.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil {
				t.Errorf("controller manager identity may create pods: it has admin rights")
			}
			// Its controllers run as their own service accounts, created as
			// each controller starts.
			err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := suite.Clientset(t, cfg).CoreV1().ServiceAccounts("kube-system").Get(ctx, "attachdetach-controller", metav1.GetOptions{})
				return err == nil, nil
			})
			if err != nil {
				t.Errorf("attachdetach-controller service account never created: %v", err)
			}
			return ctx
		}).
		Assess("node leases are renewed like the kubelet's heartbeat", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			client := suite.Clientset(t, cfg)
			first, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "node-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if first.Spec.HolderIdentity == nil || *first.Spec.HolderIdentity != "node-1" {
				t.Errorf("lease holder wrong: %+v", first.Spec)
			}
			// The renew interval is 10s (25% of 40s): wait for one renewal.
			var last *coordinationv1.Lease
			err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, false, func(ctx context.Context) (bool, error) {
				l, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "node-1", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				last = l
				return l.Spec.RenewTime != nil && first.Spec.RenewTime != nil && l.Spec.RenewTime.After(first.Spec.RenewTime.Time), nil
			})
			if err != nil {
				t.Errorf("lease of node-1 not renewed: %v", err)
			}
			if last != nil && (len(last.OwnerReferences) != 1 || last.OwnerReferences[0].Kind != "Node") {
				t.Errorf("lease not owned by its Node: %+v", last.OwnerReferences)
			}
			return ctx
		}).
		Assess("the API server counts every client's requests apart, in the priority levels of the default schemas", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			counter := cluster.InstrumentsOf(s.Provider.Cluster()).APIRequests
			if counter == nil {
				t.Fatal("the local cluster counts no API requests per client")
			}
			// The harness's own client, not the framework's: the cluster
			// counts the requests of clients made from its RESTConfig,
			// which is what this step checks.
			client, err := kubernetes.NewForConfig(s.Provider.KubernetesRestConfig())
			if err != nil {
				t.Fatal(err)
			}
			// Every copy names its original, whose priority level and
			// precedence it keeps, and the API server has taken it in.
			schemas, err := client.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{LabelSelector: apfcount.LabelManagedBy + "=strandlab"})
			if err != nil || len(schemas.Items) == 0 {
				t.Fatalf("per-client FlowSchemas: %d, %v", len(schemas.Items), err)
			}
			for _, fs := range schemas.Items {
				orig, err := client.FlowcontrolV1().FlowSchemas().Get(ctx, fs.Annotations[apfcount.AnnotationCopyOf], metav1.GetOptions{})
				if err != nil {
					t.Errorf("%s copies %q: %v", fs.Name, fs.Annotations[apfcount.AnnotationCopyOf], err)
					continue
				}
				if fs.Spec.PriorityLevelConfiguration != orig.Spec.PriorityLevelConfiguration || fs.Spec.MatchingPrecedence != orig.Spec.MatchingPrecedence {
					t.Errorf("%s: priority level %s, precedence %d; its original %s: %s, %d", fs.Name, fs.Spec.PriorityLevelConfiguration.Name,
						fs.Spec.MatchingPrecedence, orig.Name, orig.Spec.PriorityLevelConfiguration.Name, orig.Spec.MatchingPrecedence)
				}
			}
			before, err := counter.APIRequestsByClient(ctx)
			if err != nil {
				t.Fatal(err)
			}
			const n = 25
			for range n {
				if _, err := client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			// The kubelets' heartbeats (10 s) and the controllers' work go
			// on meanwhile: wait until the kubelets have been counted too.
			var after map[string]float64
			err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				after, err = counter.APIRequestsByClient(ctx)
				return err == nil && after["kubelet-sim"] > before["kubelet-sim"], err
			})
			if err != nil {
				t.Fatalf("no kubelet request counted within 30s: %v (before %v, after %v)", err, before, after)
			}
			t.Logf("requests since the start: before %v, after %v", before, after)
			// The reads of /metrics themselves are the harness's too.
			if d := after["harness"] - before["harness"]; d < n {
				t.Errorf("harness: %v requests counted, want at least the %d made (before %v, after %v)", d, n, before, after)
			}
			// The harness's requests are exempt like the API server's own:
			// they are taken out of the API server's, which renews its lease
			// and little else in these seconds.
			if d := after["kube-apiserver"] - before["kube-apiserver"]; d >= n {
				t.Errorf("kube-apiserver: %v requests in the window: the harness's %d are counted as its own (before %v, after %v)", d, n, before, after)
			}
			if d := after[apfcount.Other] - before[apfcount.Other]; d != 0 {
				t.Errorf("%v requests of no known client (before %v, after %v)", d, before, after)
			}
			for _, c := range []string{"kube-controller-manager", "kube-scheduler", "csi-provisioner", "csi-attacher", "kube-apiserver"} {
				if after[c] <= 0 {
					t.Errorf("no request of %s counted since the start: %v", c, after)
				}
			}
			return ctx
		}).
		Assess("every component's process is listed and its accounting readable", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			lister := cluster.InstrumentsOf(s.Provider.Cluster()).Processes
			if lister == nil {
				t.Fatal("the local cluster lists no processes")
			}
			cpu := map[string]float64{}
			for _, p := range lister.Processes() {
				sample, err := procstat.Read(p.Name, p.PID)
				if err != nil {
					t.Errorf("%s: %v", p.Name, err)
					continue
				}
				if sample.StartTicks == 0 || sample.PeakRSSBytes == 0 {
					t.Errorf("%s: accounting %+v, want its start time and peak memory", p.Name, sample)
				}
				cpu[usage.ComponentOf(p.Name)] += sample.CPUSeconds
			}
			for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "csi-attacher", "csi-provisioner", "csi-driver", "kubelet-sim"} {
				if _, ok := cpu[c]; !ok {
					t.Errorf("%s: no process listed (%v)", c, cpu)
				}
			}
			// CPU time is counted in 10 ms ticks: an idle process (a CSI
			// driver instance) can show none yet. The API server and etcd,
			// which served the whole start, cannot.
			for _, c := range []string{"etcd", "kube-apiserver"} {
				if cpu[c] <= 0 {
					t.Errorf("%s: no CPU time read (%v)", c, cpu)
				}
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

func TestStatefulSetLifecycle(t *testing.T) {
	const ns = "lifecycle"
	f := features.New("statefulset pods on simulated kubelets").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			client := suite.Clientset(t, cfg)
			if err := workload.CreateNamespace(ctx, client, ns); err != nil {
				t.Fatal(err)
			}
			if err := workload.Create(ctx, client, workload.StatefulSet{Namespace: ns, Name: "web", Replicas: 3}); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("all replicas reach Running with container statuses", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			pods, err := workload.WatchPods(ctx, suite.Clientset(t, cfg), ns)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			err = pods.WaitFor(wctx, func(p *workload.Pods) bool {
				for i := 0; i < 3; i++ {
					if !workload.IsRunning(p.Get(workload.PodName("web", i))) {
						return false
					}
				}
				return true
			})
			if err != nil {
				t.Fatalf("replicas not Running: %v", err)
			}
			pod := pods.Get("web-0")
			if len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].State.Running == nil || !pod.Status.ContainerStatuses[0].Ready {
				t.Errorf("container status of web-0: %+v", pod.Status.ContainerStatuses)
			}
			if pod.Status.PodIP == "" || pod.Status.HostIP == "" {
				t.Errorf("web-0 has no pod/host IP: %+v", pod.Status)
			}
			return ctx
		}).
		Assess("graceful deletion: final status, then the kubelet confirms, then a replacement runs", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			client := suite.Clientset(t, cfg)
			old, err := client.CoreV1().Pods(ns).Get(ctx, "web-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "web-1").String(), ResourceVersion: old.ResourceVersion})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			if err := client.CoreV1().Pods(ns).Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			var sawTerminal, sawDeleted, sawReplacementRunning bool
			timeout := time.After(2 * time.Minute)
			for !sawReplacementRunning {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						t.Fatal("watch closed")
					}
					pod, _ := ev.Object.(*corev1.Pod)
					if pod == nil {
						continue
					}
					switch {
					case pod.UID == old.UID && ev.Type == watch.Deleted:
						sawDeleted = true
					case pod.UID == old.UID && pod.DeletionTimestamp != nil && pod.Status.Phase == corev1.PodSucceeded:
						sawTerminal = true
						if cs := pod.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil {
							t.Errorf("terminal pod without terminated container: %+v", cs)
						}
					case pod.UID != old.UID && workload.IsRunning(pod):
						sawReplacementRunning = true
					}
				case <-timeout:
					t.Fatalf("deletion/replacement incomplete: terminal=%v deleted=%v replacementRunning=%v", sawTerminal, sawDeleted, sawReplacementRunning)
				}
			}
			if !sawTerminal || !sawDeleted {
				t.Errorf("graceful deletion not observed in order: terminal=%v deleted=%v", sawTerminal, sawDeleted)
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// A second cluster can run beside the shared one (ports are chosen, not
// fixed), and stopping it leaves nothing of it behind.
func TestSecondClusterBesideTheFirst(t *testing.T) {
	second, err := s.Starter.Start(context.Background(), cluster.Spec{Name: "e2e-second", Nodes: 1, OutputDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if second.RESTConfig().Host == s.Provider.KubernetesRestConfig().Host {
		t.Errorf("both clusters serve on %s", second.RESTConfig().Host)
	}
	nodes, err := kubernetes.NewForConfigOrDie(second.RESTConfig()).CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		t.Errorf("second cluster nodes: %v, %v", nodes, err)
	}
	dir := second.(cluster.StateDirCluster).StateDir()
	if err := second.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := second.(cluster.ComponentLister).Running(); len(left) != 0 {
		t.Errorf("still running after Stop: %v", left)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state directory %s left behind (%v)", dir, err)
	}
	if _, err := suite.Clientset(t, s.Env.EnvConf()).CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("shared cluster broken after the second stopped: %v", err)
	}
}
