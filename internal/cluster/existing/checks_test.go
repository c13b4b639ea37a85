package existing

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/pinning"
)

// accepted is a spec the existing provider runs: what the runner builds
// from a scenario without proxy faults, pinning or kubelet settings.
func accepted() cluster.Spec {
	return cluster.Spec{Name: "existing-control-stock", Nodes: 3, OutputDir: "/out", Namespace: "strandlab", StorageClass: "strandlab-hostpath"}
}

// What the runner asks of the existing provider: its capabilities' refusals
// and its own, one per field.
func TestCheckSpec(t *testing.T) {
	rule := fault.Rule{Resource: "nodes", Predicate: fault.PredicateVolumesAttachedRemoved, Delay: fault.Delay{Fixed: fault.D(3 * time.Second)}}
	tests := []struct {
		name   string
		change func(*cluster.Spec)
		want   []string // every field the error must name; none: accepted
	}{
		{name: "no proxy, no pinning, stock", change: func(*cluster.Spec) {}},
		{name: "proxy: {} holds nothing back", change: func(s *cluster.Spec) { s.Proxy = &fault.Profile{Seed: 1} }},
		{name: "keep", change: func(s *cluster.Spec) { s.Keep = true }},
		{name: "proxy rules", change: func(s *cluster.Spec) { s.Proxy = &fault.Profile{Rules: []fault.Rule{rule}} },
			want: []string{"proxy.rules: 1 fault rule(s)"}},
		{name: "proxy api errors", change: func(s *cluster.Spec) {
			s.Proxy = &fault.Profile{APIErrors: []fault.APIError{{Resource: "nodes", Subresource: "status", Status: 500, Nth: 1}}}
		}, want: []string{"proxy.apiErrors: 1 error rule(s)"}},
		{name: "proxy request latency", change: func(s *cluster.Spec) {
			s.Proxy = &fault.Profile{RequestLatency: fault.Delay{Fixed: fault.D(time.Millisecond)}}
		}, want: []string{"proxy.requestLatency:"}},
		{name: "proxy throttling", change: func(s *cluster.Spec) { s.Proxy = &fault.Profile{QPS: 20, Burst: 40, QueueLimit: 5} },
			want: []string{"proxy.qps:", "proxy.burst:", "proxy.queueLimit:"}},
		{name: "pinning extender", change: func(s *cluster.Spec) { s.Pinning = &pinning.Config{Sticky: true} },
			want: []string{"scheduling.pinning: needs strandlab's pinning extender"}},
		{name: "a controller build", change: func(s *cluster.Spec) { s.ControllerManager = "/bin/kcm-fix" },
			want: []string{"builds: a controller build needs its own kube-controller-manager (/bin/kcm-fix)"}},
		{name: "controller flags", change: func(s *cluster.Spec) { s.ControllerManagerArgs = []string{"--v=4"} },
			want: []string{"builds: kube-controller-manager flags [--v=4]"}},
		{name: "a CSI driver deployed", change: func(s *cluster.Spec) { s.CSIDeployment = cluster.CSIUpstream },
			want: []string{"--csi-driver: upstream deploys a CSI driver"}},
		{name: "strandlab's CSI driver", change: func(s *cluster.Spec) { s.CSIDriverName = "hostpath.csi.k8s.io" },
			want: []string{"cluster.csiDriver:"}},
		{name: "faults of strandlab's CSI driver", change: func(s *cluster.Spec) {
			s.CSIErrors = []fault.CSIError{{Call: "ControllerUnpublishVolume", Code: "INTERNAL", Nth: 1}}
		}, want: []string{"csiErrors: 1 fault rule(s) for strandlab's own CSI driver"}},
		{name: "simulated kubelets' status pace", change: func(s *cluster.Spec) { s.NodeStatusUpdateFrequency = time.Second },
			want: []string{"cluster.nodeStatusUpdateFrequency: configures strandlab's simulated kubelets"}},
		{name: "simulated kubelets' report pace", change: func(s *cluster.Spec) { s.NodeStatusReportFrequency = time.Second },
			want: []string{"cluster.nodeStatusReportFrequency:"}},
		{name: "the kubelets' log verbosity", change: func(s *cluster.Spec) { s.KubeletVerbosity = 4 },
			want: []string{"--kubelet-verbosity:"}},
		{name: "simulated kubelets' FailedMount", change: func(s *cluster.Spec) { s.FailedMountOnTimeout = true },
			want: []string{"cluster.failedMountOnTimeout:"}},
		{name: "simulated kubelets' runtime timings", change: func(s *cluster.Spec) { s.RuntimeTimings = "timings.json" },
			want: []string{"--runtime-timings:"}},
		{name: "no namespace", change: func(s *cluster.Spec) { s.Namespace = "" }, want: []string{"namespace:"}},
		{name: "no storage class", change: func(s *cluster.Spec) { s.StorageClass = "" }, want: []string{"cluster.storageClass:"}},
		{name: "seed-122413 names all its fields", change: func(s *cluster.Spec) {
			s.Proxy = &fault.Profile{Rules: []fault.Rule{rule}}
			s.Pinning = &pinning.Config{Sticky: true}
			s.NodeStatusUpdateFrequency = time.Second
		}, want: []string{"proxy.rules:", "scheduling.pinning:", "cluster.nodeStatusUpdateFrequency:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := accepted()
			tc.change(&spec)
			err := cluster.CheckSpec(&Provider{}, spec)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want a refusal naming %v", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if lines := strings.Count(err.Error(), "\n") + 1; lines != len(tc.want) {
				t.Errorf("%d refusals, want %d (one per field):\n%v", lines, len(tc.want), err)
			}
		})
	}
}

