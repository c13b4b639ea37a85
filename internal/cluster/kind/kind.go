// Package kind is the cluster provider with real kubelets: a kind cluster
// (sigs.k8s.io/kind's Go library, docker nodes) of one control-plane node and
// one worker per scenario node, from a node image strandlab builds without
// any registry (tools/kind-image, docs/kind.md), running the controller
// build under test as the cluster's kube-controller-manager.
package kind

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vladimirvivien/gexe"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/yaml"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/apply"
	"github.com/strandlab/strandlab/internal/csidriver"
	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/ownership"
	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/proxyadmin"
	"github.com/strandlab/strandlab/manifests"
)

// NodeImageEnv names a node image to use instead of building one (a user
// who can pull sets it to an upstream kindest/node image).
const NodeImageEnv = "KIND_NODE_IMAGE"

// Provider starts kind clusters.
type Provider struct {
	// RepoRoot is the strandlab checkout whose tools/kind-image builds the
	// node image and tools/kind-docker the docker front (Prepare).
	RepoRoot string
	// Progress receives build and start progress lines (may be nil).
	Progress io.Writer
	// NodeImage is the node image; empty: Prepare builds strandlab's
	// offline image (or finds it cached).
	NodeImage string
	// StartTimeout bounds the wait for Ready nodes after kind's create.
	StartTimeout time.Duration

	// cli runs kind's command line program (Prepare builds it and sets
	// its environment): what runs commands in the nodes runs there.
	cli kindCLI
	// unprivileged is the directory of the docker front kind must find
	// first in PATH when --privileged cannot work on this host (Prepare).
	unprivileged string
	realDocker   string
	// images are the in-cluster programs' images, name -> tag (Prepare).
	images map[string]string
}

var (
	_ cluster.Provider        = (*Provider)(nil)
	_ cluster.SpecChecker     = (*Provider)(nil)
	_ cluster.StateDirCluster = (*Cluster)(nil)
	_ cluster.Instrumented    = (*Cluster)(nil)
)

// Name is the provider's name in scenarios and reports.
const Name = "kind"

func (p *Provider) Name() string { return Name }

// NodeImageTag is the node image clusters start from (after Prepare).
func (p *Provider) NodeImageTag() string { return p.NodeImage }

// Capabilities: the controller build under test is mounted over the
// kube-controller-manager static pod's binary (RenderConfig); the proxy
// and the extender run as pods on the control-plane node; the kubelets are
// real, configured by kubeadm patches; strandlab's CSI driver (or
// upstream's) is deployed; kind names the nodes.
func (p *Provider) Capabilities() cluster.Capabilities {
	return cluster.Capabilities{ControllerBuilds: true, Proxy: true, PinningExtender: true,
		OwnKubelets: true, OwnCSIDriver: true}
}

// PlanDown: see the package function.
func (p *Provider) PlanDown(ctx context.Context, dir string) (fmt.Stringer, error) {
	return PlanDown(ctx, dir)
}

// Down: see the package function.
func (p *Provider) Down(ctx context.Context, dir string) error { return Down(ctx, dir) }

// CheckSpec refuses, before anything is built or started, a spec this
// machine cannot start (more nodes than the Docker host's inotify limit
// holds: checkInotify), or upstream's CSI driver on more than one node;
// what only simulated kubelets do is Capabilities' to refuse.
func (p *Provider) CheckSpec(spec cluster.Spec) error {
	if spec.CSIDeployment == cluster.CSIUpstream && spec.Nodes != 1 {
		return fmt.Errorf("cluster.nodes: %d; --csi-driver upstream keeps every volume on the one node its driver runs on: run 1 worker", spec.Nodes)
	}
	if err := checkInotify(spec.Nodes); err != nil {
		return fmt.Errorf("cluster.nodes: %w", err)
	}
	return nil
}

