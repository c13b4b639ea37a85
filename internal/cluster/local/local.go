// Package local is the default cluster provider: a real control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) run as processes
// on 127.0.0.1 from binaries built out of the pinned Go modules, plus
// simulated kubelets. No Docker, no images, no registry.
package local

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/process"
	"github.com/strandlab/strandlab/internal/upstream"

	"github.com/strandlab/strandlab/internal/provenance"
)

// Provider starts local clusters from a set of binaries.
type Provider struct {
	Binaries upstream.Binaries
	// StartTimeout bounds the whole start; components that are not healthy by
	// then fail the start with their log tails.
	StartTimeout time.Duration
}

var _ cluster.Provider = (*Provider)(nil)

func (p *Provider) Name() string { return "local" }

// Cluster is a running local cluster.
type Cluster struct {
	name       string
	dir        string // state: PKI, etcd data, kubeconfigs; removed on Stop
	kubeconfig string
	restConfig *rest.Config
	nodes      []string
	components []provenance.Component
	version    string
	started    time.Duration
	proxyAdmin string // http://127.0.0.1:port of the proxy's admin server, if any
	keep       bool
	procs      *process.Group

	stopOnce sync.Once
	stopErr  error
}

// Files in a cluster's state directory.
const (
	ownerFile = "owner" // pid of the harness that started it
	keptFile  = "kept"  // present when the cluster outlives the harness
	pidFile   = "pids"  // "component pid" per line
	dirPrefix = "strandlab-"
)

