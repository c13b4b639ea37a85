package existing

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/fault"
)

func TestAvailable(t *testing.T) {
	dir := t.TempDir()
	// A port nothing listens on: the API server does not answer.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	unreachable := filepath.Join(dir, "unreachable.kubeconfig")
	if err := os.WriteFile(unreachable, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: secret-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		p        Provider
		want     string
		mustNot  string
		fastOnly bool
	}{
		{name: "no consent: refused before the kubeconfig is read", p: Provider{Kubeconfig: unreachable},
			want: "--cluster-owner-consent not given: the existing provider creates a namespace"},
		{name: "no kubeconfig", p: Provider{Consent: true}, want: "no kubeconfig: name the cluster's with --kubeconfig FILE"},
		{name: "unreadable kubeconfig", p: Provider{Consent: true, Kubeconfig: filepath.Join(dir, "missing")}, want: "kubeconfig: open " + filepath.Join(dir, "missing")},
		{name: "a list of kubeconfigs", p: Provider{Consent: true, Kubeconfig: "a" + string(os.PathListSeparator) + "b"}, want: "lists several files"},
		{name: "an API server that does not answer is named", p: Provider{Consent: true, Kubeconfig: unreachable},
			want: "the API server https://" + addr + " (kubeconfig " + unreachable + ") does not answer /version", mustNot: "secret-token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Available(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Available = %v, want %q", err, tc.want)
			}
			if tc.mustNot != "" && strings.Contains(err.Error(), tc.mustNot) {
				t.Errorf("error shows %q: %v", tc.mustNot, err)
			}
		})
	}
}

// fakeCluster is a fake API with three Ready nodes, strandlab's class and
// CSIDriver, and every access review allowed except those in denied
// ("verb resource").
func fakeCluster(denied ...string) *fake.Clientset {
	yes := true
	del := corev1.PersistentVolumeReclaimDelete
	objs := []runtime.Object{
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "strandlab-hostpath"}, Provisioner: "hostpath.csi.k8s.io", ReclaimPolicy: &del},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "rancher.io/local-path", ReclaimPolicy: &del},
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "hostpath.csi.k8s.io"}, Spec: storagev1.CSIDriverSpec{AttachRequired: &yes}},
	}
	for i := 1; i <= 3; i++ {
		n := node(fmt.Sprintf("node-%d", i), true, nil)
		objs = append(objs, &n)
	}
	client := fake.NewClientset(objs...)
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		attr := r.Spec.ResourceAttributes
		r.Status.Allowed = true
		for _, d := range denied {
			if d == attr.Verb+" "+attr.Resource {
				r.Status.Allowed = false
			}
		}
		return true, r, nil
	})
	return client
}

func namespaces(t *testing.T, client *fake.Clientset) []string {
	t.Helper()
	list, err := client.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range list.Items {
		out = append(out, n.Name)
	}
	return out
}

