// Command csi-driver runs strandlab's CSI driver (internal/csidriver): a
// hostpath-like driver that needs attach, with all state in a directory shared
// by one controller instance and one node instance per (simulated) node.
//
//	csi-driver --mode controller --endpoint unix:///run/csi/ctrl.sock --state-dir /var/lib/strandlab-csi
//	csi-driver --mode node --nodeid node-1 --endpoint unix:///run/csi/node-1.sock --state-dir /var/lib/strandlab-csi
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/csidriver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stderr)
	klog.Flush()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "csi-driver:", err)
		os.Exit(1)
	}
}

// errUsage marks errors already reported together with the usage text.
var errUsage = errors.New("usage error")

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("csi-driver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoint := fs.String("endpoint", "unix:///tmp/csi.sock", "CSI endpoint: unix:///path/to/csi.sock")
	name := fs.String("drivername", csidriver.DefaultName, "CSI driver name")
	nodeID := fs.String("nodeid", "", "node ID reported by NodeGetInfo; required in node and both mode")
	stateDir := fs.String("state-dir", "", "directory holding volume state and data, shared by all instances of one driver (required)")
	modeFlag := fs.String("mode", string(csidriver.ModeBoth), "services to serve: controller, node or both")
	klog.InitFlags(fs)
	// A bad flag gets the error and a one-line synopsis; the full flag list
	// (mostly klog's) only on -h, where it does not bury the error.
	synopsis := func() {
		fmt.Fprintf(fs.Output(), "Usage: csi-driver --state-dir DIR [--mode controller|node|both] [--nodeid ID] [--endpoint unix:///path] [-v N]\nRun 'csi-driver -h' for all flags.\n")
	}
	fs.Usage = synopsis
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(fs.Output(), "\nstrandlab's CSI driver with hostpath semantics; volumes must be attached\n(ControllerPublishVolume) to a node before that node can stage them.\n\nFlags:\n")
			fs.PrintDefaults()
			return err
		}
		// The flag package already printed the error and the synopsis.
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	usageErr := func(format string, a ...any) error {
		msg := fmt.Sprintf(format, a...)
		fmt.Fprintf(stderr, "csi-driver: %s\n", msg)
		synopsis()
		return fmt.Errorf("%w: %s", errUsage, msg)
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments: %v", fs.Args())
	}
	mode, err := csidriver.ParseMode(*modeFlag)
	if err != nil {
		return usageErr("--mode: %v", err)
	}
	if *stateDir == "" {
		return usageErr("--state-dir is required")
	}
	if mode != csidriver.ModeController && *nodeID == "" {
		return usageErr("--nodeid is required in %s mode", mode)
	}

	d, err := csidriver.NewDriver(csidriver.Config{Name: *name, NodeID: *nodeID, StateDir: *stateDir, Mode: mode})
	if err != nil {
		return err
	}
	return d.Run(ctx, *endpoint)
}