// Available checks that a Docker daemon answers; everything else is built
// by Prepare.
func (p *Provider) Available(ctx context.Context) error {
	docker, err := exec.LookPath("docker")
	if err != nil {
		return fmt.Errorf("the docker client is needed to run kind nodes: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	proc := gexe.RunProcWithContext(ctx, docker+" version --format {{.Server.Version}}")
	if proc.Err() != nil || !proc.IsSuccess() {
		return fmt.Errorf("no Docker daemon answers (docker version: %s)", firstLine(proc.Result()))
	}
	if p.NodeImage == "" {
		if _, err := os.Stat(filepath.Join(p.RepoRoot, "tools", "kind-image", "build-node.sh")); err != nil {
			return fmt.Errorf("no tools/kind-image/build-node.sh under %q to build the node image with (or set %s): %w", p.RepoRoot, NodeImageEnv, err)
		}
	}
	return nil
}

// Prepare builds the node image (cached by a hash of its inputs), the
// in-cluster images and kind's CLI and, when this host's Docker cannot run
// --privileged containers, the docker front kind is made to use instead;
// it returns the provider prepared to start clusters.
func (p *Provider) Prepare(ctx context.Context) (cluster.Starter, error) {
	if err := p.prepare(ctx); err != nil {
		return nil, err
	}
	return Prepared{p}, nil
}

// Prepared is a kind provider whose images and tools are built: what
// starts its clusters.
type Prepared struct{ p *Provider }

func (p *Provider) prepare(ctx context.Context) error {
	progress := p.Progress
	if progress == nil {
		progress = io.Discard
	}
	if p.NodeImage == "" {
		image, err := p.buildNodeImage(ctx, progress)
		if err != nil {
			return err
		}
		p.NodeImage = image
	}
	images, err := p.buildImages(ctx, progress)
	if err != nil {
		return err
	}
	p.images = images
	bin := filepath.Join(p.RepoRoot, "_output", "bin")
	if err := p.goBuild(ctx, filepath.Join(bin, "kind"), "sigs.k8s.io/kind"); err != nil {
		return err
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		return fmt.Errorf("kind provider: find the docker client: %w", err)
	}
	p.realDocker = docker
	defer func() {
		p.cli = kindCLI{path: filepath.Join(bin, "kind"), progress: p.Progress,
			env: environment(os.Getenv("PATH"), p.unprivileged, p.realDocker)}
	}()
	// The smallest test of kind's --privileged: a container of the node
	// image that runs nothing.
	probe := gexe.RunProcWithContext(ctx, docker+" run --rm --privileged --network=none --entrypoint=/bin/true "+p.NodeImage)
	if probe.IsSuccess() {
		return nil
	}
	if !strings.Contains(probe.Result(), "apply caps") {
		return fmt.Errorf("kind provider: a --privileged container of %s does not start: %s", p.NodeImage, firstLine(probe.Result()))
	}
	klog.V(1).InfoS("This Docker cannot run --privileged containers; kind runs through the unprivileged docker front", "reason", firstLine(probe.Result()))
	dir := filepath.Join(bin, "kind-docker")
	if err := p.goBuild(ctx, filepath.Join(dir, "docker"), "./tools/kind-docker"); err != nil {
		return err
	}
	p.unprivileged = dir
	return nil
}

// goBuild builds a Go program of the checkout's module graph (go build's
// cache makes a repeat quick).
func (p *Provider) goBuild(ctx context.Context, out, pkg string) error {
	build := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	build.Dir = p.RepoRoot
	if output, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("kind provider: go build %s: %w: %s", pkg, err, lastLines(string(output), 5))
	}
	return nil
}

func (p *Provider) buildNodeImage(ctx context.Context, progress io.Writer) (string, error) {
	stdout, err := p.runScript(ctx, progress, "tools/kind-image/build-node.sh", "build the kind node image")
	if err != nil {
		return "", err
	}
	lines := strings.Fields(stdout)
	if len(lines) == 0 {
		return "", errors.New("tools/kind-image/build-node.sh printed no image tag")
	}
	return lines[len(lines)-1], nil
}

// networkName is the Docker network of strandlab's kind nodes: its own, not
// kind's shared "kind" network, so that the last cluster's teardown can
// remove it without touching a user's other kind clusters.
const networkName = "strandlab-kind"

// removeNetwork removes strandlab's kind network when no container is
// attached to it any more (another cluster may still use it).
func removeNetwork(ctx context.Context) error {
	// os/exec, not gexe: the template has a space, and gexe splits on it.
	out, err := exec.CommandContext(ctx, "docker", "network", "inspect", "--format", "{{len .Containers}}", networkName).Output()
	if err != nil || strings.TrimSpace(string(out)) != "0" {
		return nil // gone already, or in use
	}
	if rm := gexe.RunProcWithContext(ctx, "docker network rm "+networkName); !rm.IsSuccess() && !strings.Contains(rm.Result(), "active endpoints") {
		return fmt.Errorf("docker network rm %s: %s", networkName, firstLine(rm.Result()))
	}
	return nil
}

// Cluster is a running kind cluster.
type Cluster struct {
	name       string // kind's cluster name (container name prefix)
	dir        string // state: kubeconfig, files mounted into the nodes
	kubeconfig string
	restConfig *rest.Config
	nodes      []string
	components []provenance.Component
	version    string
	started    time.Duration
	keep       bool
	kind       *kindcluster.Provider // listing and deleting the nodes
	cli        kindCLI               // what runs commands in the nodes
	proxyAdmin string                // http://127.0.0.1:port of the proxy's admin server, if any
	outputDir  string                // the run's output: the nodes' logs are saved there at Stop
	logsSaved  bool
	usage      usageSampler // SampleUsage's state

	stopOnce sync.Once
	stopErr  error
}

// Files in a cluster's state directory.
const (
	dirPrefix = "strandlab-kind-"
)

// startAction is one named part of a kind cluster's start; a failure is
// reported with its name ("start kind cluster sl-x: load images into the
// nodes: ...").
type startAction struct {
	name string
	run  func(context.Context) error
}

// Start creates the kind cluster and waits until every node is Ready, as
// a list of named actions; on any failure the nodes' logs are saved and
// everything started is removed, in one place.
func (s Prepared) Start(ctx context.Context, spec cluster.Spec) (_ cluster.Cluster, err error) {
	p := s.p
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := cluster.CheckSpec(p, spec); err != nil {
		return nil, fmt.Errorf("kind provider: %w", err)
	}
	if spec.ControllerManager != "" {
		if st, err := os.Stat(spec.ControllerManager); err != nil || !st.Mode().IsRegular() {
			return nil, fmt.Errorf("kind provider: controller manager %q: not a file (%v)", spec.ControllerManager, err)
		}
	}
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("kind provider: create the state directory: %w", err)
	}
	name := kindName(spec.Name, filepath.Base(dir))
	quiet := p.cli
	quiet.progress = nil
	c := &Cluster{name: name, dir: dir, keep: spec.Keep, kubeconfig: filepath.Join(dir, "kubeconfig"), outputDir: spec.OutputDir,
		kind: kindcluster.NewProvider(kindcluster.ProviderWithDocker(), kindcluster.ProviderWithLogger(newKindLogger(p.Progress))), cli: quiet}
	created := false // kind's create ran: there may be nodes, and logs
	defer func() {
		if err == nil {
			return
		}
		if created {
			c.collectLogs(spec.OutputDir)
		}
		c.keep = false
		if stopErr := c.Stop(context.Background()); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()
	var (
		cfgPath = filepath.Join(dir, "kind-config.yaml")
		admin   kubernetes.Interface
	)
	actions := []startAction{
		{"write the state directory " + dir, func(context.Context) error {
			return c.writeState(spec, cfgPath)
		}},
		{"create the nodes (kind create cluster)", func(ctx context.Context) error {
			created = true
			return p.cli.run(ctx, "create", "cluster", "--name", name, "--config", cfgPath,
				"--image", p.NodeImage, "--kubeconfig", c.kubeconfig, "--wait", "0s",
				// Kept on failure so that the nodes' logs can be saved
				// first; the cleanup above deletes them.
				"--retain")
		}},
		{"weigh the control-plane node as all the workers together (docker update --cpu-shares)", func(ctx context.Context) error {
			return c.weighControlPlane(ctx, spec.Nodes)
		}},
		{"connect to the API server", func(context.Context) error {
			restConfig, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
			if err != nil {
				return err
			}
			// It was client-go's 5 QPS here until the soak-kind shard of
			// seed 3, whose harness logged its deletes waiting 1.2 s in the
			// client.
			cluster.HarnessRateLimits(restConfig)
			c.restConfig = restConfig
			admin, err = kubernetes.NewForConfig(restConfig)
			return err
		}},
		{"wait for Ready nodes", func(ctx context.Context) error {
			timeout := p.StartTimeout
			if timeout == 0 {
				timeout = defaultStartTimeout
			}
			nodes, err := waitForNodes(ctx, admin, spec.Nodes, timeout)
			c.nodes = nodes
			return err
		}},
		{"load the in-cluster images into the nodes", func(ctx context.Context) error {
			return c.loadImages(ctx, p.images)
		}},
		{"start the CSI driver", func(ctx context.Context) error {
			driver := spec.CSIDriverName
			if driver == "" {
				driver = manifests.CSIDriverName
			}
			if spec.CSIDeployment == cluster.CSIUpstream {
				return c.startUpstreamCSI(ctx, admin, p.images, driver)
			}
			faultArgs, err := csidriver.FaultArgs(spec.CSIErrors, uint64(spec.Seed))
			if err != nil {
				return err
			}
			return c.startCSI(ctx, admin, p.images, driver, faultArgs)
		}},
	}
	if spec.Pinning != nil {
		actions = append(actions, startAction{"start the pinning extender", func(ctx context.Context) error {
			cp, err := c.controlPlane(p.images)
			if err != nil {
				return err
			}
			if err := apply.Create(ctx, admin, manifests.ExtenderRBAC); err != nil {
				return err
			}
			return cp.startExtender(ctx, admin, spec.Pinning)
		}})
	}
	if spec.Proxy != nil {
		actions = append(actions, startAction{"start the throttling proxy", func(ctx context.Context) error {
			cp, err := c.controlPlane(p.images)
			if err != nil {
				return err
			}
			return cp.startProxy(ctx, spec.Proxy, proxyadmin.Client{Base: c.proxyAdmin})
		}})
	}
	begin := time.Now()
	for _, a := range actions {
		if err := a.run(ctx); err != nil {
			return nil, fmt.Errorf("start kind cluster %s: %s: %w", name, a.name, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("start kind cluster %s: after %s: %w", name, a.name, err)
		}
	}
	c.started = time.Since(begin)
	if v, err := admin.Discovery().ServerVersion(); err == nil {
		c.version = v.GitVersion
	}
	c.components = p.components(ctx, admin, spec)
	klog.V(1).InfoS("kind cluster ready", "name", name, "nodes", len(c.nodes), "startSeconds", c.started.Seconds(), "dir", dir)
	return c, nil
}

// controlPlaneCPUShares is the control-plane node container's CPU weight
// for a cluster of workers worker nodes: as much as all the workers
// together (each keeps Docker's 1024). With every node at 1024, a busy
// machine gave the control plane a fifth to a quarter of the CPU, and its
// processes waited for it ten times as long as they ran: the controller's
// API calls took 30-80 ms against the local provider's 7, and it detached
// a released volume about 0.4 s later (docs/kind.md, "The detach after
// the release"). A cluster's control plane has machines of its own; the
// experiment is the controller's view of the nodes, not its CPU queue.
func controlPlaneCPUShares(workers int) int {
	return 1024 * max(workers, 1)
}

// weighControlPlane sets the control-plane node container's CPU weight
// (controlPlaneCPUShares). A running container's weight can be changed, so
// kind's own `docker run` is left as it is.
func (c *Cluster) weighControlPlane(ctx context.Context, workers int) error {
	node := c.name + "-control-plane"
	shares := strconv.Itoa(controlPlaneCPUShares(workers))
	out, err := exec.CommandContext(ctx, "docker", "update", "--cpu-shares", shares, node).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker update --cpu-shares %s %s: %w: %s", shares, node, err, firstLine(string(out)))
	}
	return nil
}

// writeState fills the cluster's state directory: the ownership marker,
// the CSI driver's state, and kind's configuration (cfgPath), with a host
// port for the proxy's admin server when the spec asks for a proxy.
func (c *Cluster) writeState(spec cluster.Spec, cfgPath string) error {
	// The nodes mount the directory; docker's daemon reads it as root.
	if err := os.Chmod(c.dir, 0o755); err != nil {
		return err
	}
	marker, err := ownership.NewMarker(Name, spec.Keep)
	if err != nil {
		return err
	}
	marker.KindCluster = c.name
	if err := ownership.WriteMarker(c.dir, marker); err != nil {
		return err
	}
	csiState := c.csiStateDir()
	if err := os.MkdirAll(csiState, 0o755); err != nil {
		return err
	}
	layout := Layout{StateDir: c.dir, CSIStateDir: csiState}
	if spec.Proxy != nil {
		if layout.ProxyAdminPort, err = freePort(); err != nil {
			return err
		}
		c.proxyAdmin = fmt.Sprintf("http://127.0.0.1:%d", layout.ProxyAdminPort)
	}
	cfg, err := RenderConfig(spec, layout)
	if err != nil {
		return err
	}
	cfg.Name = c.name
	doc, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("kind configuration: %w", err)
	}
	return os.WriteFile(cfgPath, doc, 0o644)
}

