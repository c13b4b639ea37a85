package cgroupstat

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/procfs"
)

const (
	uid  = "0f6b1e2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
	cid  = "4a1c0e9f0b8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e"
	dock = "/docker/9c1f0e5d4b3a29187766554433221100ffeeddccbbaa99887766554433221100"
)

func TestClassify(t *testing.T) {
	us := strings.ReplaceAll(uid, "-", "_")
	for path, want := range map[string]Role{
		"/":                                      {},
		"/system.slice/kubelet.service":          {Unit: "kubelet.service"},
		"/system.slice/containerd.service":       {Unit: "containerd.service"},
		"/system.slice/systemd-journald.service": {},
		"/kubelet.slice/kubelet.service":         {Unit: "kubelet.service"}, // kind's kubelet.service: Slice=kubelet.slice
		"/kubelet.service":                       {},                        // not in a slice
		"/system.slice/kubelet.service/x":        {},
		// cgroupfs driver
		"/kubepods":                                        {Pods: true},
		"/kubepods/burstable":                              {},
		"/kubepods/burstable/pod" + uid:                    {PodUID: uid},
		"/kubepods/pod" + uid:                              {PodUID: uid}, // Guaranteed: no QoS level
		"/kubepods/burstable/pod" + uid + "/" + cid:        {PodUID: uid, ContainerID: cid},
		"/kubepods/burstable/pod" + uid + "/" + cid + "/x": {},
		"/kubepods/burstable/pod" + uid + "/notanid":       {},
		// systemd driver, with kind's cgroupRoot /kubelet
		"/kubelet.slice/kubelet-kubepods.slice":                                                                                                                    {Pods: true},
		"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice":                                                                                  {},
		"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + us + ".slice":                                  {PodUID: uid},
		"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + us + ".slice/cri-containerd-" + cid + ".scope": {PodUID: uid, ContainerID: cid},
		"/kubepods.slice/kubepods-pod" + us + ".slice":                                                                                                             {PodUID: uid},
		"/kubepods/burstable/pod8f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99":                                                                                                  {PodUID: "8f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99"}, // a static pod
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod8f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99.slice":                                                    {PodUID: "8f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99"},
		// near misses
		"/kubepods/burstable/pod1234":         {},
		"/kubepods/burstable/apod" + uid:      {},
		"/kubepods/burstable/pod" + uid + "x": {},
	} {
		if got := Classify(path); got != want {
			t.Errorf("Classify(%q) = %+v, want %+v", path, got, want)
		}
	}
}

