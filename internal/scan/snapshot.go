// Package scan takes a snapshot of a live cluster for the detector and
// renders findings. It only reads (list and get), so operators can run it on
// production clusters; internal/detector decides what is stranded.
package scan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/detector"
)

// APIError is a failed API call, naming the verb and resource so that an
// operator can tell a missing permission from an unreachable cluster.
type APIError struct {
	Verb      string // list or get
	Resource  string // e.g. "pods" or "volumeattachments.storage.k8s.io"
	Namespace string // "" for cluster-scoped resources or all namespaces
	Name      string // for get
	Err       error
}

func (e *APIError) Error() string {
	what := e.Resource
	if e.Name != "" {
		what += " " + e.Name
	}
	if e.Namespace != "" {
		what += " in namespace " + e.Namespace
	}
	return fmt.Sprintf("cannot %s %s: %v", e.Verb, what, e.Err)
}

func (e *APIError) Unwrap() error { return e.Err }

// ErrNoNamespace: the namespace to scan does not exist.
var ErrNoNamespace = errors.New("nothing to scan")

// Resources the scan reads, as RBAC names them (manifests/strandscan/rbac.yaml).
const (
	resPods     = "pods"
	resNodes    = "nodes"
	resPVCs     = "persistentvolumeclaims"
	resPVs      = "persistentvolumes"
	resVAs      = "volumeattachments.storage.k8s.io"
	resDrivers  = "csidrivers.storage.k8s.io"
	resNSes     = "namespaces"
	managedAnno = "volumes.kubernetes.io/controller-managed-attach-detach"
)

// Snapshot lists everything the detector needs: pods and PVCs in namespace
// ("" for all namespaces), and the cluster-scoped nodes, PVs,
// VolumeAttachments and CSIDrivers. Lists are paginated (500 a page) so a
// large cluster is read in bounded chunks. The snapshot's Time is when the
// first list started: ages measured from it are never overstated.
//
// The lists are not one consistent read. The order keeps the skew harmless
// where it matters: VolumeAttachments are read before nodes, so an attach
// that completes in between shows as listed (healthy), not as stranded; pods
// are read last, so a pod deleted meanwhile is simply absent.
func Snapshot(ctx context.Context, client kubernetes.Interface, namespace string) (detector.Snapshot, error) {
	s := detector.Snapshot{Time: time.Now().UTC(), Namespace: namespace}
	var err error
	if namespace != "" {
		// A namespace that does not exist lists as empty: without this
		// check a typo in -n would read as "no stranded volumes".
		if _, err = client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return s, fmt.Errorf("namespace %q does not exist: %w", namespace, ErrNoNamespace)
			}
			return s, &APIError{Verb: "get", Resource: resNSes, Name: namespace, Err: err}
		}
	}
	if s.CSIDrivers, err = listAll[storagev1.CSIDriver](ctx, resDrivers, "", client.StorageV1().CSIDrivers().List); err != nil {
		return s, err
	}
	if s.VolumeAttachments, err = listAll[storagev1.VolumeAttachment](ctx, resVAs, "", client.StorageV1().VolumeAttachments().List); err != nil {
		return s, err
	}
	if s.Nodes, err = listAll[corev1.Node](ctx, resNodes, "", client.CoreV1().Nodes().List); err != nil {
		return s, err
	}
	if s.PVs, err = listAll[corev1.PersistentVolume](ctx, resPVs, "", client.CoreV1().PersistentVolumes().List); err != nil {
		return s, err
	}
	if s.PVCs, err = listAll[corev1.PersistentVolumeClaim](ctx, resPVCs, namespace, client.CoreV1().PersistentVolumeClaims(namespace).List); err != nil {
		return s, err
	}
	if s.Pods, err = listAll[corev1.Pod](ctx, resPods, namespace, client.CoreV1().Pods(namespace).List); err != nil {
		return s, err
	}
	return s, nil
}

