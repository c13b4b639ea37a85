// Package cgroupstat reads control groups' own accounting — CPU time and
// peak memory — from the cgroup filesystem, v1 or v2: how the kind provider
// measures what its nodes' services (kubelet, containerd) and containers
// (the static pods, the CSI driver, the workload) cost, where no process of
// theirs is a child of the harness (docs/performance.md). Finding a
// process's cgroup and walking a tree of them are I/O; what a cgroup path
// inside a kubelet's node stands for is Classify's, pure.
package cgroupstat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// Dirs is where one control group's accounting is, as this process sees
// the cgroup filesystem.
type Dirs struct {
	// CPU holds cpuacct.usage (v1) or cpu.stat (v2).
	CPU string
	// Memory holds memory.max_usage_in_bytes (v1) or memory.peak (v2);
	// "" when no memory hierarchy is mounted.
	Memory string
	// V2 is the unified hierarchy.
	V2 bool
}

// Of is the control group of process pid (a kind node container's init,
// from docker inspect), read from /proc/<pid>/cgroup and this process's
// mounts.
func Of(pid int) (Dirs, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return Dirs{}, fmt.Errorf("cgroup of process %d: %w", pid, err)
	}
	groups, err := p.Cgroups()
	if err != nil {
		return Dirs{}, fmt.Errorf("cgroup of process %d: %w", pid, err)
	}
	mounts, err := procfs.GetMounts()
	if err != nil {
		return Dirs{}, fmt.Errorf("cgroup of process %d: this process's mounts: %w", pid, err)
	}
	d, err := Locate(groups, mounts)
	if err != nil {
		return Dirs{}, fmt.Errorf("cgroup of process %d: %w", pid, err)
	}
	return d, nil
}

// Locate finds the directories of a process's control group from its
// /proc/<pid>/cgroup lines and the reader's mounts: the v1 cpuacct (and
// memory) hierarchies when cpuacct is mounted as v1, else the unified
// hierarchy. A hierarchy mounted from a sub-tree (the mount's root is not
// "/": the reader is itself in a container) is resolved against it.
func Locate(groups []procfs.Cgroup, mounts []*procfs.MountInfo) (Dirs, error) {
	v1 := func(controller string) (string, bool) {
		for _, g := range groups {
			if g.HierarchyID == 0 || !slices.Contains(g.Controllers, controller) {
				continue
			}
			for _, m := range mounts {
				if m.FSType == "cgroup" && hasOption(m.SuperOptions, controller) {
					if dir, ok := below(m, g.Path); ok {
						return dir, true
					}
				}
			}
		}
		return "", false
	}
	if cpu, ok := v1("cpuacct"); ok {
		mem, _ := v1("memory")
		return Dirs{CPU: cpu, Memory: mem}, nil
	}
	for _, g := range groups {
		if g.HierarchyID != 0 {
			continue
		}
		for _, m := range mounts {
			if m.FSType == "cgroup2" {
				if dir, ok := below(m, g.Path); ok {
					return Dirs{CPU: dir, Memory: dir, V2: true}, nil
				}
			}
		}
	}
	return Dirs{}, errors.New("no cgroup v1 cpuacct hierarchy and no cgroup2 filesystem mounted here holds it")
}

func hasOption(opts map[string]string, name string) bool {
	_, ok := opts[name]
	return ok
}

// below is the directory of cgroup path p within mount m, if m's root
// holds it. A node container's systemd moves itself (the container's main
// process) into init.scope in the hierarchies it manages: the container's
// group is that scope's parent.
func below(m *procfs.MountInfo, p string) (string, bool) {
	root := path.Clean(m.Root)
	p = strings.TrimSuffix(path.Clean(p), "/init.scope")
	if root != "/" {
		if p != root && !strings.HasPrefix(p, root+"/") {
			return "", false
		}
		p = strings.TrimPrefix(p, root)
	}
	return filepath.Join(m.MountPoint, filepath.FromSlash(p)), true
}

// Group is one control group's accounting.
type Group struct {
	// Path is the group's path below the walked root, "/"-separated and
	// starting with "/"; "/" is the root itself.
	Path string
	// CPUSeconds is the CPU time its tasks and its descendants' have used
	// since it was created (the kernel charges a task's time to every
	// ancestor, so a parent keeps what its removed children used).
	CPUSeconds float64
	// PeakMemoryBytes is its peak memory usage, 0 when not kept.
	PeakMemoryBytes uint64
}

// Walk reads the root group and every group below it. A group removed
// while it is walked is left out.
func Walk(root Dirs) ([]Group, error) {
	var out []Group
	err := filepath.WalkDir(root.CPU, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != root.CPU {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root.CPU, p)
		if err != nil {
			return err
		}
		g := Group{Path: path.Clean("/" + filepath.ToSlash(rel))}
		cpu, err := readCPU(p, root.V2)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != root.CPU {
				return fs.SkipDir
			}
			return fmt.Errorf("cgroup %s: %w", g.Path, err)
		}
		g.CPUSeconds = cpu
		if root.Memory != "" {
			g.PeakMemoryBytes = readPeakMemory(filepath.Join(root.Memory, filepath.FromSlash(g.Path)), root.V2)
		}
		out = append(out, g)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func readCPU(dir string, v2 bool) (float64, error) {
	if !v2 {
		ns, err := readUint(filepath.Join(dir, "cpuacct.usage"))
		return float64(ns) / 1e9, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "usage_usec "); ok {
			us, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return float64(us) / 1e6, err
		}
	}
	return 0, fmt.Errorf("%s: no usage_usec", filepath.Join(dir, "cpu.stat"))
}

