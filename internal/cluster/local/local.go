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
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/csidriver"
	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/ownership"
	"github.com/strandlab/strandlab/internal/process"
	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/runtimeops"
	"github.com/strandlab/strandlab/internal/upstream"
	"github.com/strandlab/strandlab/manifests"
)

// Provider starts local clusters. Its binaries are built from the pinned
// modules under RepoRoot by Prepare (cached), or preset in Binaries.
type Provider struct {
	// RepoRoot is the strandlab checkout whose tools/upstream pins the
	// binaries; Prepare builds them from it.
	RepoRoot string
	// Progress receives build progress lines (may be nil).
	Progress io.Writer
	// Binaries are set by Prepare, or preset by a caller that built them.
	Binaries upstream.Binaries
	// StartTimeout bounds the whole start; components that are not healthy by
	// then fail the start with their log tails.
	StartTimeout time.Duration
}

var (
	_ cluster.Provider           = (*Provider)(nil)
	_ cluster.Instrumented       = (*Cluster)(nil)
	_ cluster.StateDirCluster    = (*Cluster)(nil)
	_ cluster.LogCluster         = (*Cluster)(nil)
	_ cluster.APIServerRestarter = (*Cluster)(nil)
	_ cluster.ComponentLister    = (*Cluster)(nil)
)

// Name is the provider's name in scenarios and reports.
const Name = "local"

func (p *Provider) Name() string { return Name }

// Capabilities: everything runs on this machine as processes strandlab
// starts — the controller build under test in place of the stock binary,
// the proxy, the extender, strandlab's CSI driver and kubelet-sim on every
// node, named node-1..node-N.
func (p *Provider) Capabilities() cluster.Capabilities {
	return cluster.Capabilities{
		ControllerBuilds: true, Proxy: true, PinningExtender: true,
		SimulatedKubelets: true, OwnKubelets: true, OwnCSIDriver: true,
		NodeNames: NodeNames,
	}
}

// PlanDown: see the package function.
func (p *Provider) PlanDown(_ context.Context, dir string) (fmt.Stringer, error) {
	return PlanDown(dir)
}

// Down: see the package function.
func (p *Provider) Down(ctx context.Context, dir string) error { return Down(ctx, dir) }

// NodeNames are the names of a local cluster's n nodes: node-1 to node-n.
func NodeNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node-%d", i+1)
	}
	return names
}

// CheckSpec refuses what the local provider cannot run: upstream's CSI
// driver (its images need kind's real nodes and a registry).
func (p *Provider) CheckSpec(spec cluster.Spec) error {
	if spec.CSIDeployment == cluster.CSIUpstream {
		return fmt.Errorf("--csi-driver: %s runs only on kind (its images need real nodes and a registry); the local provider runs strandlab's driver", spec.CSIDeployment)
	}
	if spec.RuntimeTimings != "" {
		data, err := os.ReadFile(spec.RuntimeTimings)
		if err != nil {
			return fmt.Errorf("--runtime-timings: %w", err)
		}
		if _, err := runtimeops.DecodeTimings(data); err != nil {
			return fmt.Errorf("--runtime-timings: %s: %w", spec.RuntimeTimings, err)
		}
	}
	return nil
}

// Available checks what Prepare and Start need: the preset binaries, or
// the go command and the pinning modules to build them from.
func (p *Provider) Available(ctx context.Context) error {
	if p.Binaries.Dir != "" {
		return p.Binaries.Check()
	}
	// The strandlab image: every binary prebuilt, no go command.
	if prebuilt, err := upstream.CheckPrebuilt(); prebuilt || err != nil {
		return err
	}
	if _, err := exec.LookPath("go"); err != nil {
		return fmt.Errorf("the go command is needed to build the pinned binaries: %w", err)
	}
	if _, err := os.Stat(filepath.Join(p.RepoRoot, "tools", "upstream", "build.sh")); err != nil {
		return fmt.Errorf("no tools/upstream/build.sh under %q to build the pinned binaries from: %w", p.RepoRoot, err)
	}
	return nil
}

// Prepare builds the pinned binaries (or finds them cached) and returns
// the provider prepared to start clusters.
func (p *Provider) Prepare(ctx context.Context) (cluster.Starter, error) {
	if p.Binaries.Dir == "" {
		progress := p.Progress
		if progress == nil {
			progress = io.Discard
		}
		b, err := upstream.Ensure(ctx, p.RepoRoot, progress)
		if err != nil {
			return nil, err
		}
		p.Binaries = b
	}
	return Prepared{p}, nil
}

