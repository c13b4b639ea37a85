// Command kubelet-sim runs strandlab's simulated kubelets: one process serving
// several nodes, each talking to the API server with its own node identity.
//
//	kubelet-sim --node node-1=/path/node-1.kubeconfig --node node-2=/path/node-2.kubeconfig
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/kubeletsim"
)

type nodeFlags []string

func (f *nodeFlags) String() string     { return strings.Join(*f, ",") }
func (f *nodeFlags) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	var nodes nodeFlags
	fs := flag.NewFlagSet("kubelet-sim", flag.ExitOnError)
	fs.Var(&nodes, "node", "NAME=KUBECONFIG of a node to serve (repeatable); the kubeconfig must authenticate as system:node:NAME")
	version := fs.String("kubelet-version", "v1.37.2", "kubelet version reported in node status")
	driverName := fs.String("csi-driver-name", "", "CSI driver whose volumes the nodes attach and mount (empty: pods have no attachable volumes)")
	socketDir := fs.String("csi-socket-dir", "", "directory holding each node's CSI node plugin socket, <dir>/<node>.sock; kubelet state goes to <dir>/kubelet/<node>")
	statusEvery := fs.Duration("node-status-update-frequency", kubeletsim.DefaultNodeStatusUpdateFrequency, "how often each node writes its status (KubeletConfiguration nodeStatusUpdateFrequency)")
	reportEvery := fs.Duration("node-status-report-frequency", kubeletsim.DefaultNodeStatusReportFrequency, "how often each node writes its status when nothing changed (KubeletConfiguration nodeStatusReportFrequency)")
	failedMountOnTimeout := fs.Bool("failed-mount-on-timeout", false, "record a FailedMount event when a pod's volumes are not mounted within 2m3s, as kubelets up to v1.27 did (v1.28 and later, v1.37.2 included, record none)")
	klog.InitFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kubelet-sim --node NAME=KUBECONFIG [--node ...] [-v N]\n\nSimulated kubelets for strandlab: registers the nodes, heartbeats, and runs\nthe lifecycle of the pods bound to them.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	if len(nodes) == 0 {
		fmt.Fprintln(os.Stderr, "kubelet-sim: at least one --node NAME=KUBECONFIG is required")
		os.Exit(2)
	}
	if (*driverName == "") != (*socketDir == "") {
		fmt.Fprintln(os.Stderr, "kubelet-sim: --csi-driver-name and --csi-socket-dir go together")
		os.Exit(2)
	}
	if *statusEvery <= 0 {
		fmt.Fprintln(os.Stderr, "kubelet-sim: --node-status-update-frequency must be positive")
		os.Exit(2)
	}
	if *reportEvery <= 0 {
		fmt.Fprintln(os.Stderr, "kubelet-sim: --node-status-report-frequency must be positive")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var sims []*kubeletsim.Node
	for i, spec := range nodes {
		name, path, ok := strings.Cut(spec, "=")
		if !ok || name == "" || path == "" {
			fmt.Fprintf(os.Stderr, "kubelet-sim: --node %q: want NAME=KUBECONFIG\n", spec)
			os.Exit(2)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kubelet-sim: --node %s: %v\n", name, err)
			os.Exit(2)
		}
		// The kubelet's defaults (KubeletConfiguration kubeAPIQPS/kubeAPIBurst).
		cfg.QPS, cfg.Burst = 50, 100
		cfg.UserAgent = "kubelet-sim/" + name
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kubelet-sim: --node %s: %v\n", name, err)
			os.Exit(2)
		}
		var volumes kubeletsim.VolumeManager
		if *driverName != "" {
			// grpc.NewClient connects lazily: the driver may start after us.
			conn, err := grpc.NewClient("unix://"+filepath.Join(*socketDir, name+".sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				fmt.Fprintf(os.Stderr, "kubelet-sim: --node %s: CSI socket: %v\n", name, err)
				os.Exit(2)
			}
			defer conn.Close()
			volumes = kubeletsim.NewCSIVolumeManager(name, *driverName, filepath.Join(*socketDir, "kubelet", name), client, csi.NewNodeClient(conn))
		}
		sim, err := kubeletsim.NewNode(kubeletsim.Config{NodeName: name, Client: client, KubeletVersion: *version, PodCIDRIndex: i + 1,
			Volumes: volumes, NodeStatusUpdateFrequency: *statusEvery, NodeStatusReportFrequency: *reportEvery,
			FailedMountOnTimeout: *failedMountOnTimeout})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		sims = append(sims, sim)
	}

	var wg sync.WaitGroup
	errs := make(chan error, len(sims))
	for _, sim := range sims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sim.Run(ctx); err != nil {
				errs <- err
				stop()
			}
		}()
	}
	wg.Wait()
	close(errs)
	failed := false
	for err := range errs {
		klog.ErrorS(err, "Node failed")
		failed = true
	}
	klog.Flush()
	if failed {
		os.Exit(1)
	}
}