func TestLocate(t *testing.T) {
	v1Mounts := []*procfs.MountInfo{
		{MountPoint: "/sys/fs/cgroup", FSType: "tmpfs", Root: "/"},
		{MountPoint: "/sys/fs/cgroup/cpu", FSType: "cgroup", Root: "/", SuperOptions: map[string]string{"rw": "", "cpu": ""}},
		{MountPoint: "/sys/fs/cgroup/cpuacct", FSType: "cgroup", Root: "/", SuperOptions: map[string]string{"rw": "", "cpuacct": ""}},
		{MountPoint: "/sys/fs/cgroup/memory", FSType: "cgroup", Root: "/", SuperOptions: map[string]string{"rw": "", "memory": ""}},
	}
	v1Groups := []procfs.Cgroup{
		{HierarchyID: 4, Controllers: []string{"memory"}, Path: dock + "/init.scope"}, // the node's systemd moved its PID 1 there
		{HierarchyID: 2, Controllers: []string{"cpuacct"}, Path: dock},
		{HierarchyID: 1, Controllers: []string{"cpu"}, Path: dock},
		{HierarchyID: 0, Path: "/"},
	}
	tests := []struct {
		name    string
		groups  []procfs.Cgroup
		mounts  []*procfs.MountInfo
		want    Dirs
		wantErr bool
	}{
		{name: "cgroup v1, cpuacct and memory mounted apart (this kind of host)", groups: v1Groups, mounts: v1Mounts,
			want: Dirs{CPU: "/sys/fs/cgroup/cpuacct" + dock, Memory: "/sys/fs/cgroup/memory" + dock}},
		{name: "cgroup v1, cpu,cpuacct together and no memory hierarchy",
			groups: []procfs.Cgroup{{HierarchyID: 3, Controllers: []string{"cpu", "cpuacct"}, Path: "/system.slice/docker-1.scope"}},
			mounts: []*procfs.MountInfo{{MountPoint: "/sys/fs/cgroup/cpu,cpuacct", FSType: "cgroup", Root: "/", SuperOptions: map[string]string{"cpu": "", "cpuacct": ""}}},
			want:   Dirs{CPU: "/sys/fs/cgroup/cpu,cpuacct/system.slice/docker-1.scope"}},
		{name: "cgroup v1 mounted from a sub-tree (the reader is in a container)",
			groups: []procfs.Cgroup{{HierarchyID: 2, Controllers: []string{"cpuacct"}, Path: "/outer/docker/1"}},
			mounts: []*procfs.MountInfo{{MountPoint: "/sys/fs/cgroup/cpuacct", FSType: "cgroup", Root: "/outer", SuperOptions: map[string]string{"cpuacct": ""}}},
			want:   Dirs{CPU: "/sys/fs/cgroup/cpuacct/docker/1"}},
		{name: "cgroup v2",
			groups: []procfs.Cgroup{{HierarchyID: 0, Path: "/system.slice/docker-1.scope"}},
			mounts: []*procfs.MountInfo{{MountPoint: "/sys/fs/cgroup", FSType: "cgroup2", Root: "/"}},
			want:   Dirs{CPU: "/sys/fs/cgroup/system.slice/docker-1.scope", Memory: "/sys/fs/cgroup/system.slice/docker-1.scope", V2: true}},
		{name: "a sub-tree mount that does not hold the group",
			groups:  []procfs.Cgroup{{HierarchyID: 0, Path: "/elsewhere"}},
			mounts:  []*procfs.MountInfo{{MountPoint: "/sys/fs/cgroup", FSType: "cgroup2", Root: "/outer"}},
			wantErr: true},
		{name: "nothing mounted", groups: v1Groups, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Locate(tt.groups, tt.mounts)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Locate: err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Locate = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// tree writes files (path below root -> content) and returns root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		f := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestWalk(t *testing.T) {
	t.Run("v1", func(t *testing.T) {
		cpu := tree(t, map[string]string{
			"cpuacct.usage":                                 "5000000000\n",
			"system.slice/cpuacct.usage":                    "1600000000\n",
			"system.slice/kubelet.service/cpuacct.usage":    "1500000000\n",
			"kubepods/cpuacct.usage":                        "2000000000\n",
			"kubepods/pod" + uid + "/cpuacct.usage":         "250000000\n",
			"kubepods/pod" + uid + "/" + cid + "/other.txt": "a group removed while walked has no cpuacct.usage: left out",
		})
		mem := tree(t, map[string]string{
			"memory.max_usage_in_bytes":                              "1048576\n",
			"system.slice/kubelet.service/memory.max_usage_in_bytes": "2097152\n",
		})
		got, err := Walk(Dirs{CPU: cpu, Memory: mem})
		if err != nil {
			t.Fatal(err)
		}
		want := []Group{
			{Path: "/", CPUSeconds: 5, PeakMemoryBytes: 1 << 20},
			{Path: "/kubepods", CPUSeconds: 2},
			{Path: "/kubepods/pod" + uid, CPUSeconds: 0.25},
			{Path: "/system.slice", CPUSeconds: 1.6},
			{Path: "/system.slice/kubelet.service", CPUSeconds: 1.5, PeakMemoryBytes: 2 << 20},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Walk = %+v\nwant %+v", got, want)
		}
	})
	t.Run("v2", func(t *testing.T) {
		root := tree(t, map[string]string{
			"cpu.stat":                 "usage_usec 3000000\nuser_usec 2000000\nsystem_usec 1000000\n",
			"memory.peak":              "4096\n",
			"system.slice/cpu.stat":    "usage_usec 500000\n",
			"system.slice/memory.peak": "not a number",
		})
		got, err := Walk(Dirs{CPU: root, Memory: root, V2: true})
		if err != nil {
			t.Fatal(err)
		}
		want := []Group{{Path: "/", CPUSeconds: 3, PeakMemoryBytes: 4096}, {Path: "/system.slice", CPUSeconds: 0.5}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Walk = %+v\nwant %+v", got, want)
		}
	})
	t.Run("the root must be readable", func(t *testing.T) {
		if _, err := Walk(Dirs{CPU: filepath.Join(t.TempDir(), "gone")}); err == nil {
			t.Error("Walk of a missing root: no error")
		}
		if _, err := Walk(Dirs{CPU: t.TempDir()}); err == nil {
			t.Error("Walk of a root without cpuacct.usage: no error")
		}
	})
}

func TestProcs(t *testing.T) {
	dir := tree(t, map[string]string{"cgroup.procs": "31460\n30466\n", "bad/cgroup.procs": "12\nx\n"})
	if got, err := Procs(dir); err != nil || !reflect.DeepEqual(got, []int{31460, 30466}) {
		t.Errorf("Procs = %v, %v", got, err)
	}
	if _, err := Procs(filepath.Join(dir, "bad")); err == nil || !strings.Contains(err.Error(), `"x" is not a PID`) {
		t.Errorf("Procs of a bad file: %v", err)
	}
	if _, err := Procs(filepath.Join(dir, "gone")); err == nil {
		t.Error("Procs of a missing group: no error")
	}
}
