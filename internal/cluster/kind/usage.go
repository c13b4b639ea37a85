package kind

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/cgroupstat"
	"github.com/strandlab/strandlab/internal/procstat"
	"github.com/strandlab/strandlab/internal/usage"
	"github.com/strandlab/strandlab/internal/workload"
)

// Components of a kind node that are not containers of a pod the API
// lists (docs/performance.md, "What a cycle costs on kind").
const (
	// componentWorkload: the churned StatefulSets' pods, the ones gone
	// included (their groups are removed, their time stays in the pods'
	// root).
	componentWorkload = "workload"
	// componentSandbox: the pod sandboxes (pause) of the pods that are not
	// the workload's, and the time of their containers that exited (a
	// restarted container's earlier instance: its group is gone, its
	// time stays in its pod's).
	componentSandbox = "pod-sandbox"
	// componentNodeSystem: what else the node container runs (systemd,
	// journald, ...): the node's total less kubelet, containerd and pods.
	componentNodeSystem = "node-system"
)

// usageSampler reads the node containers' control groups on this machine.
type usageSampler struct {
	mu    sync.Mutex
	nodes map[string]cgroupstat.Dirs // node container name -> its cgroup
	admin kubernetes.Interface
}

// SampleUsage reads what each component has used so far from the node
// containers' control groups on this machine (the Docker daemon's host):
// every node's kubelet.service and containerd.service (with the
// containers' shims), each container of the pods that are not the
// workload's (the static pods, strandlab's CSI driver and sidecars,
// apiproxy, pin-extender) by its container name, the workload's pods, the
// pod sandboxes, and the rest of the node. It fails when the nodes' groups
// are not on this machine (a remote Docker host).
func (c *Cluster) SampleUsage(ctx context.Context) ([]usage.Sample, error) {
	s := &c.usage
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admin == nil {
		admin, err := kubernetes.NewForConfig(c.restConfig)
		if err != nil {
			return nil, fmt.Errorf("sample the kind nodes' usage: %w", err)
		}
		s.admin = admin
	}
	if s.nodes == nil {
		nodes, err := c.kind.ListNodes(c.name)
		if err != nil {
			return nil, fmt.Errorf("sample the kind nodes' usage: list the nodes of %s: %w", c.name, err)
		}
		s.nodes = map[string]cgroupstat.Dirs{}
		for _, n := range nodes {
			dirs, err := nodeCgroup(ctx, n.String())
			if err != nil {
				s.nodes = nil
				return nil, fmt.Errorf("sample the kind nodes' usage: %w", err)
			}
			s.nodes[n.String()] = dirs
		}
	}
	list, err := s.admin.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("sample the kind nodes' usage: list pods: %w", err)
	}
	pods := podsByUID(list.Items)
	names := make([]string, 0, len(s.nodes))
	for n := range s.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []usage.Sample
	for _, node := range names {
		dirs := s.nodes[node]
		groups, err := cgroupstat.Walk(dirs)
		if err != nil {
			return nil, fmt.Errorf("sample the kind nodes' usage: node %s: %w", node, err)
		}
		var units []usage.Sample
		if !hasUnits(groups) {
			units = unitProcesses(node, dirs)
		}
		out = append(out, attribute(node, groups, pods, units)...)
	}
	return out, nil
}

// nodeUnits are the node's services measured by component, as the
// kubelet's cgroup paths inside a kind node name them.
var nodeUnits = []string{"/kubelet.slice/kubelet.service", "/system.slice/containerd.service"}

// hasUnits: the CPU hierarchy has the node's units' groups (cgroup v2, or
// v1 with cpu and cpuacct mounted together, which the node's systemd
// manages).
func hasUnits(groups []cgroupstat.Group) bool {
	for _, g := range groups {
		if cgroupstat.Classify(g.Path).Unit != "" {
			return true
		}
	}
	return false
}

