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
	"strings"
	"sync"
	"syscall"

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
		sim, err := kubeletsim.NewNode(kubeletsim.Config{NodeName: name, Client: client, KubeletVersion: *version, PodCIDRIndex: i + 1})
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