// waitForNodes polls until want worker nodes (nodes without the
// control-plane role) are Ready and returns their names, sorted.
func waitForNodes(ctx context.Context, admin kubernetes.Interface, want int, timeout time.Duration) ([]string, error) {
	var workers []string
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		workers = workers[:0]
		notReady := []string{}
		for _, n := range list.Items {
			if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; cp {
				continue
			}
			if !nodeReady(&n) {
				notReady = append(notReady, n.Name)
				continue
			}
			workers = append(workers, n.Name)
		}
		if len(workers) == want {
			return true, nil
		}
		last = fmt.Errorf("%d of %d worker nodes Ready (not Ready: %s)", len(workers), want, strings.Join(notReady, ", "))
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for Ready nodes: %w (last: %v)", err, last)
	}
	return workers, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// components: what runs in the cluster, as the nodes report it.
func (p *Provider) components(ctx context.Context, admin kubernetes.Interface, spec cluster.Spec) []provenance.Component {
	kubelet := "unknown"
	if list, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil && len(list.Items) > 0 {
		kubelet = list.Items[0].Status.NodeInfo.KubeletVersion
	}
	kcm := provenance.Component{Name: "kube-controller-manager", Version: kubelet, Provenance: "node image " + p.NodeImage}
	if spec.ControllerManager != "" {
		kcm.Provenance = "the controller build under test (the build's provenance in the report), mounted into kubeadm's static pod"
	}
	out := []provenance.Component{
		{Name: "kind-node-image", Version: p.NodeImage, Provenance: nodeImageProvenance(p.NodeImage)},
		{Name: "kubelet", Version: kubelet + " (real)", Provenance: "node image " + p.NodeImage},
		{Name: "kube-apiserver", Version: kubelet, Provenance: "node image " + p.NodeImage},
		kcm,
		{Name: "kube-scheduler", Version: kubelet, Provenance: "node image " + p.NodeImage},
	}
	for _, name := range []string{"csi-driver", "csi-attacher", "csi-provisioner", "apiproxy", "pin-extender"} {
		if name == "apiproxy" && spec.Proxy == nil || name == "pin-extender" && spec.Pinning == nil {
			continue // not run
		}
		out = append(out, provenance.Component{Name: name, Version: p.images[name], Provenance: "image built FROM scratch by tools/images/build.sh"})
	}
	return out
}

