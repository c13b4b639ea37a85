package kind

import (
	"maps"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/strandlab/strandlab/internal/cgroupstat"
	"github.com/strandlab/strandlab/internal/usage"
	"github.com/strandlab/strandlab/internal/workload"
)

const (
	staticUID = "8f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99" // the static pod's, not its mirror's
	csiUID    = "11111111-2222-3333-4444-555555555555"
	appUID    = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	goneUID   = "99999999-8888-7777-6666-555555555555"
)

func cid(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

func TestPodsByUID(t *testing.T) {
	pods := podsByUID([]corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-cp", UID: "mirror-uid",
			Annotations: map[string]string{corev1.MirrorPodAnnotationKey: staticUID}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", ContainerID: "containerd://" + cid('1')}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "strandlab", Name: "web-0", UID: types.UID(appUID), Labels: map[string]string{workload.LabelStatefulSet: "web"}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}}}, // not started: no ID
	})
	if p, ok := pods[staticUID]; !ok || p.name != "kube-system/etcd-cp" || p.workload || p.containers[cid('1')] != "etcd" {
		t.Errorf("static pod by its own UID: %+v (found %v)", p, ok)
	}
	if _, ok := pods["mirror-uid"]; ok {
		t.Error("a mirror pod is indexed by its mirror UID, which names no cgroup")
	}
	if p := pods[appUID]; !p.workload || len(p.containers) != 0 {
		t.Errorf("workload pod: %+v", p)
	}
}

