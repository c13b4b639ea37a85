// Package existing is the e2e suite of the existing provider: a local
// cluster, started for the package, is treated as a cluster strandlab did
// not create (reached through a plain kubeconfig only), and the harness
// runs on it through the existing provider. The checks of what a run
// leaves behind are here, exported, so that e2e/kind runs them too.
package existing

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/runner"
)

// Witness watches, while a run goes, what it creates that must be gone
// afterwards: the PersistentVolumes claimed from the run's namespace (so
// that their VolumeAttachments can be looked for once the volumes are
// gone) and the namespace's labels. It reads the API on its own, not
// through the provider's code, so that it checks the provider.
type Witness struct {
	namespace string
	mu        sync.Mutex
	pvs       map[string]bool
	labels    map[string]string
	stop      context.CancelFunc
	factory   informers.SharedInformerFactory
}

// Watch starts a Witness of namespace; it stops with the test.
func Watch(t *testing.T, client kubernetes.Interface, namespace string) *Witness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &Witness{namespace: namespace, pvs: map[string]bool{}, stop: cancel, factory: informers.NewSharedInformerFactory(client, 0)}
	pvs, nss := w.factory.Core().V1().PersistentVolumes().Informer(), w.factory.Core().V1().Namespaces().Informer()
	onPV := func(o any) {
		if pv, ok := o.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == namespace {
			w.mu.Lock()
			w.pvs[pv.Name] = true
			w.mu.Unlock()
		}
	}
	onNS := func(o any) {
		if ns, ok := o.(*corev1.Namespace); ok && ns.Name == namespace {
			w.mu.Lock()
			if w.labels == nil {
				w.labels = ns.Labels
			}
			w.mu.Unlock()
		}
	}
	if _, err := pvs.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onPV, UpdateFunc: func(_, o any) { onPV(o) }}); err != nil {
		t.Fatal(err)
	}
	if _, err := nss.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onNS, UpdateFunc: func(_, o any) { onNS(o) }}); err != nil {
		t.Fatal(err)
	}
	w.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pvs.HasSynced, nss.HasSynced) {
		t.Fatal("witness informers did not sync")
	}
	t.Cleanup(w.Stop)
	return w
}

// Stop ends the watches.
func (w *Witness) Stop() {
	w.stop()
	w.factory.Shutdown()
}

// PVs are the PersistentVolumes seen claimed from the namespace.
func (w *Witness) PVs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for n := range w.pvs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Labels are the namespace's labels when it was first seen (nil: never
// seen).
func (w *Witness) Labels() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.labels
}

// Left lists what of the run is still in the cluster: the namespace, any
// PersistentVolume claimed from it, any VolumeAttachment of a PV the
// witness saw or of one claimed from it now. Empty: nothing.
func (w *Witness) Left(ctx context.Context, client kubernetes.Interface) ([]string, error) {
	var left []string
	if ns, err := client.CoreV1().Namespaces().Get(ctx, w.namespace, metav1.GetOptions{}); err == nil {
		left = append(left, fmt.Sprintf("namespace %s (%s)", ns.Name, ns.Status.Phase))
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	ours := map[string]bool{}
	for _, n := range w.PVs() {
		ours[n] = true
	}
	pvs, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, pv := range pvs.Items {
		if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == w.namespace {
			ours[pv.Name] = true
			left = append(left, "PersistentVolume "+pv.Name)
		}
	}
	vas, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, va := range vas.Items {
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil && ours[*pv] {
			left = append(left, "VolumeAttachment "+va.Name+" of "+*pv)
		}
	}
	return left, nil
}

// AssertNothingLeft fails the test when the run left anything, at once:
// a provider's Stop returns only once everything is gone, so nothing may
// be waited for here.
func (w *Witness) AssertNothingLeft(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	left, err := w.Left(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the run left on the cluster: %v", left)
	}
}

// RunAndRead prepares and runs opts with the harness's runner, as
// `strandlab run` does, and returns the report it wrote and how long the run
// took (churn and cleanup).
func RunAndRead(ctx context.Context, t *testing.T, opts runner.Options) (*report.Report, time.Duration) {
	t.Helper()
	sc, err := runner.Prepare(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	dir, err := runner.Run(ctx, opts, sc)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	took := time.Since(begin)
	rep, err := report.Read(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	return rep, took
}
