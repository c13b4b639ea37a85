// Command pin-extender is strandlab's pinning scheduler extender: it keeps
// each StatefulSet ordinal on one node (see internal/extender). kube-scheduler
// calls it through an extender entry with filterVerb "filter" and
// nodeCacheCapable true.
//
//	pin-extender --bind 127.0.0.1:8888 --kubeconfig k.kubeconfig --config pinning.json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/strandlab/strandlab/internal/extender"
	"github.com/strandlab/strandlab/internal/pinning"
)

func main() {
	err := run()
	switch {
	case errors.Is(err, flag.ErrHelp):
		// -h/--help printed the flags: asked for, so not a failure.
	case err != nil:
		fmt.Fprintln(os.Stderr, "pin-extender:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("pin-extender", flag.ContinueOnError)
	bind := fs.String("bind", "127.0.0.1:8888", "address to serve the extender on")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (needed for sticky pinning)")
	configFile := fs.String("config", "", "pinning configuration (YAML or JSON: static, sticky, configMapName, latency)")
	klog.InitFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	var cfg pinning.Config
	if *configFile != "" {
		data, err := os.ReadFile(*configFile)
		if err != nil {
			return err
		}
		if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
			return fmt.Errorf("--config %s: %w", *configFile, err)
		}
	}
	var client kubernetes.Interface
	if *kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err != nil {
			return fmt.Errorf("--kubeconfig: %w", err)
		}
		rc.QPS, rc.Burst = 50, 100
		if client, err = kubernetes.NewForConfig(rc); err != nil {
			return err
		}
	}
	ext, err := extender.New(cfg, client)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *bind)
	if err != nil {
		return fmt.Errorf("--bind: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: ext.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errs := make(chan error, 2)
	go func() { errs <- ext.Run(ctx) }()
	go func() { errs <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errs:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