func TestAttribute(t *testing.T) {
	pods := map[string]podInfo{
		staticUID: {name: "kube-system/kube-apiserver-cp", containers: map[string]string{cid('1'): "kube-apiserver"}},
		csiUID:    {name: "kube-system/strandlab-csi-controller-x", containers: map[string]string{cid('2'): "csi-driver", cid('3'): "strandlab-apiproxy"}},
		appUID:    {name: "strandlab/web-0", workload: true, containers: map[string]string{cid('5'): "app"}},
	}
	const kp = "/kubelet.slice/kubelet-kubepods.slice"
	groups := []cgroupstat.Group{
		{Path: "/", CPUSeconds: 100},
		{Path: "/system.slice", CPUSeconds: 9},
		{Path: "/system.slice/containerd.service", CPUSeconds: 8, PeakMemoryBytes: 40 << 20},
		{Path: "/system.slice/systemd-journald.service", CPUSeconds: 1},
		// kind's kubelet.service is in kubelet.slice, beside the pods
		{Path: "/kubelet.slice", CPUSeconds: 80},
		{Path: "/kubelet.slice/kubelet.service", CPUSeconds: 20, PeakMemoryBytes: 80 << 20},
		{Path: kp, CPUSeconds: 60},
		{Path: kp + "/kubelet-kubepods-burstable.slice", CPUSeconds: 50},
		{Path: kp + "/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + staticUID + ".slice", CPUSeconds: 40},
		{Path: kp + "/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + staticUID + ".slice/cri-containerd-" + cid('1') + ".scope", CPUSeconds: 39.5, PeakMemoryBytes: 300 << 20},
		{Path: kp + "/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + staticUID + ".slice/cri-containerd-" + cid('9') + ".scope", CPUSeconds: 0.5}, // sandbox
		{Path: kp + "/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod11111111_2222_3333_4444_555555555555.slice", CPUSeconds: 6},
		{Path: kp + "/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod11111111_2222_3333_4444_555555555555.slice/cri-containerd-" + cid('2') + ".scope", CPUSeconds: 4},
		{Path: kp + "/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod11111111_2222_3333_4444_555555555555.slice/cri-containerd-" + cid('3') + ".scope", CPUSeconds: 1.5},
		{Path: kp + "/kubelet-kubepods-besteffort.slice", CPUSeconds: 10},
		// a live workload pod, and one the API no longer lists (deleted)
		{Path: kp + "/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-podaaaaaaaa_bbbb_cccc_dddd_eeeeeeeeeeee.slice", CPUSeconds: 3},
		{Path: kp + "/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-podaaaaaaaa_bbbb_cccc_dddd_eeeeeeeeeeee.slice/cri-containerd-" + cid('5') + ".scope", CPUSeconds: 2},
		{Path: kp + "/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod99999999_8888_7777_6666_555555555555.slice", CPUSeconds: 1},
	}
	got := attribute("cp", groups, pods, nil)
	cpu := map[string]float64{}
	for _, s := range got {
		if s.Cgroup == "" || s.Cgroup[:3] != "cp:" {
			t.Errorf("sample %q: cgroup id %q does not name its node", s.Name, s.Cgroup)
		}
		cpu[s.Component] += s.CPUSeconds
	}
	want := map[string]float64{
		"kubelet": 20, "containerd": 8,
		// strandlab's static pod's container counts as the program it runs
		"kube-apiserver": 39.5, "csi-driver": 4, "apiproxy": 1.5,
		componentSandbox:    0.5 + 0.5, // the apiserver's sandbox, the CSI pod's 6 - 5.5
		componentWorkload:   60 - 40 - 6,
		componentNodeSystem: 100 - 20 - 8 - 60,
	}
	if !maps.EqualFunc(cpu, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
		t.Errorf("CPU by component = %v\nwant %v", cpu, want)
	}
	total := 0.0
	for _, v := range cpu {
		total += v
	}
	if math.Abs(total-100) > 1e-9 {
		t.Errorf("the components add up to %v, want the node's 100", total)
	}
	mem := usage.Memory(got)
	if mem["kubelet"].SumMiB != 80 || mem["kube-apiserver"].SumMiB != 300 {
		t.Errorf("memory: %v", mem)
	}
	if _, ok := mem[componentWorkload]; ok {
		t.Errorf("memory of a derived figure: %v", mem[componentWorkload])
	}
}

// TestAttributeCumulative: the derived figures are differences of
// cumulative counters, so usage.CPU's before/after difference gives each
// component what it used in between, the churned pods' time included.
func TestAttributeCumulative(t *testing.T) {
	pods := map[string]podInfo{staticUID: {name: "kube-system/etcd-cp", containers: map[string]string{cid('1'): "etcd"}}}
	at := func(root, kubelet, podsRoot, etcd float64) []usage.Sample {
		return attribute("cp", []cgroupstat.Group{
			{Path: "/", CPUSeconds: root},
			{Path: "/kubelet.slice/kubelet.service", CPUSeconds: kubelet},
			{Path: "/kubepods", CPUSeconds: podsRoot},
			{Path: "/kubepods/burstable/pod" + staticUID, CPUSeconds: etcd},
			{Path: "/kubepods/burstable/pod" + staticUID + "/" + cid('1'), CPUSeconds: etcd},
		}, pods, nil)
	}
	// In between: kubelet +3, etcd +2, pods come and go for +4, the node +1.
	got := usage.CPU(at(50, 10, 30, 20), at(60, 13, 36, 22))
	want := map[string]float64{"kubelet": 3, "etcd": 2, componentWorkload: 4, componentNodeSystem: 1, componentSandbox: 0}
	if !maps.EqualFunc(got, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
		t.Errorf("usage.CPU = %v, want %v", got, want)
	}
}

// TestAttributeUnitsFromProcesses: on a host whose cpuacct hierarchy the
// node's systemd does not manage, the kubelet's and containerd's time is
// in the node's root group; their processes' samples are passed through
// and taken out of node-system.
func TestAttributeUnitsFromProcesses(t *testing.T) {
	units := []usage.Sample{
		{Name: "w/kubelet/10", Component: "kubelet", Cgroup: "w:/kubelet.slice/kubelet.service:process", PID: 10, StartTicks: 5, CPUSeconds: 12},
		{Name: "w/containerd/11", Component: "containerd", Cgroup: "w:/system.slice/containerd.service:process", PID: 11, StartTicks: 6, CPUSeconds: 5},
		{Name: "w/kubelet", Component: "kubelet", Cgroup: "w:/kubelet.slice/kubelet.service", PeakRSSBytes: 90 << 20},
	}
	got := attribute("w", []cgroupstat.Group{
		{Path: "/", CPUSeconds: 40},
		{Path: "/kubelet", CPUSeconds: 0},
		{Path: "/kubelet.slice", CPUSeconds: 10},
		{Path: "/kubelet.slice/kubelet-kubepods.slice", CPUSeconds: 10},
	}, nil, units)
	cpu := map[string]float64{}
	for _, s := range got {
		cpu[s.Component] += s.CPUSeconds
	}
	want := map[string]float64{"kubelet": 12, "containerd": 5, componentWorkload: 10, componentNodeSystem: 40 - 12 - 5 - 10}
	if !maps.EqualFunc(cpu, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
		t.Errorf("CPU by component = %v, want %v", cpu, want)
	}
	if m := usage.Memory(got)["kubelet"]; m.SumMiB != 90 || m.Processes != 1 {
		t.Errorf("kubelet memory %+v: want its unit's group peak alone", m)
	}
}
