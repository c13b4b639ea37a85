// Command kubelet-sim is strandlab's simulated kubelet for one node: it
// registers the node, heartbeats, runs the lifecycle of the pods bound to it,
// and attaches and mounts their volumes with the kubelet's own volume manager
// and CSI plugin (k8s.io/kubernetes/pkg/kubelet/volumemanager,
// pkg/volume/csi), talking gRPC to the node's CSI driver. One process serves
// one node: upstream's CSI plugin keeps its registered drivers in package
// variables, as one kubelet per machine can.
//
//	kubelet-sim --node node-1=/path/node-1.kubeconfig --csi-driver-name D --csi-endpoint /path/node-1.sock --root-dir /path/kubelet/node-1
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/tools/upstream/kubelet-sim/apilatency"
	"github.com/strandlab/strandlab/tools/upstream/kubelet-sim/containerruntime"
	"github.com/strandlab/strandlab/tools/upstream/kubelet-sim/csilatency"
	"github.com/strandlab/strandlab/tools/upstream/kubelet-sim/node"
	"github.com/strandlab/strandlab/tools/upstream/kubelet-sim/volumes"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet-sim:", err)
		klog.Flush()
		os.Exit(exitCode(err))
	}
	klog.Flush()
}

// usageError is bad command-line input (exit 2).
type usageError struct{ error }

func exitCode(err error) int {
	if _, ok := err.(usageError); ok {
		return 2
	}
	return 1
}

func run() error {
	fs := flag.NewFlagSet("kubelet-sim", flag.ExitOnError)
	nodeSpec := fs.String("node", "", "NAME=KUBECONFIG of the node to serve; the kubeconfig must authenticate as system:node:NAME")
	version := fs.String("kubelet-version", "v1.37.2", "kubelet version reported in node status")
	driverName := fs.String("csi-driver-name", "", "CSI driver whose volumes the node attaches and mounts (empty: pods have no attachable volumes)")
	endpoint := fs.String("csi-endpoint", "", "path of the node's CSI driver socket (unix), as node-driver-registrar would report it")
	rootDir := fs.String("root-dir", "", "the kubelet's root directory (--root-dir): pods/ and plugins/ go under it")
	cidrIndex := fs.Int("pod-cidr-index", 1, "pod IPs are 10.244.<index>.x: distinct per node")
	statusEvery := fs.Duration("node-status-update-frequency", node.DefaultNodeStatusUpdateFrequency, "how often the node computes its status (KubeletConfiguration nodeStatusUpdateFrequency)")
	reportEvery := fs.Duration("node-status-report-frequency", node.DefaultNodeStatusReportFrequency, "how often the node writes its status when nothing changed (KubeletConfiguration nodeStatusReportFrequency)")
	failedMountOnTimeout := fs.Bool("failed-mount-on-timeout", false, "record a FailedMount event when a pod's volumes are not mounted within 2m3s, as kubelets up to v1.27 did (v1.28 and later, v1.37.2 included, record none)")
	timingsFlag := fs.String("runtime-timings", "", "JSON file of the container runtime's operation timings to draw from (written by `strandlab runtime-timings`); empty: the ones built in, measured on kind; \"none\": an instant runtime with no PLEG delay")
	printSource := fs.Bool("runtime-source", false, "print where the runtime timings (--runtime-timings) were measured, and exit")
	seed := fs.Uint64("seed", 0, "seed of the runtime's draws (strandlab passes the run's seed; the node's --pod-cidr-index is mixed in)")
	klog.InitFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kubelet-sim --node NAME=KUBECONFIG [--csi-driver-name D --csi-endpoint SOCKET --root-dir DIR] [-v N]\n\n"+
			"The simulated kubelet of one node for strandlab: registers the node, heartbeats,\n"+
			"runs the lifecycle of the pods bound to it, and mounts their volumes with the\n"+
			"kubelet's own volume manager and CSI plugin.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	if *printSource {
		rt, err := containerRuntime(*timingsFlag, *seed, *cidrIndex)
		if err != nil {
			return usageError{fmt.Errorf("--runtime-timings: %w", err)}
		}
		if rt == nil {
			fmt.Println("none: an instant runtime")
		} else {
			fmt.Println(rt.Source())
		}
		return nil
	}
	name, kubeconfig, ok := strings.Cut(*nodeSpec, "=")
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	case !ok || name == "" || kubeconfig == "":
		return usageError{fmt.Errorf("--node %q: want NAME=KUBECONFIG", *nodeSpec)}
	case (*driverName == "") != (*endpoint == "") || (*driverName == "") != (*rootDir == ""):
		return usageError{fmt.Errorf("--csi-driver-name, --csi-endpoint and --root-dir go together")}
	case *statusEvery <= 0:
		return usageError{fmt.Errorf("--node-status-update-frequency must be positive")}
	case *reportEvery <= 0:
		return usageError{fmt.Errorf("--node-status-report-frequency must be positive")}
	}
	rt, err := containerRuntime(*timingsFlag, *seed, *cidrIndex)
	if err != nil {
		return usageError{fmt.Errorf("--runtime-timings: %w", err)}
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return usageError{fmt.Errorf("--node %s: %w", name, err)}
	}
	// The kubelet's defaults (KubeletConfiguration kubeAPIQPS/kubeAPIBurst,
	// and contentType protobuf, accepting JSON, as
	// cmd/kubelet/app.setContentTypeForClient sets them).
	cfg.QPS, cfg.Burst = 50, 100
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.UserAgent = "kubelet-sim/" + name
	if rt.APIRequests() {
		// Every client of the node, the heartbeat's too, as the real
		// kubelet's histogram counts them all.
		cfg.Wrap(apilatency.Wrap(rt))
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return usageError{fmt.Errorf("--node %s: %w", name, err)}
	}
	heartbeat, err := kubernetes.NewForConfig(heartbeatConfig(cfg, *statusEvery, node.DefaultNodeLeaseDurationSeconds))
	if err != nil {
		return usageError{fmt.Errorf("--node %s: %w", name, err)}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// One informer of the node for the status loop and the volume host, as
	// kubelet.NewMainKubelet shares its nodeLister.
	nodeInformers := volumes.NodeInformers(client, name)
	nodeLister := nodeInformers.Core().V1().Nodes().Lister()
	var vols node.VolumeManager
	if *driverName != "" {
		csiEndpoint := *endpoint
		if rt.CSICalls() {
			// The CSI plugin dials the proxy, which holds the volume calls to
			// kind's times; an abstract socket, so no path to clean up or to
			// keep under the socket path's length limit.
			p, err := csilatency.Start(ctx, fmt.Sprintf("@kubelet-sim-csi-%d-%s", os.Getpid(), name), *endpoint, rt)
			if err != nil {
				return err
			}
			defer p.Stop()
			csiEndpoint = p.Endpoint
		}
		m, err := volumes.New(volumes.Config{NodeName: name, Client: client, DriverName: *driverName, Endpoint: csiEndpoint,
			RootDir: *rootDir, NodeInformers: nodeInformers})
		if err != nil {
			return usageError{err}
		}
		vols = m
	}
	sim, err := node.NewNode(node.Config{NodeName: name, Client: client, HeartbeatClient: heartbeat, KubeletVersion: *version, PodCIDRIndex: *cidrIndex,
		Volumes: vols, NodeLister: nodeLister, Runtime: rt, NodeStatusUpdateFrequency: *statusEvery, NodeStatusReportFrequency: *reportEvery,
		FailedMountOnTimeout: *failedMountOnTimeout})
	if err != nil {
		return usageError{err}
	}
	nodeInformers.Start(ctx.Done())
	defer nodeInformers.Shutdown()
	if err := sim.Run(ctx); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	return nil
}

