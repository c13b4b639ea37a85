package existing

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/existing"
	"github.com/strandlab/strandlab/internal/runner"
)

// plainKubeconfig writes the cluster's admin kubeconfig as a user would
// have it for a cluster of theirs: one self-contained file (certificates
// embedded, nothing pointing into the local provider's state directory),
// under a context name of its own.
func plainKubeconfig(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(s.Provider.Cluster().Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	cfg.Contexts = map[string]*clientcmdapi.Context{"lab": ctx}
	cfg.CurrentContext = "lab"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// options run scenario (a file under scenarios/) on the existing provider
// with kubeconfig, with or without the owner's consent.
func options(t *testing.T, kubeconfig string, consent bool, scenario string) runner.Options {
	root := suite.RepoRoot(t)
	return runner.Options{
		ScenarioPath: filepath.Join(root, "scenarios", scenario), Provider: existing.Name, Cycles: -1,
		OutputDir: t.TempDir(), RepoRoot: root, Progress: os.Stderr,
		Providers: cluster.NewRegistry(&existing.Provider{Kubeconfig: kubeconfig, Consent: consent, Progress: os.Stderr}),
	}
}

// state is what the tests compare to say the cluster was not touched: its
// namespaces, PersistentVolumes and VolumeAttachments by name.
func state(ctx context.Context, t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	var names []string
	nss, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nss.Items {
		names = append(names, "ns/"+n.Name)
	}
	pvs, err := c.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pvs.Items {
		names = append(names, "pv/"+p.Name)
	}
	vas, err := c.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vas.Items {
		names = append(names, "va/"+v.Name)
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

// The provider refuses, before anything is touched: without the owner's
// consent, a scenario with proxy rules, a namespace strandlab that is
// already there.
func TestRefusals(t *testing.T) {
	ctx := context.Background()
	client := suite.Clientset(t, s.Env.EnvConf())
	kubeconfig := plainKubeconfig(t)
	before := state(ctx, t, client)

	t.Run("without --cluster-owner-consent", func(t *testing.T) {
		_, err := runner.Prepare(ctx, options(t, kubeconfig, false, "existing-control.yaml"))
		if err == nil || !strings.Contains(err.Error(), "--cluster-owner-consent not given") {
			t.Fatalf("Prepare = %v, want a refusal naming --cluster-owner-consent", err)
		}
		if after := state(ctx, t, client); after != before {
			t.Errorf("the cluster changed:\nbefore %s\nafter  %s", before, after)
		}
	})

	t.Run("a scenario with proxy rules", func(t *testing.T) {
		opts := options(t, kubeconfig, true, "seed-122413.yaml")
		opts.Builds = []string{"stock"}
		_, err := runner.Prepare(ctx, opts)
		if err == nil || !strings.Contains(err.Error(), "\nproxy.rules: 1 fault rule(s)") {
			t.Fatalf("Prepare = %v, want a refusal naming proxy.rules", err)
		}
		t.Logf("refused as it should be:\n%v", err)
		if after := state(ctx, t, client); after != before {
			t.Errorf("the cluster changed:\nbefore %s\nafter  %s", before, after)
		}
	})

	t.Run("the namespace exists", func(t *testing.T) {
		theirs := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: runner.Namespace, Labels: map[string]string{"owner": "someone-else"}}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteNamespace(t, client, runner.Namespace) })
		opts := options(t, kubeconfig, true, "existing-control.yaml")
		sc, err := runner.Prepare(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		_, err = runner.Run(ctx, opts, sc)
		if err == nil || !strings.Contains(err.Error(), "namespace strandlab already exists") || !strings.Contains(err.Error(), "strandlab down --kubeconfig "+kubeconfig+" --namespace strandlab") {
			t.Fatalf("Run = %v, want a refusal naming the namespace and how to remove it", err)
		}
		ns, err := client.CoreV1().Namespaces().Get(ctx, runner.Namespace, metav1.GetOptions{})
		if err != nil || ns.Labels["owner"] != "someone-else" || ns.DeletionTimestamp != nil {
			t.Errorf("the namespace that was there is not left as it was: %v, %+v", err, ns)
		}
		if n, err := client.AppsV1().StatefulSets(runner.Namespace).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list the StatefulSets: %v", err)
		} else if len(n.Items) > 0 {
			t.Errorf("StatefulSets created in a namespace not strandlab's: %d", len(n.Items))
		}
	})
}

// deleteNamespace removes a namespace the test made and waits until it is
// gone.
func deleteNamespace(t *testing.T, client kubernetes.Interface, name string) {
	ctx := context.Background()
	if err := client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
		return
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("namespace %s not gone: %v", name, err)
	}
}

