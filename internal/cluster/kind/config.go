package kind

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/strandlab/strandlab/internal/cluster"
)

// Paths inside the nodes where the host's files for this cluster appear.
const (
	// nodeStateDir is the cluster's state directory, mounted read-only into
	// every node (kubeconfigs, certificates, manifests the harness writes).
	nodeStateDir = "/strandlab"
	// nodeCSIStateDir is the CSI driver's shared state (volume state and
	// data), mounted read-write into every node: the controller and node
	// plugins share it as the local provider's processes share a directory
	// (manifests/kind/csi.yaml).
	nodeCSIStateDir = "/strandlab-csi"
	// nodeControllerBuild is the kube-controller-manager binary of the
	// controller build under test, mounted from the host into the
	// control-plane node and from there over the static pod's
	// /usr/local/bin, where the image's own (stock) binary lives: the pod's
	// command "kube-controller-manager" then runs the build under test, and
	// switching builds never rebuilds the node image.
	nodeControllerBuild = "/strandlab-kcm/bin/kube-controller-manager"
)

// Layout says where the host side of a cluster's files are; the kind config
// mounts them into the nodes.
type Layout struct {
	// StateDir is the cluster's state directory on the host.
	StateDir string
	// CSIStateDir is the CSI driver's state directory on the host.
	CSIStateDir string
	// ProxyAdminPort is the host port (on 127.0.0.1) of the throttling
	// proxy's admin server; needed when the spec has a proxy.
	ProxyAdminPort int
}

// RenderConfig renders the kind cluster configuration for spec: one
// control-plane node and spec.Nodes workers, no default CNI (the node image
// carries a bridge config), no kube-proxy (nothing strandlab runs in the
// cluster uses Services), and kubeadm patches that make the kubelets and
// kube-controller-manager what the scenario asks for. It is pure: the tests
// check it field by field.
func RenderConfig(spec cluster.Spec, layout Layout) (*v1alpha4.Cluster, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	for _, d := range []struct{ name, path string }{{"state dir", layout.StateDir}, {"CSI state dir", layout.CSIStateDir}} {
		if !filepath.IsAbs(d.path) {
			return nil, fmt.Errorf("kind config: %s %q: must be an absolute path", d.name, d.path)
		}
	}
	cfg := &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:     spec.Name,
		Networking: v1alpha4.Networking{
			DisableDefaultCNI: true,
			KubeProxyMode:     v1alpha4.ProxyMode("none"), // kind skips the kube-proxy addon
		},
	}
	mounts := []v1alpha4.Mount{
		{HostPath: layout.StateDir, ContainerPath: nodeStateDir, Readonly: true},
		{HostPath: layout.CSIStateDir, ContainerPath: nodeCSIStateDir},
	}
	controlPlane := v1alpha4.Node{Role: v1alpha4.ControlPlaneRole, ExtraMounts: slices.Clone(mounts)}
	if spec.ControllerManager != "" {
		if !filepath.IsAbs(spec.ControllerManager) {
			return nil, fmt.Errorf("kind config: controller manager %q: must be an absolute path", spec.ControllerManager)
		}
		controlPlane.ExtraMounts = append(controlPlane.ExtraMounts, v1alpha4.Mount{
			HostPath: spec.ControllerManager, ContainerPath: nodeControllerBuild, Readonly: true,
		})
	}
	if spec.Proxy != nil {
		if layout.ProxyAdminPort <= 0 || layout.ProxyAdminPort > 65535 {
			return nil, fmt.Errorf("kind config: proxy admin port %d: want a host port", layout.ProxyAdminPort)
		}
		controlPlane.ExtraPortMappings = []v1alpha4.PortMapping{{
			ContainerPort: proxyAdminPort, HostPort: int32(layout.ProxyAdminPort), ListenAddress: "127.0.0.1", Protocol: v1alpha4.PortMappingProtocolTCP,
		}}
	}
	cfg.Nodes = append(cfg.Nodes, controlPlane)
	for range spec.Nodes {
		cfg.Nodes = append(cfg.Nodes, v1alpha4.Node{Role: v1alpha4.WorkerRole, ExtraMounts: slices.Clone(mounts)})
	}
	patches, err := kubeadmPatches(spec)
	if err != nil {
		return nil, err
	}
	cfg.KubeadmConfigPatches = patches
	return cfg, nil
}