// containerRuntime is the runtime --runtime-timings asks for, its draws
// seeded by the run's seed and the node's index.
func containerRuntime(timings string, seed uint64, nodeIndex int) (*containerruntime.Runtime, error) {
	var t *containerruntime.Timings
	var err error
	switch timings {
	case "none":
		return nil, nil
	case "":
		t, err = containerruntime.Default()
	default:
		t, err = containerruntime.Load(timings)
	}
	if err != nil {
		return nil, err
	}
	return containerruntime.New(t, seed*1_000_003+uint64(nodeIndex))
}

// minHeartbeatTimeout is the kubelet's default nodeStatusUpdateFrequency
// (KubeletConfiguration defaults), the timeout its heartbeat client has
// when the period is not set.
const minHeartbeatTimeout = 10 * time.Second

// heartbeatConfig is the node status and Lease client's configuration, as
// cmd/kubelet/app.RunKubelet makes the kubelet's heartbeat client: the
// kubelet's client without a rate limit (QPS -1), with a timeout of the
// status update period, or the Lease's duration if that is shorter.
//
// strandlab compresses the period (500 ms against the kubelet's default
// 10 s) so that status moves at the speed of its churn, but an API server's
// latency is not compressed with it: a 500 ms timeout cut every status
// update on a loaded 2-core machine and nodes never became Ready. The
// timeout exists to bound a hung request, so it is never shorter than the
// default period's (minHeartbeatTimeout).
func heartbeatConfig(cfg *rest.Config, statusEvery time.Duration, leaseSeconds int32) *rest.Config {
	hb := rest.CopyConfig(cfg)
	hb.Timeout = max(statusEvery, minHeartbeatTimeout)
	if lease := time.Duration(leaseSeconds) * time.Second; hb.Timeout > lease {
		hb.Timeout = lease
	}
	hb.QPS = -1
	return hb
}