func TestStart(t *testing.T) {
	ctx := context.Background()
	p := &Provider{Kubeconfig: "/k/config", Consent: true, NodeWait: 50 * time.Millisecond}
	t.Run("creates the labelled namespace", func(t *testing.T) {
		client := fakeCluster()
		var progress bytes.Buffer
		spec := accepted()
		c, err := p.start(ctx, client, "https://api.example", "v1.37.2", spec, &progress)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := client.CoreV1().Namespaces().Get(ctx, "strandlab", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ns.Labels[LabelManagedBy] != ManagedBy || ns.Labels[LabelRun] != "existing-control-stock" {
			t.Errorf("namespace labels %v", ns.Labels)
		}
		if got := strings.Join(c.Nodes(), ","); got != "node-1,node-2,node-3" {
			t.Errorf("Nodes = %s", got)
		}
		if c.KubernetesVersion() != "v1.37.2" || c.Kubeconfig() != "/k/config" {
			t.Errorf("version %q kubeconfig %q", c.KubernetesVersion(), c.Kubeconfig())
		}
		comps := map[string]string{}
		for _, comp := range c.Components() {
			comps[comp.Name] = comp.Version
		}
		if comps["kube-apiserver"] != "v1.37.2" || comps["kubelet"] != "v1.37.2" || comps["kube-controller-manager"] != "unknown" || comps["csi-driver"] != "hostpath.csi.k8s.io" {
			t.Errorf("components %v", comps)
		}
		if got := strings.Join(c.DownArgs(), " "); got != "--kubeconfig /k/config --namespace strandlab" {
			t.Errorf("DownArgs = %s", got)
		}
		if !strings.Contains(progress.String(), "created namespace strandlab") || strings.Contains(progress.String(), "proxy") {
			t.Errorf("progress:\n%s", progress.String())
		}
	})
	t.Run("proxy: {} is run without a proxy, saying so", func(t *testing.T) {
		var progress bytes.Buffer
		spec := accepted()
		spec.Proxy = &fault.Profile{Seed: 1}
		if _, err := p.start(ctx, fakeCluster(), "https://api.example", "v1.37.2", spec, &progress); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(progress.String(), "proxy: {} holds nothing back; running without a proxy") {
			t.Errorf("progress:\n%s", progress.String())
		}
	})

	t.Run("waits for a node's not-ready taint to go", func(t *testing.T) {
		client := fakeCluster()
		n, err := client.CoreV1().Nodes().Get(ctx, "node-3", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}
		if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The node lifecycle controller lifts the taint before the second look.
		lists := 0
		client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			if lists++; lists == 2 {
				n.Spec.Taints = nil
				if err := client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), n, ""); err != nil {
					t.Error(err)
				}
			}
			return false, nil, nil
		})
		var progress bytes.Buffer
		slow := *p
		slow.NodeWait = time.Minute
		c, err := slow.start(ctx, client, "https://api.example", "v1.37.2", accepted(), &progress)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Nodes()) != 3 || lists != 2 || !strings.Contains(progress.String(), "2 of 3 nodes schedulable, 3 needed (cluster.nodes); waiting up to 1m0s") {
			t.Errorf("nodes %v after %d lists; progress:\n%s", c.Nodes(), lists, progress.String())
		}
	})

	refusals := []struct {
		name   string
		client func() *fake.Clientset
		spec   func(*cluster.Spec)
		want   string
	}{
		{name: "the namespace exists", client: func() *fake.Clientset {
			c := fakeCluster()
			_, _ = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "strandlab"}}, metav1.CreateOptions{})
			return c
		}, want: "namespace strandlab already exists on the cluster at https://api.example: the existing provider works only in a namespace it creates. If an earlier strandlab run left it, remove it with `strandlab down --kubeconfig /k/config --namespace strandlab`"},
		{name: "volumes claimed from the namespace exist", client: func() *fake.Clientset {
			c := fakeCluster()
			old := pv("pv-old", "strandlab")
			_, _ = c.CoreV1().PersistentVolumes().Create(ctx, &old, metav1.CreateOptions{})
			return c
		}, want: "PersistentVolumes claimed from namespace strandlab exist on the cluster at https://api.example (pv-old)"},
		{name: "too few schedulable nodes", client: func() *fake.Clientset { return fakeCluster() }, spec: func(s *cluster.Spec) { s.Nodes = 4 },
			want: "cluster.nodes: the scenario needs 4 schedulable nodes; the cluster at https://api.example has 3 (Ready, not cordoned, no NoSchedule/NoExecute taint) of 3 after 50ms: node-1, node-2, node-3"},
		{name: "no such storage class: the cluster's are listed", client: func() *fake.Clientset { return fakeCluster() }, spec: func(s *cluster.Spec) { s.StorageClass = "gold" },
			want: `cluster.storageClass: "gold": no such StorageClass on the cluster at https://api.example (it has: standard, strandlab-hostpath)`},
		{name: "a Retain class", client: func() *fake.Clientset {
			c := fakeCluster()
			retain := corev1.PersistentVolumeReclaimRetain
			_, _ = c.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "keep"}, Provisioner: "hostpath.csi.k8s.io", ReclaimPolicy: &retain}, metav1.CreateOptions{})
			return c
		}, spec: func(s *cluster.Spec) { s.StorageClass = "keep" }, want: `cluster.storageClass: "keep" has reclaimPolicy Retain`},
		{name: "a user who may not delete namespaces", client: func() *fake.Clientset { return fakeCluster("delete namespaces", "delete pods") },
			want: "the kubeconfig's user may not: delete namespaces; delete pods in strandlab"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			client := tc.client()
			before := namespaces(t, client)
			spec := accepted()
			if tc.spec != nil {
				tc.spec(&spec)
			}
			_, err := p.start(ctx, client, "https://api.example", "v1.37.2", spec, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start = %v, want %q", err, tc.want)
			}
			if after := namespaces(t, client); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("namespaces %v after a refusal, %v before", after, before)
			}
		})
	}
}