// kubeadmPatches are merge patches on the kubeadm configuration kind
// generates (kind matches them by kind; without apiVersion they apply to
// whichever kubeadm API version kind picks).
func kubeadmPatches(spec cluster.Spec) ([]string, error) {
	kubelet := map[string]any{
		"kind": "KubeletConfiguration",
		// The kubelet refuses cgroup v1 hosts by default since v1.35; kind
		// nodes on a cgroup v1 host (docs/kind-offline.md) need this.
		"failCgroupV1": false,
		// cgroupfs, not kind's systemd: with the systemd driver every pod
		// and container start and stop is a D-Bus round trip to the
		// node's systemd, which creates or removes a slice or scope for
		// it. The volume path does not go through cgroups, and the churn
		// starts and stops tens of containers a second (docs/performance.md,
		// "kind"). The node image's containerd uses cgroupfs too
		// (tools/kind-image/build-node.sh): the two must agree.
		"cgroupDriver": "cgroupfs",
	}
	if d := spec.NodeStatusUpdateFrequency; d > 0 {
		kubelet["nodeStatusUpdateFrequency"] = d.String()
	}
	if d := spec.NodeStatusReportFrequency; d > 0 {
		kubelet["nodeStatusReportFrequency"] = d.String()
	}
	if v := spec.KubeletVerbosity; v > 0 {
		// component-base's LoggingConfiguration, the kubelet's -v.
		kubelet["logging"] = map[string]any{"verbosity": v}
	}
	init := map[string]any{
		"kind": "InitConfiguration",
		// kind skips preflight itself; kube-proxy and CoreDNS have no image
		// in the offline node image and nothing here needs them.
		"skipPhases": []string{"preflight", "addon/kube-proxy", "addon/coredns"},
	}
	controllerManager := map[string]any{}
	if spec.ControllerManager != "" {
		controllerManager["extraVolumes"] = []map[string]any{{
			"name": "strandlab-controller-build", "hostPath": filepath.Dir(nodeControllerBuild),
			"mountPath": "/usr/local/bin", "readOnly": true, "pathType": "Directory",
		}}
	}
	if args, err := extraArgs(spec.ControllerManagerArgs); err != nil {
		return nil, err
	} else if len(args) > 0 {
		controllerManager["extraArgs"] = args
	}
	var patches []string
	for _, doc := range []map[string]any{kubelet, init} {
		b, err := yaml.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("kind config: kubeadm patch %s: %w", doc["kind"], err)
		}
		patches = append(patches, string(b))
	}
	if len(controllerManager) > 0 {
		b, err := yaml.Marshal(map[string]any{"kind": "ClusterConfiguration", "controllerManager": controllerManager})
		if err != nil {
			return nil, fmt.Errorf("kind config: kubeadm patch ClusterConfiguration: %w", err)
		}
		patches = append(patches, string(b))
	}
	return patches, nil
}

// extraArgs turns "--name=value" flags into kubeadm v1beta4's extraArgs
// list (a later flag of the same name wins, as on the command line).
func extraArgs(flags []string) ([]map[string]string, error) {
	var out []map[string]string
	index := map[string]int{}
	for _, f := range flags {
		name, value, ok := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		if !strings.HasPrefix(f, "--") || !ok || name == "" {
			return nil, fmt.Errorf("kind config: controller manager flag %q: want --name=value", f)
		}
		if i, seen := index[name]; seen {
			out[i]["value"] = value
			continue
		}
		index[name] = len(out)
		out = append(out, map[string]string{"name": name, "value": value})
	}
	return out, nil
}

// defaultStartTimeout bounds kind's create and the wait for Ready nodes.
const defaultStartTimeout = 5 * time.Minute