func TestProxyIgnored(t *testing.T) {
	for _, tc := range []struct {
		proxy *fault.Profile
		want  bool
	}{
		{nil, false},
		{&fault.Profile{Seed: 3}, true},
		{&fault.Profile{QPS: 1}, false},
	} {
		spec := accepted()
		spec.Proxy = tc.proxy
		if got := ProxyIgnored(spec); got != tc.want {
			t.Errorf("ProxyIgnored(%+v) = %v, want %v", tc.proxy, got, tc.want)
		}
	}
}

func node(name string, ready bool, mutate func(*corev1.Node)) corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}, NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"}}}
	if mutate != nil {
		mutate(&n)
	}
	return n
}

func TestSchedulable(t *testing.T) {
	nodes := []corev1.Node{
		node("w2", true, nil),
		node("w1", true, func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = "v1.36.0" }),
		node("not-ready", false, nil),
		node("cordoned", true, func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		node("control-plane", true, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
		}),
		node("draining", true, func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoExecute}} }),
		node("prefer", true, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}}
		}),
		{ObjectMeta: metav1.ObjectMeta{Name: "no-status"}},
	}
	names, versions := Schedulable(nodes)
	if got := strings.Join(names, ","); got != "prefer,w1,w2" {
		t.Errorf("schedulable = %s, want prefer,w1,w2", got)
	}
	if got := strings.Join(versions, ","); got != "v1.36.0,v1.37.2" {
		t.Errorf("kubelet versions = %s", got)
	}
}