// listAll pages through one resource with Limit/Continue.
func listAll[T any, L runtime.Object](ctx context.Context, resource, namespace string, list func(context.Context, metav1.ListOptions) (L, error)) ([]*T, error) {
	start := time.Now()
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		l, err := list(ctx, opts)
		if err != nil {
			return nil, err // not l: a typed nil would look like a page
		}
		return l, nil
	})
	var out []*T
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(o runtime.Object) error {
		item, ok := any(o).(*T)
		if !ok {
			return fmt.Errorf("unexpected %T in the list", o)
		}
		out = append(out, item)
		return nil
	})
	if err != nil {
		return nil, &APIError{Verb: "list", Resource: resource, Namespace: namespace, Err: err}
	}
	klog.FromContext(ctx).V(2).Info("Listed", "resource", resource, "namespace", namespace, "count", len(out), "duration", time.Since(start))
	return out, nil
}

// recheckSnapshot fetches, one get each, only the objects that decide the
// given findings: the re-check repeats every few seconds, and listing every
// pod of a large cluster that often would load the API server for nothing.
// For these findings the detector's answer on this small snapshot is the same
// as on a full one: a finding depends only on its pod, the pod's PVCs, the PV,
// the node, the VolumeAttachment and the CSIDriver. CSIDrivers are taken from
// the first snapshot (they are few and practically never change). An object
// that is gone is left out, which ends its finding. A pod fetched by name
// that has been replaced (another UID) gives findings of another key, which
// ends the candidate too. Other findings the detector returns on this
// partial snapshot (e.g. phantom listings, which need every pod) mean
// nothing and are not read.
func recheckSnapshot(ctx context.Context, client kubernetes.Interface, drivers []*storagev1.CSIDriver, findings []detector.Finding) (detector.Snapshot, error) {
	s := detector.Snapshot{Time: time.Now().UTC(), CSIDrivers: drivers}
	seen := map[string]bool{}
	for _, f := range findings {
		ns, name, _ := strings.Cut(f.Pod, "/")
		pods := len(s.Pods)
		if err := getOnce(ctx, seen, resPods, ns, name, client.CoreV1().Pods(ns).Get, &s.Pods); err != nil {
			return s, err
		}
		if len(s.Pods) > pods {
			for _, v := range s.Pods[len(s.Pods)-1].Spec.Volumes {
				if v.PersistentVolumeClaim == nil {
					continue
				}
				if err := getOnce(ctx, seen, resPVCs, ns, v.PersistentVolumeClaim.ClaimName, client.CoreV1().PersistentVolumeClaims(ns).Get, &s.PVCs); err != nil {
					return s, err
				}
			}
		}
		if err := getOnce(ctx, seen, resPVs, "", f.PV, client.CoreV1().PersistentVolumes().Get, &s.PVs); err != nil {
			return s, err
		}
		if err := getOnce(ctx, seen, resNodes, "", f.Node, client.CoreV1().Nodes().Get, &s.Nodes); err != nil {
			return s, err
		}
		if err := getOnce(ctx, seen, resVAs, "", f.VolumeAttachment, client.StorageV1().VolumeAttachments().Get, &s.VolumeAttachments); err != nil {
			return s, err
		}
	}
	return s, nil
}

// getOnce appends the named object to into, unless it was fetched already
// (several findings share a node or pod) or does not exist.
func getOnce[T any](ctx context.Context, seen map[string]bool, resource, namespace, name string, get func(context.Context, string, metav1.GetOptions) (*T, error), into *[]*T) error {
	key := resource + "/" + namespace + "/" + name
	if name == "" || seen[key] {
		return nil
	}
	seen[key] = true
	obj, err := get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return &APIError{Verb: "get", Resource: resource, Namespace: namespace, Name: name, Err: err}
	}
	*into = append(*into, obj)
	return nil
}

// controllerManaged drops the nodes whose volumes the attach/detach
// controller does not manage (no controller-managed-attach-detach
// annotation): there the kubelet attaches by itself and
// status.volumesAttached is not kept, so every attached volume would look
// stranded. The definitions (docs/design.md) are about the controller's nodes only.
func controllerManaged(s detector.Snapshot) (detector.Snapshot, int) {
	kept := make([]*corev1.Node, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		if n.Annotations[managedAnno] == "true" {
			kept = append(kept, n)
		}
	}
	skipped := len(s.Nodes) - len(kept)
	s.Nodes = kept
	return s, skipped
}