func nodeImageProvenance(image string) string {
	if strings.HasPrefix(image, "strandlab/kind-node:") {
		return "built offline by tools/kind-image/build-node.sh (debootstrap + pinned Go modules)"
	}
	return "set by " + NodeImageEnv
}

func (c *Cluster) Kubeconfig() string                 { return c.kubeconfig }
func (c *Cluster) RESTConfig() *rest.Config           { return rest.CopyConfig(c.restConfig) }
func (c *Cluster) Nodes() []string                    { return append([]string(nil), c.nodes...) }
func (c *Cluster) Components() []provenance.Component { return c.components }
func (c *Cluster) KubernetesVersion() string          { return c.version }
func (c *Cluster) StartDuration() time.Duration       { return c.started }
func (c *Cluster) StateDir() string                   { return c.dir }

// Instruments: the proxy, the node containers' accounting and the
// kubelets' runtime metrics.
func (c *Cluster) Instruments() cluster.Instruments {
	return cluster.Instruments{Proxy: c, Usage: c, RuntimeOps: c, CSIFaults: c}
}

// CSIFaultJournal reads the CSI driver instances' journals from the host
// directory every node mounts as their state directory (RenderConfig).
func (c *Cluster) CSIFaultJournal(context.Context) ([]fault.JournalEntry, error) {
	return csidriver.ReadFaultJournal(c.csiStateDir())
}