func TestCheckStorageClass(t *testing.T) {
	retain, del := corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimDelete
	no, yes := false, true
	class := func(provisioner string, policy *corev1.PersistentVolumeReclaimPolicy) *storagev1.StorageClass {
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: provisioner, ReclaimPolicy: policy}
	}
	drivers := []storagev1.CSIDriver{
		{ObjectMeta: metav1.ObjectMeta{Name: "attach.csi"}, Spec: storagev1.CSIDriverSpec{AttachRequired: &yes}},
		{ObjectMeta: metav1.ObjectMeta{Name: "default.csi"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "noattach.csi"}, Spec: storagev1.CSIDriverSpec{AttachRequired: &no}},
	}
	tests := []struct {
		name        string
		sc          *storagev1.StorageClass
		warn, error string
	}{
		{"attachable CSI, Delete", class("attach.csi", &del), "", ""},
		{"attachRequired unset means required", class("default.csi", nil), "", ""},
		{"Retain is refused", class("attach.csi", &retain), "", `cluster.storageClass: "fast" has reclaimPolicy Retain`},
		{"no attach: warned", class("noattach.csi", &del), "attachRequired: false", ""},
		{"not a CSI driver: warned", class("kubernetes.io/no-provisioner", &del), "is not a CSIDriver", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			warn, err := CheckStorageClass(tc.sc, drivers)
			if tc.error == "" && err != nil || tc.error != "" && (err == nil || !strings.Contains(err.Error(), tc.error)) {
				t.Errorf("error %v, want %q", err, tc.error)
			}
			if tc.warn == "" && warn != "" || !strings.Contains(warn, tc.warn) {
				t.Errorf("warning %q, want %q", warn, tc.warn)
			}
		})
	}
}

func TestClassNames(t *testing.T) {
	classes := []storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "standard", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "fast"}},
	}
	if got := ClassNames(classes); got != "fast, standard (default)" {
		t.Errorf("ClassNames = %q", got)
	}
	if got := ClassNames(nil); got != "none" {
		t.Errorf("ClassNames(nil) = %q", got)
	}
}

func pv(name, claimNS string) corev1.PersistentVolume {
	p := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased}}
	if claimNS != "" {
		p.Spec.ClaimRef = &corev1.ObjectReference{Namespace: claimNS, Name: "data-0-web-0"}
	}
	return p
}

func va(name, pvName string) storagev1.VolumeAttachment {
	return storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{NodeName: "node-1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}}}
}

func TestLeftovers(t *testing.T) {
	ours := map[string]bool{"pv-gone": true}
	ns := &corev1.Namespace{Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	pvs := []corev1.PersistentVolume{pv("pv-a", "strandlab"), pv("pv-other", "default"), pv("pv-static", "")}
	vas := []storagev1.VolumeAttachment{va("csi-a", "pv-a"), va("csi-gone", "pv-gone"), va("csi-other", "pv-other")}
	left := Leftovers("strandlab", ns, pvs, vas, ours)
	want := []string{
		"namespace strandlab (Terminating)",
		"PersistentVolume pv-a (Released, claim strandlab/data-0-web-0)",
		"VolumeAttachment csi-a (PV pv-a on node node-1, attached=false)",
		"VolumeAttachment csi-gone (PV pv-gone on node node-1, attached=false)",
	}
	if strings.Join(left, "\n") != strings.Join(want, "\n") {
		t.Errorf("Leftovers =\n%s\nwant\n%s", strings.Join(left, "\n"), strings.Join(want, "\n"))
	}
	if !ours["pv-a"] || ours["pv-other"] {
		t.Errorf("ours = %v: want pv-a added, pv-other not", ours)
	}
	if left := Leftovers("strandlab", nil, nil, nil, map[string]bool{}); len(left) != 0 {
		t.Errorf("nothing left, got %v", left)
	}
	if got := ClaimedFrom("strandlab", pvs); strings.Join(got, ",") != "pv-a" {
		t.Errorf("ClaimedFrom = %v", got)
	}
}

func TestRunLabel(t *testing.T) {
	tests := map[string]string{
		"existing-control-stock":       "existing-control-stock",
		"a/b c":                        "a-b-c",
		"-x-":                          "x",
		strings.Repeat("a", 70):        strings.Repeat("a", 63),
		strings.Repeat("a", 62) + "-b": strings.Repeat("a", 62),
	}
	for in, want := range tests {
		if got := RunLabel(in); got != want {
			t.Errorf("RunLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