// Prepared is a local provider whose binaries are there: what starts its
// clusters.
type Prepared struct{ p *Provider }

// Cluster is a running local cluster.
type Cluster struct {
	name       string
	dir        string // state: PKI, etcd data, kubeconfigs; removed on Stop
	logDir     string
	kubeconfig string
	restConfig *rest.Config
	nodes      []string
	components []provenance.Component
	version    string
	started    time.Duration
	proxyAdmin string // http://127.0.0.1:port of the proxy's admin server, if any
	keep       bool
	procs      *process.Group
	// apfClients maps the per-client FlowSchemas' names to their clients
	// (apf.go); nil when the cluster has none. harnessRequests counts the
	// requests of the clients made from restConfig (the harness's).
	apfClients      map[string]string
	harnessRequests atomic.Int64

	stopOnce sync.Once
	stopErr  error
}

// Files in a cluster's state directory.
const (
	pidFile   = "processes.json" // process.Record of every component started
	dirPrefix = "strandlab-"
)

// portSet are the 127.0.0.1 ports of one cluster, by what listens there.
type portSet struct {
	etcdClient, etcdPeer                int
	apiServer                           int
	controllerManager, scheduler        int
	attacherMetrics, provisionerMetrics int
	extender                            int
	proxy, proxyAdmin                   int
}

func reservePorts() (portSet, error) {
	p, err := freePorts(10)
	if err != nil {
		return portSet{}, err
	}
	return portSet{etcdClient: p[0], etcdPeer: p[1], apiServer: p[2], controllerManager: p[3], scheduler: p[4],
		attacherMetrics: p[5], provisionerMetrics: p[6], extender: p[7], proxy: p[8], proxyAdmin: p[9]}, nil
}

// starting is one start in progress: the provider, the spec, the cluster
// being built and what the steps hand each other.
type starting struct {
	p      *Provider
	spec   cluster.Spec
	c      *Cluster
	bins   upstream.Binaries
	ports  portSet
	cfg    *clusterPKI
	csi    csiLayout
	driver string
	admin  kubernetes.Interface
	// apiserver is the kube-apiserver process: steps that wait on the API
	// server alone (the FlowSchemas) are ready in its name.
	apiserver *process.Process
	// kcmKubeconfig is where kube-controller-manager connects: the API
	// server, or the proxy in front of it.
	kcmKubeconfig string
}

// step is one named part of a start: it launches its components and
// returns how to tell they are ready (nil: ready when launched).
type step struct {
	name  string
	start func(ctx context.Context) ([]readiness, error)
}

// Start brings a cluster up in phases of named steps — pki; etcd;
// kube-apiserver; the cluster-wide objects and the proxy; the CSI driver and
// sidecars, kube-controller-manager, the scheduler (with the extender) and
// the kubelets — starting the steps of a phase together and waiting for all
// of their readiness checks before the next phase. It returns once the
// control plane is healthy and every node is Ready. On any failure
// everything started so far is stopped and removed, and the error names
// the step.
func (s Prepared) Start(ctx context.Context, spec cluster.Spec) (cluster.Cluster, error) {
	p := s.p
	// freePorts releases its ports before the components bind them: another
	// run starting at the same time may take one in between. The component
	// then dies with a bind error, the failed start has cleaned up, and a
	// fresh set of ports is tried.
	return retryPortClash(ctx, portAttempts, p.Progress, func() (cluster.Cluster, error) { return p.start(ctx, spec) })
}

// retryPortClash runs start again, up to attempts times in all, while it
// fails with a bind error ("address already in use") and ctx is not done.
func retryPortClash(ctx context.Context, attempts int, progress io.Writer, start func() (cluster.Cluster, error)) (cluster.Cluster, error) {
	for attempt := 1; ; attempt++ {
		c, err := start()
		if err == nil || attempt >= attempts || ctx.Err() != nil || !strings.Contains(err.Error(), "address already in use") {
			return c, err
		}
		klog.V(1).InfoS("A port was taken between its reservation and its use; starting again", "attempt", attempt, "err", err)
		if progress != nil {
			fmt.Fprintf(progress, ">> a port was taken by another process meanwhile; starting again (%d of %d)\n", attempt+1, attempts)
		}
	}
}

// portAttempts bounds Start's retries after a port clash.
const portAttempts = 3