// csiStateDir is the CSI driver's state directory on the host, under the
// cluster's state directory.
func (c *Cluster) csiStateDir() string { return filepath.Join(c.dir, "csi") }

// ProxyCounters reads the proxy's counters (through the host port mapped
// to its admin server).
func (c *Cluster) ProxyCounters(ctx context.Context) (fault.Counters, error) {
	return proxyadmin.Client{Base: c.proxyAdmin}.Counters(ctx)
}

// ProxyJournal reads the proxy's journal since t.
func (c *Cluster) ProxyJournal(ctx context.Context, since time.Time) ([]fault.JournalEntry, error) {
	return proxyadmin.Client{Base: c.proxyAdmin}.Journal(ctx, since)
}

// freePort is a free TCP port on 127.0.0.1 (released at once; docker binds
// it when the node starts).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("reserve a port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop saves the nodes' logs (kubelet and containerd journals, every
// container's log, kind's export) under the run's logs/kind, then deletes
// the kind cluster (its containers, their volumes and, when no other
// cluster uses it, strandlab's kind network) and the state directory,
// unless the cluster is kept.
func (c *Cluster) Stop(context.Context) error {
	c.stopOnce.Do(func() {
		if c.keep {
			return
		}
		if c.outputDir != "" && c.restConfig != nil {
			c.collectLogs(c.outputDir)
		}
		c.stopErr = errors.Join(c.kind.Delete(c.name, c.kubeconfig), removeNetwork(context.Background()), os.RemoveAll(c.dir))
	})
	return c.stopErr
}

