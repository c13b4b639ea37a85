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

	// KindCSIUpstream is kind/csi-hostpath-upstream.yaml: upstream's
	// csi-driver-host-path in place of strandlab's driver, for users with
	// a registry (run --csi-driver upstream; its images are not built here).
	//
	//go:embed kind/csi-hostpath-upstream.yaml
	KindCSIUpstream []byte

	// StrandscanRBAC is strandscan/rbac.yaml: strandscan's read-only role,
	// bound to the ServiceAccount kube-system/strandscan.
	//
	//go:embed strandscan/rbac.yaml
	StrandscanRBAC []byte
)

// The soak Job (soak-job/, docs/soak-job.md): shards of a scenario as an
// Indexed Job of the strandlab image, and the Job that merges their reports.
var (
	// SoakJobNamespace is soak-job/namespace.yaml.
	//
	//go:embed soak-job/namespace.yaml
	SoakJobNamespace []byte

	// SoakJobReportsPVC is soak-job/reports-pvc.yaml: the reports volume.
	//
	//go:embed soak-job/reports-pvc.yaml
	SoakJobReportsPVC []byte

	// SoakJobShards is soak-job/shards.yaml: the Indexed Job of the shards.
	//
	//go:embed soak-job/shards.yaml
	SoakJobShards []byte

	// SoakJobMerge is soak-job/merge.yaml: the Job that pools their reports.
	//
	//go:embed soak-job/merge.yaml
	SoakJobMerge []byte
)

// SoakJobImage is the image the soak Job's manifests name, for the tag
// tools/images/build-strandlab.sh prints.
const SoakJobImage = "strandlab/strandlab:dev"
