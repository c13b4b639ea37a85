package existing

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/strandlab/strandlab/internal/cluster"
)

// This file is the provider's pure logic: what it refuses, which nodes
// count, what a StorageClass must be, what is left after a run. No API
// calls; existing.go feeds it what it read.

// Capabilities: on a cluster strandlab did not create, none. The cluster
// runs its own kube-controller-manager (builds: [stock]); no throttling
// proxy can sit between it and its API server and no extender be called by
// its scheduler (a managed control plane allows neither); its CSI driver
// and kubelets keep their own configuration, so a scenario that set them
// would measure something other than it says; its nodes are known only
// once it answers (docs/existing.md).
var Capabilities = cluster.Capabilities{}

// CheckSpec refuses, beyond what Capabilities rules out, a spec without
// the namespace to create or the cluster's StorageClass to use. Every
// refusal is reported, one per line.
func CheckSpec(spec cluster.Spec) error {
	var errs []error
	if spec.Namespace == "" {
		errs = append(errs, errors.New("namespace: the existing provider needs the name of the namespace to create"))
	}
	if spec.StorageClass == "" {
		errs = append(errs, errors.New("cluster.storageClass: the existing provider needs the name of the cluster's StorageClass"))
	}
	return errors.Join(errs...)
}

// ProxyIgnored is true when spec asks for a proxy that holds nothing back
// (`proxy: {}`): it is accepted, and the run goes without a proxy.
func ProxyIgnored(spec cluster.Spec) bool {
	return spec.Proxy != nil && !cluster.ProxyHoldsBack(spec.Proxy)
}

// Schedulable returns the names of the nodes a pod of the workload can be
// placed on (sorted): Ready, not cordoned, and without a NoSchedule or
// NoExecute taint (the workload's pods tolerate none), and the distinct
// kubelet versions they report.
func Schedulable(nodes []corev1.Node) (names, kubeletVersions []string) {
	for _, n := range nodes {
		if n.Spec.Unschedulable || !ready(&n) {
			continue
		}
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}) {
			continue
		}
		names = append(names, n.Name)
		if v := n.Status.NodeInfo.KubeletVersion; v != "" && !slices.Contains(kubeletVersions, v) {
			kubeletVersions = append(kubeletVersions, v)
		}
	}
	slices.Sort(names)
	slices.Sort(kubeletVersions)
	return names, kubeletVersions
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// CheckStorageClass holds the class the workload's PVCs use to what a run
// needs. An error refuses it: reclaimPolicy Retain would leave every
// volume the run provisions behind. A warning is printed and the run goes
// on: volumes whose driver needs no attach (or that are not CSI) never go
// through the attach/detach controller, so nothing can strand.
func CheckStorageClass(sc *storagev1.StorageClass, drivers []storagev1.CSIDriver) (warning string, err error) {
	if sc.ReclaimPolicy != nil && *sc.ReclaimPolicy == corev1.PersistentVolumeReclaimRetain {
		return "", fmt.Errorf("cluster.storageClass: %q has reclaimPolicy Retain: the volumes a run provisions would outlive it; choose a class with reclaimPolicy Delete", sc.Name)
	}
	i := slices.IndexFunc(drivers, func(d storagev1.CSIDriver) bool { return d.Name == sc.Provisioner })
	switch {
	case i < 0:
		return fmt.Sprintf("StorageClass %s's provisioner %s is not a CSIDriver of the cluster: its volumes are not attachable CSI volumes, so the detector checks none of them and nothing can be reported stranded", sc.Name, sc.Provisioner), nil
	case drivers[i].Spec.AttachRequired != nil && !*drivers[i].Spec.AttachRequired:
		return fmt.Sprintf("CSIDriver %s (StorageClass %s) sets attachRequired: false: its volumes never go through the attach/detach controller, so nothing can strand", sc.Provisioner, sc.Name), nil
	}
	return "", nil
}

// ClassNames lists the classes for an error message, the default marked.
func ClassNames(classes []storagev1.StorageClass) string {
	if len(classes) == 0 {
		return "none"
	}
	var names []string
	for _, c := range classes {
		n := c.Name
		if c.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			n += " (default)"
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// ClaimedFrom lists the PersistentVolumes whose claimRef is in namespace.
func ClaimedFrom(namespace string, pvs []corev1.PersistentVolume) []string {
	var out []string
	for _, pv := range pvs {
		if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == namespace {
			out = append(out, pv.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Leftovers describes what of a run is still in the cluster: the
// namespace (ns, nil when gone), every PersistentVolume claimed from it,
// and every VolumeAttachment of those PVs or of a PV in ours. ours is the
// set of PVs seen claimed from the namespace so far; Leftovers adds the
// ones it finds, so that an attachment is still found after its PV is gone.
func Leftovers(namespace string, ns *corev1.Namespace, pvs []corev1.PersistentVolume, vas []storagev1.VolumeAttachment, ours map[string]bool) []string {
	var left []string
	if ns != nil {
		left = append(left, fmt.Sprintf("namespace %s (%s)", namespace, ns.Status.Phase))
	}
	for _, pv := range pvs {
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != namespace {
			continue
		}
		ours[pv.Name] = true
		left = append(left, fmt.Sprintf("PersistentVolume %s (%s, claim %s/%s)", pv.Name, pv.Status.Phase, namespace, pv.Spec.ClaimRef.Name))
	}
	for _, va := range vas {
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil && ours[*pv] {
			left = append(left, fmt.Sprintf("VolumeAttachment %s (PV %s on node %s, attached=%v)", va.Name, *pv, va.Spec.NodeName, va.Status.Attached))
		}
	}
	return left
}

// RunLabel turns a cluster spec's name into a label value (at most 63
// characters of letters, digits, '-', '_', '.', alphanumeric at both ends).
func RunLabel(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	s := string(b)
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.TrimFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
}
