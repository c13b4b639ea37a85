// Package manifests embeds the Kubernetes manifests strandlab applies, so the
// harness and a user with kubectl use the very same objects.
package manifests

import _ "embed"

// The names csi/driver.yaml gives the driver and its StorageClass (a
// provider may rename the driver; manifests_test checks these match).
const (
	CSIDriverName    = "hostpath.csi.k8s.io"
	StorageClassName = "strandlab-hostpath"
)

var (
	// StatefulSet is statefulset.yaml: the churned workload.
	//
	//go:embed statefulset.yaml
	StatefulSet []byte

	// CSIRBAC is csi/rbac.yaml: the CSI sidecars' roles.
	//
	//go:embed csi/rbac.yaml
	CSIRBAC []byte

	// CSIDriver is csi/driver.yaml: CSIDriver and StorageClass.
	//
	//go:embed csi/driver.yaml
	CSIDriver []byte

	// ExtenderRBAC is extender/rbac.yaml: the pinning extender's role.
	//
	//go:embed extender/rbac.yaml
	ExtenderRBAC []byte

	// KindCSI is kind/csi.yaml: the CSI driver's controller Deployment and
	// node DaemonSet in a kind cluster.
	//
	//go:embed kind/csi.yaml
	KindCSI []byte

	// StrandscanRBAC is strandscan/rbac.yaml: strandscan's read-only role,
	// bound to the ServiceAccount kube-system/strandscan.
	//
	//go:embed strandscan/rbac.yaml
	StrandscanRBAC []byte
)