func (p *Provider) start(ctx context.Context, spec cluster.Spec) (_ cluster.Cluster, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if p.Binaries.Dir == "" {
		return nil, errors.New("local provider: no binaries (call Prepare first)")
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
	c := &Cluster{name: spec.Name, dir: dir, keep: spec.Keep, logDir: filepath.Join(spec.OutputDir, "logs"),
		procs: &process.Group{Keep: spec.Keep, PIDFile: filepath.Join(dir, pidFile)}}
	defer func() {
		if err != nil {
			c.keep = false
			if stopErr := c.Stop(context.Background()); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()
	marker, err := ownership.NewMarker(Name, spec.Keep)
	if err != nil {
		return nil, err
	}
	if err := ownership.WriteMarker(dir, marker); err != nil {
		return nil, err
	}
	c.nodes = NodeNames(spec.Nodes)
	st := &starting{p: p, spec: spec, c: c, bins: p.Binaries, csi: newCSILayout(dir), driver: spec.CSIDriverName}
	if spec.ControllerManager != "" {
		st.bins.KubeControllerManager = spec.ControllerManager
	}
	if st.driver == "" {
		st.driver = manifests.CSIDriverName
	}
	if st.ports, err = reservePorts(); err != nil {
		return nil, err
	}

	begin := time.Now()
	phases := [][]step{
		{{"pki", st.startPKI}},
		{{"etcd", st.startEtcd}},
		{{"kube-apiserver", st.startAPIServer}},
		// kube-controller-manager connects through the proxy: it must be
		// serving first. Everything else starts together.
		{{"cluster objects", st.startObjects}, {"flowschemas", st.startFlowSchemas}, {"apiproxy", st.startProxy}},
		{{"csi", st.startCSI}, {"kube-controller-manager", st.startControllerManager}, {"kube-scheduler", st.startScheduler}, {"kubelets", st.startKubelets}},
	}
	for _, phase := range phases {
		if err := runPhase(ctx, c.procs, phase); err != nil {
			return nil, err
		}
	}
	c.started = time.Since(begin)
	for _, comp := range st.bins.Components(ctx, spec.RuntimeTimings) {
		if comp.Name == "pin-extender" && spec.Pinning == nil || comp.Name == "apiproxy" && spec.Proxy == nil {
			continue // not run
		}
		c.components = append(c.components, comp)
	}
	klog.V(1).InfoS("Local cluster ready", "name", spec.Name, "nodes", len(c.nodes), "startSeconds", c.started.Seconds(), "dir", dir)
	return c, nil
}

// runPhase starts a phase's steps in order, then waits for all of their
// readiness checks together; errors carry the step's name.
func runPhase(ctx context.Context, procs *process.Group, phase []step) error {
	type check struct {
		step string
		readiness
	}
	var checks []check
	for _, s := range phase {
		rs, err := s.start(ctx)
		if err != nil {
			return fmt.Errorf("start %s: %w", s.name, err)
		}
		for _, r := range rs {
			checks = append(checks, check{s.name, r})
		}
	}
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, chk := range checks {
		wg.Go(func() {
			if _, err := procs.WaitReadyRestarting(ctx, chk.proc, 100*time.Millisecond, chk.check, chk.restarts); err != nil {
				errs[i] = fmt.Errorf("start %s: %w", chk.step, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startPKI issues every component's credentials and the admin client.
func (st *starting) startPKI(context.Context) ([]readiness, error) {
	c := st.c
	cfg, err := writePKI(c.dir, fmt.Sprintf("https://127.0.0.1:%d", st.ports.apiServer), c.nodes)
	if err != nil {
		return nil, err
	}
	st.cfg, st.kcmKubeconfig, c.kubeconfig = cfg, cfg.controllerManager, cfg.admin
	if c.restConfig, err = clientcmd.BuildConfigFromFlags("", cfg.admin); err != nil {
		return nil, err
	}
	cluster.HarnessRateLimits(c.restConfig)
	// Every client made from it (RESTConfig copies the wrapper) is the
	// harness: its requests are counted here, as the API server cannot
	// tell them from its own (apf.go).
	c.restConfig.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return harnessCounter{next: rt, count: &c.harnessRequests}
	})
	st.admin, err = kubernetes.NewForConfig(c.restConfig)
	return nil, err
}

func (st *starting) startEtcd(context.Context) ([]readiness, error) {
	pt := st.ports
	etcd, err := st.c.procs.Start(process.Spec{Name: "etcd", Path: st.bins.Etcd, LogFile: filepath.Join(st.c.logDir, "etcd.log"), Args: []string{
		"--name=default",
		"--data-dir=" + filepath.Join(st.c.dir, "etcd"),
		fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", pt.etcdClient),
		fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", pt.etcdClient),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", pt.etcdPeer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", pt.etcdPeer),
		fmt.Sprintf("--initial-cluster=default=http://127.0.0.1:%d", pt.etcdPeer),
		// A throwaway test store: durability buys nothing and fsync costs
		// seconds per cycle on a slow disk.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}})
	if err != nil {
		return nil, err
	}
	return []readiness{{proc: etcd, check: httpGetOK(fmt.Sprintf("http://127.0.0.1:%d/health", pt.etcdClient), nil)}}, nil
}

// startAPIServer starts kube-apiserver; once it is ready (the phase waits)
// startCSI records its version and creates the cluster-wide objects.
func (st *starting) startAPIServer(context.Context) ([]readiness, error) {
	c, cfg := st.c, st.cfg
	apiserver, err := c.procs.Start(process.Spec{Name: "kube-apiserver", Path: st.bins.KubeAPIServer, LogFile: filepath.Join(c.logDir, "kube-apiserver.log"), Args: []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", st.ports.etcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", st.ports.apiServer),
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
		"--cert-dir=" + filepath.Join(c.dir, "apiserver-certs"),
	}})
	if err != nil {
		return nil, err
	}
	st.apiserver = apiserver
	return []readiness{{proc: apiserver, check: st.apiServerReady}}, nil
}

func (st *starting) apiServerReady(ctx context.Context) error {
	return st.admin.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
}

func (st *starting) startControllerManager(context.Context) ([]readiness, error) {
	c, cfg := st.c, st.cfg
	args := append([]string{
		"--kubeconfig=" + st.kcmKubeconfig,
		"--authentication-kubeconfig=" + cfg.controllerManager,
		"--authorization-kubeconfig=" + cfg.controllerManager,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", st.ports.controllerManager),
		"--cert-dir=" + filepath.Join(c.dir, "kcm-certs"),
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
	}, st.spec.ControllerManagerArgs...)
	kcm, err := c.procs.Start(process.Spec{Name: "kube-controller-manager", Path: st.bins.KubeControllerManager, LogFile: filepath.Join(c.logDir, "kube-controller-manager.log"), Args: args})
	if err != nil {
		return nil, err
	}
	return []readiness{{proc: kcm, check: httpGetOK(fmt.Sprintf("https://127.0.0.1:%d/healthz", st.ports.controllerManager), selfSigned)}}, nil
}

// selfSigned skips verification of kube-controller-manager's and
// kube-scheduler's self-signed serving certificates, for health checks only.
var selfSigned = &tls.Config{InsecureSkipVerify: true}

// startScheduler starts kube-scheduler, calling the pinning extender (started
// here too) when the spec asks for pinning.
func (st *starting) startScheduler(context.Context) ([]readiness, error) {
	c, cfg := st.c, st.cfg
	args := []string{
		"--authentication-kubeconfig=" + cfg.scheduler,
		"--authorization-kubeconfig=" + cfg.scheduler,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", st.ports.scheduler),
		"--cert-dir=" + filepath.Join(c.dir, "scheduler-certs"),
	}
	var checks []readiness
	if st.spec.Pinning != nil {
		ext, configArgs, err := st.startExtender()
		if err != nil {
			return nil, err
		}
		checks = append(checks, ext)
		args = append(args, configArgs...)
	} else {
		args = append(args, "--kubeconfig="+cfg.scheduler, "--leader-elect=false")
	}
	sched, err := c.procs.Start(process.Spec{Name: "kube-scheduler", Path: st.bins.KubeScheduler, LogFile: filepath.Join(c.logDir, "kube-scheduler.log"), Args: args})
	if err != nil {
		return nil, err
	}
	return append(checks, readiness{proc: sched, check: httpGetOK(fmt.Sprintf("https://127.0.0.1:%d/healthz", st.ports.scheduler), selfSigned)}), nil
}

// perNodeEnv is the environment of the processes that stand in for one
// node's agents (kubelet-sim and the node's CSI driver): one P each in the
// Go scheduler. A node's agents have a machine to themselves in a real
// cluster; here 8 to 100 nodes' share 2 cores, and with a P per core an
// idle process's timers (the volume manager's two 100 ms loops, the status
// loop) also wake threads that spin looking for work on the other core: a
// cost per process, hence per node. It changes how their goroutines share
// a core, not what they do (docs/performance.md, "Scale").
var perNodeEnv = []string{"GOMAXPROCS=1"}

// steadySysmonEnv is the environment of strandlab's programs that wake
// tens of times a second (kubelet-sim: timers, watch events; apiproxy:
// every frame of the controller's traffic): the Go runtime's monitor
// thread (sysmon) kept at its steady 10 ms tick. Left alone, sysmon sleeps
// while the process is idle and, at the first system call after, restarts
// at 20 µs ticks for 50 ticks before backing off (runtime.sysmon, go1.26
// src/runtime/proc.go), so such a process keeps its sysmon near 20 µs,
// each tick a nanosleep: 15-19% of each program's CPU in perf on the
// 2-core machine. A positive schedtrace is the runtime's one switch that
// keeps sysmon out of that deep sleep; its value is the trace's period in
// ms, here the largest (about 25 days), so the trace line is printed at
// most at start. Goroutines are scheduled as before but for a system call
// blocking longer than a tick, handed off after up to 10 ms instead of
// 20 µs. Mostly idle programs (the CSI driver, pin-extender) keep the
// default: for them the steady tick cost more than the deep sleep saved
// (docs/performance.md, "The Go runtime's monitor thread"). A GODEBUG of
// the user's is kept.
func steadySysmonEnv() []string {
	const steadySysmon = "schedtrace=2147483647"
	if d := os.Getenv("GODEBUG"); d != "" {
		return []string{"GODEBUG=" + d + "," + steadySysmon}
	}
	return []string{"GODEBUG=" + steadySysmon}
}

// startKubelets starts one kubelet-sim per node (upstream's CSI plugin,
// which kubelet-sim runs, serves one node per process); it is ready when
// every node is Ready.
func (st *starting) startKubelets(context.Context) ([]readiness, error) {
	c, spec := st.c, st.spec
	common := []string{"--kubelet-version=" + c.version, "--csi-driver-name=" + st.driver, "--seed=" + strconv.FormatUint(uint64(spec.Seed), 10)}
	if spec.NodeStatusUpdateFrequency > 0 {
		common = append(common, "--node-status-update-frequency="+spec.NodeStatusUpdateFrequency.String())
	}
	if spec.NodeStatusReportFrequency > 0 {
		common = append(common, "--node-status-report-frequency="+spec.NodeStatusReportFrequency.String())
	}
	if spec.FailedMountOnTimeout {
		common = append(common, "--failed-mount-on-timeout")
	}
	if spec.RuntimeTimings != "" {
		common = append(common, "--runtime-timings="+spec.RuntimeTimings)
	}
	switch {
	case spec.KubeletVerbosity > 0:
		common = append(common, "-v="+strconv.Itoa(spec.KubeletVerbosity))
	case klog.V(4).Enabled():
		common = append(common, "-v=4")
	}
	var checks []readiness
	for i, n := range c.nodes {
		args := append(slices.Clone(common), "--node="+n+"="+st.cfg.nodes[n], "--csi-endpoint="+st.csi.nodeSocket(n),
			"--root-dir="+st.csi.kubeletRootDir(n), "--pod-cidr-index="+strconv.Itoa(i+1))
		name := "kubelet-sim-" + n
		proc, err := c.procs.Start(process.Spec{Name: name, Path: st.bins.KubeletSim, LogFile: filepath.Join(c.logDir, name+".log"), Args: args,
			Env: append(steadySysmonEnv(), perNodeEnv...)})
		if err != nil {
			return nil, err
		}
		checks = append(checks, readiness{proc: proc, check: func(ctx context.Context) error { return nodesReady(ctx, st.admin, []string{n}) }})
	}
	return checks, nil
}

func (c *Cluster) Kubeconfig() string                 { return c.kubeconfig }
func (c *Cluster) RESTConfig() *rest.Config           { return rest.CopyConfig(c.restConfig) }
func (c *Cluster) Nodes() []string                    { return append([]string(nil), c.nodes...) }
func (c *Cluster) Components() []provenance.Component { return c.components }
func (c *Cluster) KubernetesVersion() string          { return c.version }
func (c *Cluster) StartDuration() time.Duration       { return c.started }
func (c *Cluster) StateDir() string                   { return c.dir }
func (c *Cluster) LogDir() string                     { return c.logDir }

// Running reports the components that are still running; after Stop it is
// empty.
func (c *Cluster) Running() []string {
	var out []string
	for _, p := range c.procs.Running() {
		out = append(out, p.Name)
	}
	return out
}

// Instruments: the proxy, the components' processes and the API server's
// requests per client.
func (c *Cluster) Instruments() cluster.Instruments {
	return cluster.Instruments{Proxy: c, Processes: c, APIRequests: c, CSIFaults: c}
}

// CSIFaultJournal reads the CSI driver instances' journals from their
// shared state directory.
func (c *Cluster) CSIFaultJournal(context.Context) ([]fault.JournalEntry, error) {
	return csidriver.ReadFaultJournal(newCSILayout(c.dir).stateDir)
}

// Processes are the running components' processes.
func (c *Cluster) Processes() []cluster.Process {
	var out []cluster.Process
	for _, p := range c.procs.Running() {
		out = append(out, cluster.Process{Name: p.Name, PID: p.PID()})
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
	// restarts is how many times the component is started again when it
	// exits before it is ready (process.Group.WaitReadyRestarting).
	restarts int
}

// Stop stops every component and removes the state directory. A kept
// cluster is left alone: `strandlab down DIR` stops it later.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		if c.keep {
			return
		}
		c.stopErr = errors.Join(c.procs.Stop(stopGrace(ctx)), os.RemoveAll(c.dir))
	})
	return c.stopErr
}

// stopGrace is how long components get between SIGTERM and SIGKILL: a
// throwaway control plane gains nothing from a graceful shutdown
// (kube-apiserver may linger for many seconds), so 3 s at most, less when
// ctx's deadline is nearer, none when ctx is already done.
func stopGrace(ctx context.Context) time.Duration {
	grace := 3 * time.Second
	if ctx.Err() != nil {
		return 0
	}
	if d, ok := ctx.Deadline(); ok {
		grace = min(grace, time.Until(d))
	}
	return max(grace, 0)
}

// DownPlan is what Down would do to a state directory: the processes it
// would stop (only those whose pid still names the recorded process) and
// the directory it would remove.
type DownPlan struct {
	Dir       string
	Processes []process.Record
}

func (p DownPlan) String() string {
	var b strings.Builder
	for _, r := range p.Processes {
		fmt.Fprintf(&b, "stop %s (pid %d, %s)\n", r.Name, r.PID, r.Executable)
	}
	fmt.Fprintf(&b, "remove %s\n", p.Dir)
	return b.String()
}

// PlanDown checks that dir is a kept local cluster's state directory that
// strandlab created (ownership.ReadKept) and whose run has ended, and
// says what Down would do. Anything else is refused, and nothing is done.
func PlanDown(dir string) (DownPlan, error) {
	if _, err := ownership.ReadKept(dir, Name); err != nil {
		return DownPlan{}, err
	}
	recs, err := process.ReadRecords(filepath.Join(dir, pidFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return DownPlan{}, err
	}
	plan := DownPlan{Dir: dir}
	for _, r := range recs {
		if r.Alive() {
			plan.Processes = append(plan.Processes, r)
		}
	}
	return plan, nil
}

// Down stops a kept cluster from its state directory: PlanDown, then the
// plan's processes are stopped and the directory removed.
func Down(ctx context.Context, dir string) error {
	plan, err := PlanDown(dir)
	if err != nil {
		return err
	}
	process.KillRecorded(ctx, plan.Processes, 3*time.Second)
	return os.RemoveAll(dir)
}

// SweepStale removes the state of clusters whose harness died without
// tearing down (a panic in a goroutine, SIGKILL): their processes were
// already killed by Pdeathsig; only the directory is left. Only directories
// with strandlab's marker whose creating process is gone are touched; kept
// clusters never.
func SweepStale() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range matches {
		m, err := ownership.ReadMarker(dir, Name)
		if err != nil || m.Kept || m.Creator.Alive() {
			continue
		}
		if recs, err := process.ReadRecords(filepath.Join(dir, pidFile)); err == nil {
			process.KillRecorded(context.Background(), recs, time.Second)
		}
		if err := os.RemoveAll(dir); err == nil {
			klog.V(1).InfoS("Removed the state of a dead harness's cluster", "dir", dir)
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
// window makes the component fail with a bind error, and Start tries again
// with fresh ports (retryPortClash).
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