// Start brings a cluster up: certificates, etcd, API server, then controller
// manager, scheduler and kubelets in parallel. It returns once the control
// plane is healthy and every node is Ready. On any failure everything
// started so far is stopped and removed.
func (p *Provider) Start(ctx context.Context, spec cluster.Spec) (_ cluster.Cluster, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	SweepStale()
	timeout := p.StartTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// Unix socket paths (CSI) are limited to 108 bytes: keep state under the
	// temp dir, not under the (possibly deep) output directory.
	dir, err := os.MkdirTemp("", dirPrefix+sanitize(spec.Name)+"-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{name: spec.Name, dir: dir, keep: spec.Keep,
		procs: &process.Group{Keep: spec.Keep, PIDFile: filepath.Join(dir, pidFile)}}
	defer func() {
		if err != nil {
			c.keep = false
			if stopErr := c.Stop(context.Background()); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	if spec.Keep {
		if err := os.WriteFile(filepath.Join(dir, keptFile), nil, 0o644); err != nil {
			return nil, err
		}
	}
	for i := 1; i <= spec.Nodes; i++ {
		c.nodes = append(c.nodes, fmt.Sprintf("node-%d", i))
	}

	ports, err := freePorts(10)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort, kcmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	driver := spec.CSIDriverName
	if driver == "" {
		driver = DefaultCSIDriverName
	}
	csi := newCSILayout(dir)
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)

	cfg, err := writePKI(dir, server, c.nodes)
	if err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	c.kubeconfig = cfg.admin
	c.restConfig, err = clientcmd.BuildConfigFromFlags("", cfg.admin)
	if err != nil {
		return nil, err
	}
	// The harness's own clients must not be slowed by client-go's default
	// 5 QPS (it would distort timings); the components keep their defaults.
	c.restConfig.QPS, c.restConfig.Burst = 200, 400
	admin, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return nil, err
	}

	logDir := filepath.Join(spec.OutputDir, "logs")
	b := p.Binaries
	begin := time.Now()

	etcd, err := c.procs.Start(process.Spec{Name: "etcd", Path: b.Etcd, LogFile: filepath.Join(logDir, "etcd.log"), Args: []string{
		"--name=default",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", etcdClient),
		fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", etcdClient),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-cluster=default=http://127.0.0.1:%d", etcdPeer),
		// A throwaway test store: durability buys nothing and fsync costs
		// seconds per cycle on a slow disk.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}})
	if err != nil {
		return nil, err
	}
	if err := etcd.WaitReady(ctx, 100*time.Millisecond, httpGetOK(fmt.Sprintf("http://127.0.0.1:%d/health", etcdClient), nil)); err != nil {
		return nil, err
	}

	apiserver, err := c.procs.Start(process.Spec{Name: "kube-apiserver", Path: b.KubeAPIServer, LogFile: filepath.Join(logDir, "kube-apiserver.log"), Args: []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--tls-cert-file=" + cfg.servingCert,
		"--tls-private-key-file=" + cfg.servingKey,
		"--client-ca-file=" + cfg.caFile,
		"--service-account-key-file=" + cfg.saKey,
		"--service-account-signing-key-file=" + cfg.saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		// The "kubernetes" Service would point at 127.0.0.1, which Endpoints
		// validation rejects; nothing in a simulated cluster dials it.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
	}})
	if err != nil {
		return nil, err
	}
	if err := apiserver.WaitReady(ctx, 200*time.Millisecond, func(ctx context.Context) error {
		return admin.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	}); err != nil {
		return nil, err
	}
	v, err := admin.Discovery().ServerVersion()
	if err != nil {
		return nil, err
	}
	c.version = v.GitVersion
	if err := applyObjects(ctx, admin, driver); err != nil {
		return nil, err
	}
	csiChecks, err := p.startCSI(c, csi, driver, cfg, logDir, ports[5:7])
	if err != nil {
		return nil, err
	}

	kcmKubeconfig := cfg.controllerManager
	if spec.Proxy != nil {
		ready, kubeconfig, err := p.startProxy(c, spec.Proxy, cfg, server, logDir, ports[8], ports[9])
		if err != nil {
			return nil, err
		}
		if err := ready.proc.WaitReady(ctx, 100*time.Millisecond, ready.check); err != nil {
			return nil, err
		}
		kcmKubeconfig = kubeconfig
	}
	kcmArgs := append([]string{
		"--kubeconfig=" + kcmKubeconfig,
		"--authentication-kubeconfig=" + cfg.controllerManager,
		"--authorization-kubeconfig=" + cfg.controllerManager,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", kcmPort),
		"--cert-dir=" + filepath.Join(dir, "kcm-certs"),
		// Each controller acts as its own service account (attachdetach-controller,
		// statefulset-controller, ...), as in kubeadm clusters; the manager itself
		// authenticates with its client certificate as system:kube-controller-manager.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + cfg.saKey,
		"--root-ca-file=" + cfg.caFile,
		"--cluster-signing-cert-file=" + cfg.caFile,
		"--cluster-signing-key-file=" + cfg.caKey,
		"--leader-elect=false",
		"--controllers=*",
	}, spec.ControllerManagerArgs...)
	kcm, err := c.procs.Start(process.Spec{Name: "kube-controller-manager", Path: b.KubeControllerManager, LogFile: filepath.Join(logDir, "kube-controller-manager.log"), Args: kcmArgs})
	if err != nil {
		return nil, err
	}
	schedArgs := []string{
		"--authentication-kubeconfig=" + cfg.scheduler,
		"--authorization-kubeconfig=" + cfg.scheduler,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", schedPort),
		"--cert-dir=" + filepath.Join(dir, "scheduler-certs"),
	}
	if spec.Pinning != nil {
		extReady, configArgs, err := p.startExtender(c, spec.Pinning, cfg, logDir, ports[7])
		if err != nil {
			return nil, err
		}
		csiChecks = append(csiChecks, extReady)
		schedArgs = append(schedArgs, configArgs...)
	} else {
		schedArgs = append(schedArgs, "--kubeconfig="+cfg.scheduler, "--leader-elect=false")
	}
	sched, err := c.procs.Start(process.Spec{Name: "kube-scheduler", Path: b.KubeScheduler, LogFile: filepath.Join(logDir, "kube-scheduler.log"), Args: schedArgs})
	if err != nil {
		return nil, err
	}
	simArgs := []string{"--kubelet-version=" + c.version, "--csi-driver-name=" + driver, "--csi-socket-dir=" + csi.dir}
	if spec.NodeStatusUpdateFrequency > 0 {
		simArgs = append(simArgs, "--node-status-update-frequency="+spec.NodeStatusUpdateFrequency.String())
	}
	if spec.NodeStatusReportFrequency > 0 {
		simArgs = append(simArgs, "--node-status-report-frequency="+spec.NodeStatusReportFrequency.String())
	}
	if spec.FailedMountOnTimeout {
		simArgs = append(simArgs, "--failed-mount-on-timeout")
	}
	for _, n := range c.nodes {
		simArgs = append(simArgs, "--node="+n+"="+cfg.nodes[n])
	}
	if klog.V(4).Enabled() {
		simArgs = append(simArgs, "-v=4")
	}
	kubelets, err := c.procs.Start(process.Spec{Name: "kubelet-sim", Path: b.KubeletSim, LogFile: filepath.Join(logDir, "kubelet-sim.log"), Args: simArgs})
	if err != nil {
		return nil, err
	}

	tlsSkip := &tls.Config{InsecureSkipVerify: true} // self-signed serving certs of kcm/scheduler, health only
	checks := append([]readiness{
		{kcm, httpGetOK(fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort), tlsSkip)},
		{sched, httpGetOK(fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort), tlsSkip)},
		{kubelets, func(ctx context.Context) error { return nodesReady(ctx, admin, c.nodes) }},
	}, csiChecks...) // and the extender's, when there is one
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, chk := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = chk.proc.WaitReady(ctx, 100*time.Millisecond, chk.check)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.started = time.Since(begin)
	for _, comp := range b.Components(ctx) {
		if comp.Name == "pin-extender" && spec.Pinning == nil || comp.Name == "apiproxy" && spec.Proxy == nil {
			continue // not run
		}
		c.components = append(c.components, comp)
	}
	klog.V(1).InfoS("Local cluster ready", "name", spec.Name, "nodes", len(c.nodes), "startSeconds", c.started.Seconds(), "dir", dir)
	return c, nil
}