func TestStop(t *testing.T) {
	ctx := context.Background()
	p := &Provider{Kubeconfig: "/k/config", Consent: true, CleanupTimeout: 1500 * time.Millisecond}
	t.Run("deletes the namespace and waits for its volumes", func(t *testing.T) {
		client := fakeCluster()
		c, err := p.start(ctx, client, "https://api.example", "v1.37.2", accepted(), nil)
		if err != nil {
			t.Fatal(err)
		}
		// A volume of the run that nothing deletes (the fake has no
		// provisioner): Stop must name it when its time is up.
		stuck := pv("pv-stuck", "strandlab")
		if _, err := client.CoreV1().PersistentVolumes().Create(ctx, &stuck, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		attachment := va("csi-stuck", "pv-stuck")
		if _, err := client.StorageV1().VolumeAttachments().Create(ctx, &attachment, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		err = c.Stop(ctx)
		for _, want := range []string{"namespace strandlab not cleaned up within", "PersistentVolume pv-stuck", "VolumeAttachment csi-stuck (PV pv-stuck"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Stop = %v, want it to name %q", err, want)
			}
		}
		if _, gerr := client.CoreV1().Namespaces().Get(ctx, "strandlab", metav1.GetOptions{}); !apierrors.IsNotFound(gerr) {
			t.Errorf("namespace still there: %v", gerr)
		}
		if again := c.Stop(ctx); again == nil || again.Error() != err.Error() {
			t.Errorf("second Stop = %v, want the first's result", again)
		}
	})
	t.Run("nothing left: nil", func(t *testing.T) {
		client := fakeCluster()
		c, err := p.start(ctx, client, "https://api.example", "v1.37.2", accepted(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if ns := namespaces(t, client); len(ns) != 0 {
			t.Errorf("namespaces left: %v", ns)
		}
	})
	t.Run("kept: everything stays", func(t *testing.T) {
		client := fakeCluster()
		spec := accepted()
		spec.Keep = true
		c, err := p.start(ctx, client, "https://api.example", "v1.37.2", spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if ns := namespaces(t, client); strings.Join(ns, ",") != "strandlab" {
			t.Errorf("namespaces after Stop of a kept run: %v", ns)
		}
	})
}

func TestDown(t *testing.T) {
	ctx := context.Background()
	t.Run("a namespace strandlab did not create is not deleted", func(t *testing.T) {
		client := fakeCluster()
		_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "strandlab"}}, metav1.CreateOptions{})
		err := down(ctx, client, "strandlab", time.Second, nil)
		if err == nil || !strings.Contains(err.Error(), "namespace strandlab was not created by strandlab (it lacks the label app.kubernetes.io/managed-by=strandlab): not deleting it") {
			t.Fatalf("down = %v", err)
		}
		if ns := namespaces(t, client); strings.Join(ns, ",") != "strandlab" {
			t.Errorf("namespaces: %v", ns)
		}
	})
	t.Run("a kept run's namespace is removed", func(t *testing.T) {
		client := fakeCluster()
		spec := accepted()
		spec.Keep = true
		if _, err := (&Provider{}).start(ctx, client, "https://api.example", "v1.37.2", spec, nil); err != nil {
			t.Fatal(err)
		}
		if err := down(ctx, client, "strandlab", time.Second, nil); err != nil {
			t.Fatal(err)
		}
		if ns := namespaces(t, client); len(ns) != 0 {
			t.Errorf("namespaces: %v", ns)
		}
	})
	t.Run("no namespace, nothing left: nil", func(t *testing.T) {
		if err := down(ctx, fakeCluster(), "strandlab", time.Second, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// Down against an API server that accepts and never answers fails with the
// server named, instead of hanging (each of its requests has a limit).
func TestDownAgainstAServerThatNeverAnswers(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // accept, read, never answer
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "silent.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Down(context.Background(), kubeconfig, "strandlab", io.Discard) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "the API server "+srv.URL+" (kubeconfig "+kubeconfig+") does not answer /version") {
			t.Errorf("Down = %v, want the silent server named", err)
		}
	case <-time.After(2 * versionTimeout):
		t.Fatalf("Down still waiting after %v", 2*versionTimeout)
	}
}
