// Package upstream locates (and, when missing, builds) the real binaries a
// local cluster runs: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, csi-attacher and csi-provisioner from the modules pinned
// in tools/upstream, kubelet-sim (its own module there, built on upstream's
// volume manager), plus strandlab's own csi-driver, pin-extender and
// apiproxy. Builds are cached under _output/bin keyed by the pins.
package upstream

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/strandlab/strandlab/internal/process"
	"github.com/strandlab/strandlab/internal/provenance"
)

// Binaries are the executables of one local cluster and their versions.
type Binaries struct {
	Dir                   string
	Etcd                  string
	KubeAPIServer         string
	KubeControllerManager string
	KubeScheduler         string
	CSIAttacher           string
	CSIProvisioner        string
	KubeletSim            string
	CSIDriver             string
	PinExtender           string
	APIProxy              string
	// Versions maps binary name to the version it was built at.
	Versions map[string]string
}

// BinDirEnv names a directory of prebuilt upstream binaries (with
// versions.txt), skipping the build step.
const BinDirEnv = "STRANDLAB_BIN_DIR"

// PrebuiltEnv, set to "1", is the prebuilt mode of a machine without the go
// command (the strandlab image, docs/soak-job.md): BinDirEnv holds every
// binary a local cluster runs, strandlab's own included, and nothing is
// built. A missing binary is an error naming it; internal/kcmbuild then
// only finds controller builds, never builds one.
const PrebuiltEnv = "STRANDLAB_PREBUILT"

// Prebuilt reports whether the prebuilt mode is on, and its directory
// (BinDirEnv). Prebuilt mode without BinDirEnv is an error.
func Prebuilt() (dir string, ok bool, err error) {
	switch v := os.Getenv(PrebuiltEnv); v {
	case "", "0":
		return "", false, nil
	case "1":
	default:
		return "", true, fmt.Errorf("%s=%q: want 1 (prebuilt binaries, no go command) or unset", PrebuiltEnv, v)
	}
	if dir = os.Getenv(BinDirEnv); dir == "" {
		return "", true, fmt.Errorf("%s=1: %s is not set: it names the directory of the prebuilt binaries", PrebuiltEnv, BinDirEnv)
	}
	return dir, true, nil
}

// CheckPrebuilt says whether the prebuilt mode is on and, when it is,
// whether every binary is there (the error names the first one missing).
// A provider's Available calls it: in prebuilt mode the go command is not
// needed.
func CheckPrebuilt() (bool, error) {
	_, ok, err := prebuiltBinaries()
	return ok, err
}

// prebuiltBinaries returns the binaries of the prebuilt mode's directory,
// all of them checked.
func prebuiltBinaries() (Binaries, bool, error) {
	dir, ok, err := Prebuilt()
	if !ok || err != nil {
		return Binaries{}, ok, err
	}
	for _, p := range layout(dir).paths() {
		if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
			return Binaries{}, true, fmt.Errorf("%s=1: %s is missing or not executable: %s=%s must hold every binary of a local cluster (nothing is built in prebuilt mode)",
				PrebuiltEnv, filepath.Base(p), BinDirEnv, dir)
		}
	}
	b, err := FromDir(dir)
	return b, true, err
}

// Ensure returns the binaries, building what is missing. Progress of the
// builds goes to progress. repoRoot is the strandlab checkout. It refuses,
// building nothing, under make unit (process.UnitOnlyEnv). In prebuilt mode
// (PrebuiltEnv) it builds nothing and runs no go command: it returns the
// binaries of BinDirEnv, or names the one that is missing.
func Ensure(ctx context.Context, repoRoot string, progress io.Writer) (Binaries, error) {
	if b, ok, err := prebuiltBinaries(); ok || err != nil {
		return b, err
	}
	if err := process.CheckUnitOnly("building the cluster binaries (upstream.Ensure)"); err != nil {
		return Binaries{}, err
	}
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot, "tools/upstream/build.sh"), filepath.Join(repoRoot, "_output/bin"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, progress
		if err := cmd.Run(); err != nil {
			return Binaries{}, fmt.Errorf("build upstream binaries (tools/upstream/build.sh): %w", err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		dir = lines[len(lines)-1]
	}
	b, err := FromDir(dir)
	if err != nil {
		return Binaries{}, err
	}
	// Our own binaries are part of this module; go build is quick when current.
	for _, own := range []struct{ path, pkg string }{{b.CSIDriver, "./tools/csi-driver"}, {b.PinExtender, "./tools/pin-extender"}, {b.APIProxy, "./tools/apiproxy"}} {
		build := exec.CommandContext(ctx, "go", "build", "-o", own.path, own.pkg)
		build.Dir, build.Stdout, build.Stderr = repoRoot, progress, progress
		if err := build.Run(); err != nil {
			return Binaries{}, fmt.Errorf("build %s: %w", own.pkg, err)
		}
	}
	return b, nil
}

// Check reports the first binary that is missing or not executable.
func (b Binaries) Check() error {
	for _, p := range b.paths() {
		if err := executable(p); err != nil {
			return err
		}
	}
	return nil
}

// paths are every binary of a local cluster.
func (b Binaries) paths() []string {
	return []string{b.Etcd, b.KubeAPIServer, b.KubeControllerManager, b.KubeScheduler, b.CSIAttacher, b.CSIProvisioner,
		b.KubeletSim, b.CSIDriver, b.PinExtender, b.APIProxy}
}

func executable(path string) error {
	if st, err := os.Stat(path); err != nil || st.Mode()&0o111 == 0 {
		return fmt.Errorf("binary %s missing or not executable (run make binaries)", path)
	}
	return nil
}

// FromDir reads a directory written by tools/upstream/build.sh.
func FromDir(dir string) (Binaries, error) {
	b := layout(dir)
	for _, p := range []string{b.Etcd, b.KubeAPIServer, b.KubeControllerManager, b.KubeScheduler, b.CSIAttacher, b.CSIProvisioner, b.KubeletSim} {
		if err := executable(p); err != nil {
			return Binaries{}, err
		}
	}
	versions, err := ReadVersions(dir)
	if err != nil {
		return Binaries{}, err
	}
	b.Versions = versions
	return b, nil
}

// ReadVersions reads dir/versions.txt (name=version per line, as
// tools/upstream/build.sh writes it).
func ReadVersions(dir string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(dir, "versions.txt"))
	if err != nil {
		return nil, fmt.Errorf("read versions: %w", err)
	}
	defer f.Close()
	versions := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			versions[k] = v
		}
	}
	return versions, sc.Err()
}

