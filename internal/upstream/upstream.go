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

// Ensure returns the binaries, building what is missing. Progress of the
// builds goes to progress. repoRoot is the strandlab checkout. It refuses,
// building nothing, under make unit (process.UnitOnlyEnv).
func Ensure(ctx context.Context, repoRoot string, progress io.Writer) (Binaries, error) {
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
	for _, p := range []string{b.Etcd, b.KubeAPIServer, b.KubeControllerManager, b.KubeScheduler, b.CSIAttacher, b.CSIProvisioner,
		b.KubeletSim, b.CSIDriver, b.PinExtender, b.APIProxy} {
		if err := executable(p); err != nil {
			return err
		}
	}
	return nil
}

func executable(path string) error {
	if st, err := os.Stat(path); err != nil || st.Mode()&0o111 == 0 {
		return fmt.Errorf("binary %s missing or not executable (run make binaries)", path)
	}
	return nil
}

// FromDir reads a directory written by tools/upstream/build.sh.
func FromDir(dir string) (Binaries, error) {
	b := Binaries{
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
	for _, p := range []string{b.Etcd, b.KubeAPIServer, b.KubeControllerManager, b.KubeScheduler, b.CSIAttacher, b.CSIProvisioner, b.KubeletSim} {
		if err := executable(p); err != nil {
			return Binaries{}, err
		}
	}
	f, err := os.Open(filepath.Join(dir, "versions.txt"))
	if err != nil {
		return Binaries{}, fmt.Errorf("read versions: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			b.Versions[k] = v
		}
	}
	return b, sc.Err()
}

// Components describes the binaries for the report. It asks each binary
// for its version, so the report shows what actually ran, not what was
// meant to be built.
func (b Binaries) Components(ctx context.Context) []provenance.Component {
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
		// The pods and the node are simulated; their volumes are mounted by
		// the kubelet's own code (docs/kubelet-sim.md).
		provenance.Component{Name: "kubelet-sim", Version: "simulated pods and node status; volume manager from k8s.io/kubernetes@" + b.Versions["kubelet-sim"],
			Provenance: "built from github.com/strandlab/strandlab/tools/upstream/kubelet-sim with k8s.io/kubernetes@" + b.Versions["kubelet-sim"] + " (pkg/kubelet/volumemanager, pkg/volume/csi)"},
		provenance.Component{Name: "csi-driver", Version: "strandlab hostpath", Provenance: "github.com/strandlab/strandlab/tools/csi-driver"},
		provenance.Component{Name: "pin-extender", Version: "strandlab", Provenance: "github.com/strandlab/strandlab/tools/pin-extender"},
		provenance.Component{Name: "apiproxy", Version: "strandlab", Provenance: "github.com/strandlab/strandlab/tools/apiproxy"})
	return out
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