// Procs are the processes in the group at dir (its cgroup.procs), in any
// hierarchy: on a cgroup v1 host whose cpuacct hierarchy is mounted apart
// from cpu, a node's systemd makes its units' groups only in the
// hierarchies it manages (memory, cpu), so the kubelet's and containerd's
// CPU is read from their processes instead (docs/performance.md).
func Procs(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a PID", filepath.Join(dir, "cgroup.procs"), f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// PeakMemory is the peak memory usage of the group at dir (see
// readPeakMemory).
func PeakMemory(dir string, v2 bool) uint64 { return readPeakMemory(dir, v2) }

// readPeakMemory is 0 when the kernel keeps no peak (cgroup v2 before
// Linux 5.19 has no memory.peak) or the group is gone.
func readPeakMemory(dir string, v2 bool) uint64 {
	name := "memory.max_usage_in_bytes"
	if v2 {
		name = "memory.peak"
	}
	v, err := readUint(filepath.Join(dir, name))
	if err != nil {
		return 0
	}
	return v
}

func readUint(file string) (uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// Role is what a control group inside a kubelet's node stands for.
type Role struct {
	// Unit is the systemd unit the group is, "kubelet.service" or
	// "containerd.service" (the latter with its shims, which stay in
	// containerd's group); "" otherwise.
	Unit string
	// Pods marks the kubelet's root of all pods ("kubepods", or
	// "kubepods.slice" and its prefixed variants with a cgroupRoot).
	Pods bool
	// PodUID is the pod's UID (the static pod's own for a static pod, not
	// its mirror's) at pod level and below.
	PodUID string
	// ContainerID is the CRI container's ID (a container or a pod's
	// sandbox) at container level.
	ContainerID string
}

// Classify says what the group at path p (below the node's root, as
// Walk gives it) is, for both of the kubelet's cgroup drivers:
//
//	cgroupfs: /kubepods/burstable/pod<uid>/<id>
//	systemd:  /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/cri-containerd-<id>.scope
//
// (the layout the kubelet's cgroup manager and containerd's runc shim
// write: k8s.io/kubernetes pkg/kubelet/cm, cgroup_manager_linux.go). A
// QoS class's group, or one of no interest, is the zero Role.
func Classify(p string) Role {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i, part := range parts {
		if part == "kubepods" || strings.HasSuffix(part, "kubepods.slice") {
			return classifyPods(parts[i+1:])
		}
	}
	// kind puts kubelet.service in kubelet.slice (beside the pods), and
	// containerd.service in system.slice.
	if len(parts) == 2 && strings.HasSuffix(parts[0], ".slice") && (parts[1] == "kubelet.service" || parts[1] == "containerd.service") {
		return Role{Unit: parts[1]}
	}
	return Role{}
}

// classifyPods classifies the path below the pods' root.
func classifyPods(rest []string) Role {
	if len(rest) == 0 {
		return Role{Pods: true}
	}
	for i, part := range rest {
		uid, ok := podUID(part)
		if !ok {
			continue
		}
		switch len(rest) - i {
		case 1:
			return Role{PodUID: uid}
		case 2:
			if id, ok := containerID(rest[i+1]); ok {
				return Role{PodUID: uid, ContainerID: id}
			}
		}
		return Role{}
	}
	return Role{}
}

// podUID reads "pod<uid>" or "<prefix>-pod<uid_with_underscores>.slice".
// A static pod's UID is the kubelet's hash of its manifest, 32 hex digits
// without dashes (k8s.io/kubernetes pkg/kubelet/config, applyDefaults).
func podUID(part string) (string, bool) {
	part = strings.TrimSuffix(part, ".slice")
	i := strings.LastIndex(part, "pod")
	if i < 0 || i > 0 && part[i-1] != '-' {
		return "", false
	}
	uid := strings.ReplaceAll(part[i+len("pod"):], "_", "-")
	switch {
	case len(uid) == 36 && strings.Count(uid, "-") == 4 && strings.Trim(uid, "0123456789abcdef-") == "":
	case len(uid) == 32 && strings.Trim(uid, "0123456789abcdef") == "":
	default:
		return "", false
	}
	return uid, true
}

// containerID reads "<id>" or "cri-containerd-<id>.scope" (64 hex digits).
func containerID(part string) (string, bool) {
	if s, ok := strings.CutSuffix(part, ".scope"); ok {
		i := strings.LastIndex(s, "-")
		part = s[i+1:]
	}
	if len(part) != 64 || strings.Trim(part, "0123456789abcdef") != "" {
		return "", false
	}
	return part, true
}