func (c *Cluster) Kubeconfig() string                 { return c.kubeconfig }
func (c *Cluster) RESTConfig() *rest.Config           { return rest.CopyConfig(c.restConfig) }
func (c *Cluster) Nodes() []string                    { return append([]string(nil), c.nodes...) }
func (c *Cluster) Components() []provenance.Component { return c.components }
func (c *Cluster) KubernetesVersion() string          { return c.version }
func (c *Cluster) StartDuration() time.Duration       { return c.started }
func (c *Cluster) Dir() string                        { return c.dir }

// Running reports the components that are still running; after Stop it is
// empty.
func (c *Cluster) Running() []string {
	var out []string
	for _, p := range c.procs.Running() {
		out = append(out, p.Name)
	}
	return out
}

// RestartAPIServer stops kube-apiserver and starts it again on the same port
// and storage (a fault the kubelets and controllers must survive), and waits
// until it is ready.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	var api *process.Process
	for _, p := range c.procs.Running() {
		if p.Name == "kube-apiserver" {
			api = p
		}
	}
	if api == nil {
		return errors.New("kube-apiserver is not running")
	}
	p, err := c.procs.Restart(api, 3*time.Second)
	if err != nil {
		return err
	}
	admin, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return p.WaitReady(ctx, 200*time.Millisecond, func(ctx context.Context) error {
		return admin.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	})
}

// readiness is how to tell that a started component is ready.
type readiness struct {
	proc  *process.Process
	check func(context.Context) error
}

// Stop stops every component and removes the state directory. A kept
// cluster is left alone: `strandlab down DIR` stops it later.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		if c.keep {
			return
		}
		// A throwaway control plane gains nothing from a graceful shutdown
		// (kube-apiserver may linger for many seconds): short grace, then kill.
		c.stopErr = errors.Join(c.procs.Stop(3*time.Second), os.RemoveAll(c.dir))
	})
	return c.stopErr
}

// Down stops a kept cluster from its state directory.
func Down(ctx context.Context, dir string) error {
	if _, err := os.Stat(filepath.Join(dir, ownerFile)); err != nil {
		return fmt.Errorf("%s is not a strandlab cluster directory: %w", dir, err)
	}
	if err := process.KillFromPIDFile(ctx, filepath.Join(dir, pidFile), 3*time.Second); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.RemoveAll(dir)
}

// SweepStale removes the state of clusters whose harness died without
// tearing down (a panic in a goroutine, SIGKILL): their processes were
// already killed by Pdeathsig; only the directory is left. Kept clusters
// are never touched.
func SweepStale() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range matches {
		if _, err := os.Stat(filepath.Join(dir, keptFile)); err == nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && !process.Alive(pid) {
			_ = process.KillFromPIDFile(context.Background(), filepath.Join(dir, pidFile), time.Second)
			if err := os.RemoveAll(dir); err == nil {
				klog.V(1).InfoS("Removed the state of a dead harness's cluster", "dir", dir)
			}
		}
	}
}

func nodesReady(ctx context.Context, client kubernetes.Interface, names []string) error {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	for _, n := range list.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready[n.Name] = true
			}
		}
	}
	for _, n := range names {
		if !ready[n] {
			return fmt.Errorf("node %s not Ready", n)
		}
	}
	return nil
}

func httpGetOK(url string, tlsConfig *tls.Config) func(context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

// freePorts reserves n distinct free ports on 127.0.0.1. They are released
// before the components bind them; a clash with another process in that
// window makes the component fail to start with a clear bind error.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve a port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
}