// layout is where the binaries of dir are, none of them checked.
func layout(dir string) Binaries {
	return Binaries{
		Dir:                   dir,
		Etcd:                  filepath.Join(dir, "etcd"),
		KubeAPIServer:         filepath.Join(dir, "kube-apiserver"),
		KubeControllerManager: filepath.Join(dir, "kube-controller-manager"),
		KubeScheduler:         filepath.Join(dir, "kube-scheduler"),
		CSIAttacher:           filepath.Join(dir, "csi-attacher"),
		CSIProvisioner:        filepath.Join(dir, "csi-provisioner"),
		KubeletSim:            filepath.Join(dir, "kubelet-sim"),
		CSIDriver:             filepath.Join(dir, "csi-driver"),
		PinExtender:           filepath.Join(dir, "pin-extender"),
		APIProxy:              filepath.Join(dir, "apiproxy"),
		Versions:              map[string]string{},
	}
}

// Components describes the binaries for the report. It asks each binary
// for its version, so the report shows what actually ran, not what was
// meant to be built.
func (b Binaries) Components(ctx context.Context, runtimeTimings string) []provenance.Component {
	module := map[string]string{
		"etcd":                    "go.etcd.io/etcd/server/v3@" + b.Versions["etcd"],
		"kube-apiserver":          "k8s.io/kubernetes/cmd/kube-apiserver@" + b.Versions["kube-apiserver"],
		"kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager@" + b.Versions["kube-controller-manager"],
		"kube-scheduler":          "k8s.io/kubernetes/cmd/kube-scheduler@" + b.Versions["kube-scheduler"],
		"csi-attacher":            "github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher@" + b.Versions["csi-attacher"],
		"csi-provisioner":         "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner@" + b.Versions["csi-provisioner"],
	}
	var out []provenance.Component
	for _, c := range []struct{ name, path string }{
		{"etcd", b.Etcd}, {"kube-apiserver", b.KubeAPIServer},
		{"kube-controller-manager", b.KubeControllerManager}, {"kube-scheduler", b.KubeScheduler},
		{"csi-attacher", b.CSIAttacher}, {"csi-provisioner", b.CSIProvisioner},
	} {
		out = append(out, provenance.Component{Name: c.name, Version: reportedVersion(ctx, c.path), Provenance: "built from " + module[c.name]})
	}
	out = append(out,
		// The pods, the node and the container runtime are simulated; their
		// volumes are mounted and their statuses written by the kubelet's
		// own code; the runtime's
		// timings are drawn from what was measured on kind
		// (docs/kubelet-sim.md).
		provenance.Component{Name: "kubelet-sim", Version: "simulated pods, node status and container runtime (runtime timings drawn from " +
			kubeletSimRuntimeSource(ctx, b.KubeletSim, runtimeTimings) + "); volume manager and pod status manager from k8s.io/kubernetes@" + b.Versions["kubelet-sim"],
			Provenance: "built from github.com/strandlab/strandlab/tools/upstream/kubelet-sim with k8s.io/kubernetes@" + b.Versions["kubelet-sim"] + " (pkg/kubelet/volumemanager, pkg/kubelet/status, pkg/volume/csi)"},
		provenance.Component{Name: "csi-driver", Version: "strandlab hostpath", Provenance: "github.com/strandlab/strandlab/tools/csi-driver"},
		provenance.Component{Name: "pin-extender", Version: "strandlab", Provenance: "github.com/strandlab/strandlab/tools/pin-extender"},
		provenance.Component{Name: "apiproxy", Version: "strandlab", Provenance: "github.com/strandlab/strandlab/tools/apiproxy"})
	return out
}

// kubeletSimRuntimeSource is where the runtime timings kubelet-sim draws
// from were measured (`kubelet-sim --runtime-source`): the built-in ones,
// or those of the file runtimeTimings when it is not empty.
func kubeletSimRuntimeSource(ctx context.Context, path, runtimeTimings string) string {
	args := []string{"--runtime-source"}
	if runtimeTimings != "" {
		args = append(args, "--runtime-timings="+runtimeTimings)
	}
	out, err := exec.CommandContext(ctx, path, args...).Output()
	if err != nil {
		return "unknown: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}

// reportedVersion runs `binary --version` and returns the version token:
// "Kubernetes v1.37.2" -> v1.37.2, "etcd Version: 3.7.0" -> 3.7.0,
// "csi-attacher v4.13.0" -> v4.13.0.
func reportedVersion(ctx context.Context, path string) string {
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	first := strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	f := strings.Fields(first)
	if len(f) == 0 {
		return "unknown"
	}
	return f[len(f)-1]
}

// RepoRoot finds the strandlab checkout containing dir.
func RepoRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(data), []byte("module github.com/strandlab/strandlab\n")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no strandlab checkout above %s", dir)
		}
	}
}
