package kind

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/strandlab/strandlab/internal/cluster"
)

// patch finds the kubeadm patch of the given kind and decodes it.
func patch(t *testing.T, cfg *v1alpha4.Cluster, kind string) map[string]any {
	t.Helper()
	for _, p := range cfg.KubeadmConfigPatches {
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(p), &doc); err != nil {
			t.Fatalf("patch is not YAML: %v\n%s", err, p)
		}
		if doc["kind"] == kind {
			return doc
		}
	}
	return nil
}

func TestRenderConfig(t *testing.T) {
	base := cluster.Spec{Name: "seed-122413", Nodes: 2, OutputDir: "/out"}
	layout := Layout{StateDir: "/tmp/strandlab-kind-1", CSIStateDir: "/tmp/strandlab-kind-1/csi"}
	mounts := []v1alpha4.Mount{
		{HostPath: "/tmp/strandlab-kind-1", ContainerPath: "/strandlab", Readonly: true},
		{HostPath: "/tmp/strandlab-kind-1/csi", ContainerPath: "/strandlab-csi"},
	}

	t.Run("nodes, roles, mounts, networking", func(t *testing.T) {
		cfg, err := RenderConfig(base, layout)
		if err != nil {
			t.Fatal(err)
		}
		var roles []v1alpha4.NodeRole
		for _, n := range cfg.Nodes {
			roles = append(roles, n.Role)
			if !reflect.DeepEqual(n.ExtraMounts, mounts) {
				t.Errorf("%s node mounts = %+v, want the state dirs %+v", n.Role, n.ExtraMounts, mounts)
			}
		}
		if want := []v1alpha4.NodeRole{"control-plane", "worker", "worker"}; !reflect.DeepEqual(roles, want) {
			t.Errorf("roles = %v, want %v", roles, want)
		}
		if !cfg.Networking.DisableDefaultCNI || cfg.Networking.KubeProxyMode != "none" {
			t.Errorf("networking = %+v, want no default CNI and no kube-proxy", cfg.Networking)
		}
		if patch(t, cfg, "ClusterConfiguration") != nil {
			t.Errorf("stock build: no ClusterConfiguration patch expected")
		}
		init := patch(t, cfg, "InitConfiguration")
		if got := init["skipPhases"]; !reflect.DeepEqual(got, []any{"preflight", "addon/kube-proxy", "addon/coredns"}) {
			t.Errorf("skipPhases = %v", got)
		}
		kubelet := patch(t, cfg, "KubeletConfiguration")
		if kubelet["failCgroupV1"] != false {
			t.Errorf("kubelet patch = %v, want failCgroupV1: false", kubelet)
		}
		// the node image's containerd runs runc with cgroupfs: they agree
		if kubelet["cgroupDriver"] != "cgroupfs" {
			t.Errorf("kubelet patch = %v, want cgroupDriver: cgroupfs", kubelet)
		}
		if _, set := kubelet["nodeStatusUpdateFrequency"]; set {
			t.Errorf("kubelet patch sets nodeStatusUpdateFrequency without the scenario asking: %v", kubelet)
		}
	})

	t.Run("scenario's kubelet frequencies", func(t *testing.T) {
		spec := base
		spec.NodeStatusUpdateFrequency = 2 * time.Second
		spec.NodeStatusReportFrequency = time.Minute
		cfg, err := RenderConfig(spec, layout)
		if err != nil {
			t.Fatal(err)
		}
		kubelet := patch(t, cfg, "KubeletConfiguration")
		if kubelet["nodeStatusUpdateFrequency"] != "2s" || kubelet["nodeStatusReportFrequency"] != "1m0s" {
			t.Errorf("kubelet patch = %v", kubelet)
		}
		if _, ok := kubelet["logging"]; ok {
			t.Errorf("kubelet logging set without a verbosity: %v", kubelet["logging"])
		}
	})

	t.Run("kubelet verbosity", func(t *testing.T) {
		spec := base
		spec.KubeletVerbosity = 4
		cfg, err := RenderConfig(spec, layout)
		if err != nil {
			t.Fatal(err)
		}
		if logging, _ := patch(t, cfg, "KubeletConfiguration")["logging"].(map[string]any); logging["verbosity"] != float64(4) {
			t.Errorf("kubelet logging = %v, want verbosity 4", logging)
		}
	})

	t.Run("controller build mounted over the static pod's binary", func(t *testing.T) {
		spec := base
		spec.ControllerManager = "/cache/kcm/fix/kube-controller-manager"
		spec.ControllerManagerArgs = []string{"--v=2", "--leader-elect=false", "--v=4"}
		cfg, err := RenderConfig(spec, layout)
		if err != nil {
			t.Fatal(err)
		}
		wantMounts := append(slices.Clone(mounts), v1alpha4.Mount{HostPath: spec.ControllerManager, ContainerPath: "/strandlab-kcm/bin/kube-controller-manager", Readonly: true})
		if !reflect.DeepEqual(cfg.Nodes[0].ExtraMounts, wantMounts) {
			t.Errorf("control-plane mounts = %+v, want %+v", cfg.Nodes[0].ExtraMounts, wantMounts)
		}
		for _, w := range cfg.Nodes[1:] {
			if len(w.ExtraMounts) != len(mounts) {
				t.Errorf("worker mounts the controller build: %+v", w.ExtraMounts)
			}
		}
		cm := patch(t, cfg, "ClusterConfiguration")["controllerManager"].(map[string]any)
		vol := cm["extraVolumes"].([]any)[0].(map[string]any)
		if vol["hostPath"] != "/strandlab-kcm/bin" || vol["mountPath"] != "/usr/local/bin" || vol["readOnly"] != true {
			t.Errorf("extraVolumes = %v", cm["extraVolumes"])
		}
		wantArgs := []any{map[string]any{"name": "v", "value": "4"}, map[string]any{"name": "leader-elect", "value": "false"}}
		if !reflect.DeepEqual(cm["extraArgs"], wantArgs) {
			t.Errorf("extraArgs = %v, want %v (a later flag wins, in first-seen order)", cm["extraArgs"], wantArgs)
		}
	})

	for _, tc := range []struct {
		name   string
		mutate func(*cluster.Spec, *Layout)
		want   string
	}{
		{"bad spec", func(s *cluster.Spec, _ *Layout) { s.Nodes = 0 }, "nodes"},
		{"relative state dir", func(_ *cluster.Spec, l *Layout) { l.StateDir = "state" }, `state dir "state"`},
		{"relative CSI state dir", func(_ *cluster.Spec, l *Layout) { l.CSIStateDir = "csi" }, `CSI state dir "csi"`},
		{"relative controller build", func(s *cluster.Spec, _ *Layout) { s.ControllerManager = "kcm" }, "controller manager \"kcm\""},
		{"flag without value", func(s *cluster.Spec, _ *Layout) { s.ControllerManagerArgs = []string{"--v"} }, `flag "--v"`},
		{"flag without dashes", func(s *cluster.Spec, _ *Layout) { s.ControllerManagerArgs = []string{"v=2"} }, `flag "v=2"`},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			spec, l := base, layout
			tc.mutate(&spec, &l)
			_, err := RenderConfig(spec, l)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestKindName(t *testing.T) {
	for _, tc := range []struct{ scenario, dir, want string }{
		{"seed-122413", "strandlab-kind-4711", "sl-seed-122413-4711"},
		{"Mirror_Safety", "strandlab-kind-12", "sl-mirror-safety-12"},
		{"a-very-long-scenario-name-indeed", "strandlab-kind-9", "sl-a-very-long-scenario-9"},
	} {
		if got := kindName(tc.scenario, tc.dir); got != tc.want {
			t.Errorf("kindName(%q, %q) = %q, want %q", tc.scenario, tc.dir, got, tc.want)
		}
	}
}