// unitProcesses reads the kubelet's and containerd's CPU from their
// processes (their own and their reaped children's time), found in the
// memory hierarchy, where the node's systemd does make their groups: on a
// cgroup v1 host whose cpuacct hierarchy is mounted apart from cpu, systemd
// does not manage cpuacct and every service's time is in the node's root
// group. A process that exits takes its time with it: containerd's shims
// are not its children, and an exited shim's time shows in node-system
// (docs/performance.md). Besides one sample per process (a process is a
// PID and start time, as on local), one per unit carries its group's
// memory peak.
func unitProcesses(node string, dirs cgroupstat.Dirs) []usage.Sample {
	if dirs.Memory == "" || dirs.V2 {
		return nil
	}
	var out []usage.Sample
	for _, unit := range nodeUnits {
		component := strings.TrimSuffix(unit[strings.LastIndex(unit, "/")+1:], ".service")
		dir := filepath.Join(dirs.Memory, filepath.FromSlash(unit))
		pids, err := cgroupstat.Procs(dir)
		if err != nil {
			klog.V(2).InfoS("Unit not sampled", "node", node, "unit", unit, "err", err)
			continue
		}
		for _, pid := range pids {
			p, err := procstat.ReadWithReaped(component, pid)
			if err != nil {
				continue // exited since it was listed
			}
			p.Name, p.Component, p.Cgroup = node+"/"+component+"/"+strconv.Itoa(pid), component, node+":"+unit+":process"
			p.PeakRSSBytes = 0 // the unit's group peak below says it
			out = append(out, p)
		}
		if peak := cgroupstat.PeakMemory(dir, false); peak > 0 {
			out = append(out, usage.Sample{Name: node + "/" + component, Component: component, Cgroup: node + ":" + unit, PeakRSSBytes: peak})
		}
	}
	return out
}

// nodeCgroup finds the control group of a node container from its main
// process, and checks that it is the container's (its path names the
// container's ID): a Docker daemon on another host has PIDs that mean
// nothing here.
func nodeCgroup(ctx context.Context, container string) (cgroupstat.Dirs, error) {
	// os/exec, not gexe: the template has a space, and gexe splits on it.
	out, err := exec.CommandContext(ctx, "docker", "inspect", "--format", "{{.State.Pid}} {{.Id}}", container).Output()
	if err != nil {
		return cgroupstat.Dirs{}, fmt.Errorf("docker inspect %s: %w", container, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return cgroupstat.Dirs{}, fmt.Errorf("docker inspect %s: %q, want its PID and ID", container, out)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return cgroupstat.Dirs{}, fmt.Errorf("docker inspect %s: PID %q: not running", container, f[0])
	}
	dirs, err := cgroupstat.Of(pid)
	if err != nil {
		return cgroupstat.Dirs{}, fmt.Errorf("node %s: %w", container, err)
	}
	if !strings.Contains(dirs.CPU, f[1]) {
		return cgroupstat.Dirs{}, fmt.Errorf("node %s: process %d's cgroup %s does not name the container %s: the Docker daemon is not on this machine", container, pid, dirs.CPU, f[1])
	}
	return dirs, nil
}

// componentOfContainer is the component a container's time counts for:
// its name, but strandlab's static pods' containers (strandlab-apiproxy,
// strandlab-pin-extender: named so on the control-plane node beside
// kubeadm's) count as the program they run, as on local.
func componentOfContainer(name string) string {
	return strings.TrimPrefix(name, "strandlab-")
}

// podInfo is what attribute needs of a pod the API lists.
type podInfo struct {
	name       string // namespace/name
	workload   bool
	containers map[string]string // CRI container ID -> container name
}

// podsByUID indexes pods by the UID their cgroups carry: a mirror pod's
// static pod by the UID in its kubernetes.io/config.mirror annotation (the
// static pod's own, which names its cgroup), every other pod by its own.
func podsByUID(pods []corev1.Pod) map[string]podInfo {
	out := map[string]podInfo{}
	for _, p := range pods {
		info := podInfo{name: p.Namespace + "/" + p.Name, containers: map[string]string{}}
		_, info.workload = p.Labels[workload.LabelStatefulSet]
		for _, st := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if _, id, ok := strings.Cut(st.ContainerID, "://"); ok {
				info.containers[id] = st.Name
			}
		}
		uid := string(p.UID)
		if mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror != "" {
			uid = mirror
		}
		out[uid] = info
	}
	return out
}

