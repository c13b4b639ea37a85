package kind

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Inotify instances a kind node holds once its kubelet runs (systemd and
// its units, the kubelet, containerd, the pods' processes), counted on a
// running cluster (docs/kind.md, "Many nodes"): 16 per worker, 29 on the
// control plane. Every node runs as root, so all of them count against
// root's fs.inotify.max_user_instances on the Docker host, whose default
// (128) holds a control plane and 6 workers.
const (
	inotifyPerWorker    = 16
	inotifyControlPlane = 32
)

// inotifyLimitFile is the per-user limit of inotify instances.
const inotifyLimitFile = "/proc/sys/fs/inotify/max_user_instances"

// checkInotify refuses, before anything starts, a cluster whose nodes
// would run out of inotify instances: a node that cannot get one never
// becomes Ready (its kubelet fails to watch its files: kind's known
// issue "Pod errors due to too many open files"), and the start only
// fails minutes later, waiting for Ready nodes.
func checkInotify(nodes int) error {
	b, err := os.ReadFile(inotifyLimitFile)
	if err != nil {
		return nil // not Linux, or not readable: nothing to say
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil
	}
	return inotifyShortfall(limit, inotifyInUse(), nodes)
}

// inotifyShortfall is checkInotify's rule: the nodes need their
// instances on top of what is in use.
func inotifyShortfall(limit, inUse, workers int) error {
	need := inUse + inotifyControlPlane + inotifyPerWorker*workers
	if need <= limit {
		return nil
	}
	return fmt.Errorf("a kind cluster of %d workers needs about %d inotify instances (%d per worker, %d for the control plane, %d in use now), "+
		"but fs.inotify.max_user_instances is %d: its nodes would never become Ready. "+
		"Raise it on the Docker host (sysctl -w fs.inotify.max_user_instances=%d), or run fewer nodes (docs/kind.md, \"Many nodes\")",
		workers, need, inotifyPerWorker, inotifyControlPlane, inUse, limit, roundUp(need*2))
}

// roundUp is n rounded up to a power of two (a limit people recognise).
func roundUp(n int) int {
	p := 128
	for p < n {
		p *= 2
	}
	return p
}

// inotifyInUse counts the inotify instances open on this machine (every
// process's file descriptors that are one); processes it cannot read
// count nothing.
func inotifyInUse() int {
	links, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	n := 0
	for _, l := range links {
		if t, err := os.Readlink(l); err == nil && t == "anon_inode:inotify" {
			n++
		}
	}
	return n
}