// collectLogs saves the nodes' logs (kind's export: journals, containers,
// kubelet) under outputDir/logs/kind, once: when a start fails or at Stop.
func (c *Cluster) collectLogs(outputDir string) {
	if c.logsSaved {
		return
	}
	c.logsSaved = true
	dir := filepath.Join(outputDir, "logs", "kind")
	if err := c.cli.run(context.Background(), "export", "logs", dir, "--name", c.name); err != nil {
		klog.InfoS("Could not collect the kind nodes' logs", "err", err)
		return
	}
	klog.V(1).InfoS("Saved the kind nodes' logs", "dir", dir)
}

// kindName is the kind cluster name for a scenario's cluster: unique per
// start (the state directory's random suffix), and short, since node
// container names and hostnames derive from it.
func kindName(scenario, stateDir string) string {
	suffix := stateDir[strings.LastIndex(stateDir, "-")+1:]
	base := sanitize(scenario)
	if len(base) > 20 {
		base = strings.TrimRight(base[:20], "-")
	}
	return strings.ToLower("sl-" + base + "-" + suffix)
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return '-'
	}, name)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// failureLines picks from a command's output the last n lines that say
// what failed (kubeadm ends with a Go stack trace, which says nothing).
func failureLines(s string, n int) string {
	var picked []string
	for _, line := range strings.Split(s, "\n") {
		l := strings.ToLower(line)
		if strings.HasPrefix(line, "\t") || !(strings.Contains(l, "error") || strings.Contains(l, "fail") || strings.Contains(l, "timed out")) {
			continue
		}
		picked = append(picked, line)
	}
	if len(picked) > n {
		picked = picked[len(picked)-n:]
	}
	if len(picked) == 0 {
		return lastLines(s, n)
	}
	return strings.Join(picked, "\n")
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// DownPlan is what Down would do: delete the kind cluster, remove the
// state directory (and strandlab's Docker network once no container uses
// it).
type DownPlan struct {
	Dir         string
	KindCluster string
}

func (p DownPlan) String() string {
	return fmt.Sprintf("delete kind cluster %s\nremove %s\n", p.KindCluster, p.Dir)
}

// PlanDown checks that dir is the state directory of a kept kind cluster
// strandlab created (ownership.ReadKept), that its run has ended, and that
// the kind cluster it names is the one created with it: its control-plane
// container mounts this very directory (a kind cluster strandlab did not
// create, such as the user's own, never does). Anything else is refused.
func PlanDown(ctx context.Context, dir string) (DownPlan, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return DownPlan{}, err
	}
	m, err := ownership.ReadKept(abs, Name)
	if err != nil {
		return DownPlan{}, err
	}
	if !kindClusterName.MatchString(m.KindCluster) {
		return DownPlan{}, fmt.Errorf("%s: %w: kind_cluster %q is not a name strandlab gives", dir, ownership.ErrNotOurs, m.KindCluster)
	}
	mounts, err := containerMounts(ctx, m.KindCluster+"-control-plane")
	if err != nil {
		return DownPlan{}, fmt.Errorf("%s: kind cluster %s: %w", dir, m.KindCluster, err)
	}
	if !slices.Contains(mounts, abs) {
		return DownPlan{}, fmt.Errorf("%s: %w: kind cluster %s does not mount it, so strandlab did not create that cluster with it: not deleting", dir, ownership.ErrNotOurs, m.KindCluster)
	}
	return DownPlan{Dir: abs, KindCluster: m.KindCluster}, nil
}