// attribute turns one node's control groups into usage samples, by
// component (see SampleUsage). Pure: the groups and pods are read by the
// caller. The workload's figure and the other derived ones are
// differences of cumulative counters, so they stay cumulative and
// usage.CPU's before/after difference holds for them too.
//
// units are the kubelet's and containerd's samples when the CPU hierarchy
// has no groups of theirs (unitProcesses): they are passed through, and
// their time is taken out of node-system.
func attribute(node string, groups []cgroupstat.Group, pods map[string]podInfo, units []usage.Sample) []usage.Sample {
	var (
		out                       []usage.Sample
		root, kubelet, containerd float64
		podsRoot                  float64
		podTotal                  = map[string]float64{} // non-workload pods
		containerSum              = map[string]float64{}
		haveRoot, havePods        bool
	)
	id := func(what string) string { return node + ":" + what }
	for _, u := range units {
		if u.Component == "kubelet" {
			kubelet += u.CPUSeconds
		} else {
			containerd += u.CPUSeconds
		}
	}
	out = append(out, units...)
	for _, g := range groups {
		if g.Path == "/" {
			root, haveRoot = g.CPUSeconds, true
			continue
		}
		role := cgroupstat.Classify(g.Path)
		switch {
		case role.Unit != "":
			component := strings.TrimSuffix(role.Unit, ".service")
			if component == "kubelet" {
				kubelet = g.CPUSeconds
			} else {
				containerd = g.CPUSeconds
			}
			out = append(out, usage.Sample{Name: node + "/" + role.Unit, Component: component, Cgroup: id(g.Path),
				CPUSeconds: g.CPUSeconds, PeakRSSBytes: g.PeakMemoryBytes})
		case role.Pods:
			podsRoot, havePods = g.CPUSeconds, true
		case role.PodUID != "" && role.ContainerID == "":
			if p, ok := pods[role.PodUID]; ok && !p.workload {
				podTotal[role.PodUID] = g.CPUSeconds
			}
		case role.ContainerID != "":
			p, ok := pods[role.PodUID]
			if !ok || p.workload {
				continue
			}
			name, ok := p.containers[role.ContainerID]
			if !ok {
				continue // the pod's sandbox, or a container gone: in componentSandbox
			}
			containerSum[role.PodUID] += g.CPUSeconds
			out = append(out, usage.Sample{Name: node + "/" + p.name + "/" + name, Component: componentOfContainer(name), Cgroup: id(g.Path),
				CPUSeconds: g.CPUSeconds, PeakRSSBytes: g.PeakMemoryBytes})
		}
	}
	known := 0.0
	uids := make([]string, 0, len(podTotal))
	for uid := range podTotal {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	for _, uid := range uids {
		known += podTotal[uid]
		out = append(out, usage.Sample{Name: node + "/" + pods[uid].name + "/sandbox", Component: componentSandbox, Cgroup: id(uid + "/sandbox"),
			CPUSeconds: max(podTotal[uid]-containerSum[uid], 0)})
	}
	if havePods {
		out = append(out, usage.Sample{Name: node + "/workload", Component: componentWorkload, Cgroup: id("workload"),
			CPUSeconds: max(podsRoot-known, 0)})
	}
	if haveRoot {
		out = append(out, usage.Sample{Name: node + "/node-system", Component: componentNodeSystem, Cgroup: id("node-system"),
			CPUSeconds: max(root-kubelet-containerd-podsRoot, 0)})
	}
	return out
}