// The existing provider's own check: control's churn, 50
// cycles, through a plain kubeconfig, then nothing left.
func TestControlFiftyCycles(t *testing.T) {
	ctx := context.Background()
	client := suite.Clientset(t, s.Env.EnvConf())
	kubeconfig := plainKubeconfig(t)
	witness := Watch(t, client, runner.Namespace)
	opts := options(t, kubeconfig, true, "existing-control.yaml")
	rep, took := RunAndRead(ctx, t, opts)
	t.Logf("50 cycles and the cleanup took %s", took.Round(time.Second))
	if rep.Provider != existing.Name || !rep.Complete || rep.Interrupted || len(rep.Builds) != 1 {
		t.Fatalf("report: provider %q complete %v interrupted %v builds %d", rep.Provider, rep.Complete, rep.Interrupted, len(rep.Builds))
	}
	b := rep.Builds[0]
	t.Logf("build %s: %d cycles, %d stranded, %d safety violations, %d not running, %.2f cycles/s; provenance %+v",
		b.Name, b.Cycles, b.Stranded, b.SafetyViolations, b.CyclesNotRunning, b.CyclesPerSecond, b.Provenance)
	if b.Name != "stock" || b.Cycles != 50 || b.Stranded != 0 || b.SafetyViolations != 0 || b.CyclesNotRunning != 0 {
		t.Errorf("build %s: %d cycles, %d stranded, %d safety, %d not running; want stock, 50, 0, 0, 0", b.Name, b.Cycles, b.Stranded, b.SafetyViolations, b.CyclesNotRunning)
	}
	if b.Expectation == nil || !b.Expectation.Met {
		t.Errorf("expectation %+v, want met", b.Expectation)
	}
	if b.Provenance.Module != runner.ClusterOwnController {
		t.Errorf("provenance %+v, want the cluster's own controller", b.Provenance)
	}
	if v := rep.Components["kube-apiserver"].Version; v == "" || v != rep.KubernetesVersion {
		t.Errorf("components: kube-apiserver %q, kubernetes_version %q", v, rep.KubernetesVersion)
	}
	if labels := witness.Labels(); labels[existing.LabelManagedBy] != existing.ManagedBy || labels[existing.LabelRun] != "existing-control-stock" {
		t.Errorf("the run's namespace had labels %v", labels)
	}
	if pvs := witness.PVs(); len(pvs) != 3 {
		t.Errorf("PVs claimed from the namespace during the run: %v, want the 3 of the workload", pvs)
	}
	witness.AssertNothingLeft(ctx, t, client)
}

// A kept run leaves its namespace with its workload; `strandlab down
// --kubeconfig F --namespace strandlab` (existing.Down) removes it all.
func TestKeptRunThenDown(t *testing.T) {
	ctx := context.Background()
	client := suite.Clientset(t, s.Env.EnvConf())
	kubeconfig := plainKubeconfig(t)
	witness := Watch(t, client, runner.Namespace)
	opts := options(t, kubeconfig, true, "existing-control.yaml")
	opts.Cycles, opts.Keep = 2, true
	sc, err := runner.Prepare(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runner.Run(ctx, opts, sc); err != nil {
		t.Fatalf("Run: %v", err)
	}
	pods, err := client.CoreV1().Pods(runner.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("kept run: pods %v, %v; want the 3 of the workload", pods, err)
	}
	if err := existing.Down(ctx, kubeconfig, runner.Namespace, os.Stderr); err != nil {
		t.Fatalf("down: %v", err)
	}
	if len(witness.PVs()) != 3 {
		t.Errorf("PVs seen: %v", witness.PVs())
	}
	witness.AssertNothingLeft(ctx, t, client)
}