// kindClusterName: the names kindName gives.
var kindClusterName = regexp.MustCompile(`^sl-[a-z0-9-]{1,40}$`)

// containerMounts lists the host paths a container bind-mounts.
func containerMounts(ctx context.Context, container string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "docker", "container", "inspect", "--format", "{{json .Mounts}}", container).Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return nil, fmt.Errorf("docker container inspect %s: %s", container, firstLine(string(exitErr.Stderr)))
		}
		return nil, fmt.Errorf("docker container inspect %s: %w", container, err)
	}
	var mounts []struct {
		Type   string `json:"Type"`
		Source string `json:"Source"`
	}
	if err := json.Unmarshal(out, &mounts); err != nil {
		return nil, fmt.Errorf("docker container inspect %s: %w", container, err)
	}
	var paths []string
	for _, m := range mounts {
		if m.Type == "bind" {
			paths = append(paths, filepath.Clean(m.Source))
		}
	}
	return paths, nil
}

// Down deletes a kept kind cluster from its state directory: PlanDown,
// then the cluster, the directory and (when unused) the network.
func Down(ctx context.Context, dir string) error {
	plan, err := PlanDown(ctx, dir)
	if err != nil {
		return err
	}
	provider := kindcluster.NewProvider(kindcluster.ProviderWithDocker(), kindcluster.ProviderWithLogger(newKindLogger(nil)))
	if err := provider.Delete(plan.KindCluster, filepath.Join(plan.Dir, "kubeconfig")); err != nil {
		return fmt.Errorf("delete kind cluster %s: %w", plan.KindCluster, err)
	}
	return errors.Join(removeNetwork(ctx), os.RemoveAll(plan.Dir))
}
