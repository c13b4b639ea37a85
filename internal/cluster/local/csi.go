package local

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

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

// nodeSocket is the node plugin socket of one node; the kubelet-sim finds
// it by the same rule (--csi-socket-dir).
func (l csiLayout) nodeSocket(node string) string { return filepath.Join(l.dir, node+".sock") }

// applyObjects creates the RBAC of the CSI sidecars and the pinning
// extender, the CSIDriver and the StorageClass, with the driver renamed to
// name.
func applyObjects(ctx context.Context, client kubernetes.Interface, name string) error {
	objs, err := decodeAll(manifests.CSIRBAC, manifests.CSIDriver, manifests.ExtenderRBAC)
	if err != nil {
		return err
	}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *storagev1.CSIDriver:
			o.Name = name
			_, err = client.StorageV1().CSIDrivers().Create(ctx, o, metav1.CreateOptions{})
		case *storagev1.StorageClass:
			o.Provisioner = name
			_, err = client.StorageV1().StorageClasses().Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("unexpected object %T in the manifests", o)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("apply manifests: %w", err)
		}
	}
	return nil
}

func decodeAll(docs ...[]byte) ([]any, error) {
	var out []any
	for _, doc := range docs {
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(doc)))
		for {
			raw, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			if len(bytes.TrimSpace(raw)) == 0 {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("decode manifest: %w", err)
			}
			out = append(out, obj)
		}
	}
	return out, nil
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
		checks = append(checks, readiness{proc, check})
		return nil
	}
	driverArgs := func(mode, node, sock string) []string {
		return []string{"--mode=" + mode, "--drivername=" + driver, "--nodeid=" + node,
			"--endpoint=unix://" + sock, "--state-dir=" + l.stateDir}
	}
	if err := start(process.Spec{Name: "csi-driver-controller", Path: b.CSIDriver, LogFile: filepath.Join(logDir, "csi-driver-controller.log"),
		Args: driverArgs("controller", "controller", l.controllerSock)}, socketReady(l.controllerSock)); err != nil {
		return nil, err
	}
	for _, n := range c.nodes {
		sock := l.nodeSocket(n)
		if err := start(process.Spec{Name: "csi-driver-" + n, Path: b.CSIDriver, LogFile: filepath.Join(logDir, "csi-driver-"+n+".log"),
			Args: driverArgs("node", n, sock)}, socketReady(sock)); err != nil {
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
		fmt.Sprintf("--http-endpoint=127.0.0.1:%d", provisionerPort),
		"--v=2",
	}}, httpGetOK(fmt.Sprintf("http://127.0.0.1:%d/metrics", provisionerPort), nil)); err != nil {
		return nil, err
	}
	return checks, nil
}
