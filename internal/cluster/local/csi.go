package local

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"

	"github.com/strandlab/strandlab/internal/cluster/apply"
	"github.com/strandlab/strandlab/internal/csidriver"
	"github.com/strandlab/strandlab/internal/process"
	"github.com/strandlab/strandlab/manifests"
)

// csiLayout is where one cluster's CSI sockets and state live.
type csiLayout struct {
	dir            string // <state>/csi
	stateDir       string // shared by the controller and node instances
	controllerSock string
}

func newCSILayout(clusterDir string) csiLayout {
	dir := filepath.Join(clusterDir, "csi")
	return csiLayout{dir: dir, stateDir: filepath.Join(dir, "state"), controllerSock: filepath.Join(dir, "controller.sock")}
}

// nodeSocket is the node plugin socket of one node, its kubelet-sim's
// --csi-endpoint.
func (l csiLayout) nodeSocket(node string) string { return filepath.Join(l.dir, node+".sock") }

// kubeletRootDir is the --root-dir of one node's kubelet-sim: the kubelet's
// pods/ and plugins/ directories, whose paths the CSI driver is given.
func (l csiLayout) kubeletRootDir(node string) string { return filepath.Join(l.dir, "kubelet", node) }

// applyObjects creates the RBAC of the CSI sidecars and the pinning
// extender, and the CSIDriver and StorageClass under the driver name the
// scenario chose.
func applyObjects(ctx context.Context, client kubernetes.Interface, name string) error {
	driver := bytes.ReplaceAll(manifests.CSIDriver, []byte(manifests.CSIDriverName), []byte(name))
	if err := apply.Create(ctx, client, manifests.CSIRBAC, driver, manifests.ExtenderRBAC); err != nil {
		return fmt.Errorf("apply manifests: %w", err)
	}
	return nil
}

// socketReady is a readiness check: the driver listens once its socket exists.
func socketReady(path string) func(context.Context) error {
	return func(context.Context) error {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		if st.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("%s is not a socket", path)
		}
		return nil
	}
}

// startObjects records the API server's version and creates the
// cluster-wide objects: the sidecars' and extender's RBAC, the CSIDriver and
// the StorageClass. It starts nothing.
func (st *starting) startObjects(ctx context.Context) ([]readiness, error) {
	v, err := st.admin.Discovery().ServerVersion()
	if err != nil {
		return nil, err
	}
	st.c.version = v.GitVersion
	return nil, applyObjects(ctx, st.admin, st.driver)
}

// startCSI starts the driver's controller instance, one node instance per
// node, and the real csi-attacher and csi-provisioner sidecars. It returns
// the readiness checks of everything it started.
func (st *starting) startCSI(context.Context) ([]readiness, error) {
	c, l, driver, cfg, logDir := st.c, st.csi, st.driver, st.cfg, st.c.logDir
	b := st.bins
	if err := os.MkdirAll(l.stateDir, 0o755); err != nil {
		return nil, err
	}
	var checks []readiness
	start := func(spec process.Spec, check func(context.Context) error) error {
		proc, err := c.procs.Start(spec)
		if err != nil {
			return err
		}
		r := readiness{proc: proc, check: check}
		if spec.Path == b.CSIAttacher || spec.Path == b.CSIProvisioner {
			// The sidecars give the driver a fixed second to answer their
			// capability calls at start, and exit when it does not (a
			// starved machine, e.g. shards sharing cores); in a pod the
			// kubelet would restart them.
			r.restarts = 3
		}
		checks = append(checks, r)
		return nil
	}
	faultArgs, err := csidriver.FaultArgs(st.spec.CSIErrors, uint64(st.spec.Seed))
	if err != nil {
		return nil, err
	}
	driverArgs := func(mode, node, sock string) []string {
		return append([]string{"--mode=" + mode, "--drivername=" + driver, "--nodeid=" + node,
			"--endpoint=unix://" + sock, "--state-dir=" + l.stateDir}, faultArgs...)
	}
	if err := start(process.Spec{Name: "csi-driver-controller", Path: b.CSIDriver, LogFile: filepath.Join(logDir, "csi-driver-controller.log"),
		Args: driverArgs("controller", "controller", l.controllerSock)}, socketReady(l.controllerSock)); err != nil {
		return nil, err
	}
	for _, n := range c.nodes {
		sock := l.nodeSocket(n)
		if err := start(process.Spec{Name: "csi-driver-" + n, Path: b.CSIDriver, LogFile: filepath.Join(logDir, "csi-driver-"+n+".log"),
			Args: driverArgs("node", n, sock), Env: perNodeEnv}, socketReady(sock)); err != nil {
			return nil, err
		}
	}
	attacherPort, provisionerPort := st.ports.attacherMetrics, st.ports.provisionerMetrics
	if err := start(process.Spec{Name: "csi-attacher", Path: b.CSIAttacher, LogFile: filepath.Join(logDir, "csi-attacher.log"), Args: []string{
		"--csi-address=" + l.controllerSock,
		"--kubeconfig=" + cfg.csiAttacher,
		"--leader-election=false",
		"--timeout=15s",
		// The sidecars' defaults (5 QPS, 10 workers) make the attacher the
		// bottleneck of a fast churn (each detach+attach is ~6 writes);
		// production deployments raise them too. The A/D controller under
		// test keeps its own defaults.
		"--kube-api-qps=100", "--kube-api-burst=200", "--worker-threads=50",
		fmt.Sprintf("--http-endpoint=127.0.0.1:%d", attacherPort),
		"--v=2",
	}}, httpGetOK(fmt.Sprintf("http://127.0.0.1:%d/metrics", attacherPort), nil)); err != nil {
		return nil, err
	}
	if err := start(process.Spec{Name: "csi-provisioner", Path: b.CSIProvisioner, LogFile: filepath.Join(logDir, "csi-provisioner.log"), Args: []string{
		"--csi-address=" + l.controllerSock,
		"--kubeconfig=" + cfg.csiProvisioner,
		"--leader-election=false",
		"--timeout=15s",
		"--kube-api-qps=100", "--kube-api-burst=200",
		// The claim's name in CreateVolume's parameters, which a CSI fault's
		// pvcs match (csidriver.PVCNameParameter).
		"--extra-create-metadata",
		fmt.Sprintf("--http-endpoint=127.0.0.1:%d", provisionerPort),
		"--v=2",
	}}, httpGetOK(fmt.Sprintf("http://127.0.0.1:%d/metrics", provisionerPort), nil)); err != nil {
		return nil, err
	}
	return checks, nil
}
