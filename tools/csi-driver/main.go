// Command csi-driver runs strandlab's CSI driver (internal/csidriver): a
// hostpath-like driver that needs attach, with all state in a directory shared
// by one controller instance and one node instance per (simulated) node.
//
//	csi-driver --mode controller --endpoint unix:///run/csi/ctrl.sock --state-dir /var/lib/strandlab-csi
//	csi-driver --mode node --nodeid node-1 --endpoint unix:///run/csi/node-1.sock --state-dir /var/lib/strandlab-csi
//
// As the node plugin of a cluster with real kubelets (kind), it registers
// itself with the kubelet and bind-mounts volumes (docs/csi-driver.md):
//
//	csi-driver --mode node --nodeid "$NODE_NAME" --state-dir /var/lib/strandlab-csi \
//	  --endpoint unix:///var/lib/kubelet/plugins/hostpath.csi.k8s.io/csi.sock \
//	  --registration-dir /var/lib/kubelet/plugins_registry --publish-mode bind
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/csidriver"
	"github.com/strandlab/strandlab/internal/fault"
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
	publishFlag := fs.String("publish-mode", string(csidriver.PublishSymlink),
		"how NodePublishVolume exposes a volume: symlink (no root; simulated kubelets) or bind (a bind mount; real kubelets, needs root); node and both mode")
	regDir := fs.String("registration-dir", "",
		"kubelet plugin registration directory, e.g. /var/lib/kubelet/plugins_registry: serve <drivername>-reg.sock there so the kubelet registers the driver; empty: no registration; node and both mode")
	kubeletPath := fs.String("kubelet-registration-path", "",
		"absolute path of the CSI socket as the kubelet sees it, told to the kubelet at registration (default: the path of --endpoint); needs --registration-dir")
	csiErrorsFlag := fs.String("csi-errors", "",
		"JSON list of fault rules (a scenario's csiErrors, docs/scenarios.md): fail or slow the matching CSI calls; each affected call is journaled in <state-dir>/faults/")
	faultSeed := fs.Uint64("fault-seed", 0, "seed of the --csi-errors draws (the scenario's seed)")
	klog.InitFlags(fs)
	// A bad flag gets the error and a one-line synopsis; the full flag list
	// (mostly klog's) only on -h, where it does not bury the error.
	synopsis := func() {
		fmt.Fprintf(fs.Output(), "Usage: csi-driver --state-dir DIR [--mode controller|node|both] [--nodeid ID] [--endpoint unix:///path]\n"+
			"                  [--publish-mode symlink|bind] [--registration-dir DIR [--kubelet-registration-path PATH]] [-v N]\nRun 'csi-driver -h' for all flags.\n")
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
	publishMode, err := csidriver.ParsePublishMode(*publishFlag)
	if err != nil {
		return usageErr("--publish-mode: %v", err)
	}
	if mode == csidriver.ModeController {
		// Flags of the node service: set in controller mode they show a
		// mistaken deployment rather than something to ignore.
		var nodeOnly []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "publish-mode", "registration-dir", "kubelet-registration-path":
				nodeOnly = append(nodeOnly, "--"+f.Name)
			}
		})
		if len(nodeOnly) > 0 {
			return usageErr("%s: only in node or both mode, not in controller mode", strings.Join(nodeOnly, ", "))
		}
	}
	if *kubeletPath != "" {
		if *regDir == "" {
			return usageErr("--kubelet-registration-path needs --registration-dir")
		}
		if !filepath.IsAbs(*kubeletPath) {
			return usageErr("--kubelet-registration-path %q: must be an absolute path", *kubeletPath)
		}
	}

	var csiErrors []fault.CSIError
	if *csiErrorsFlag != "" {
		dec := json.NewDecoder(strings.NewReader(*csiErrorsFlag))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&csiErrors); err != nil {
			return usageErr("--csi-errors: %v", err)
		}
		if err := fault.ValidateCSIErrors(csiErrors); err != nil {
			return usageErr("--csi-errors: %v", err)
		}
	}

	d, err := csidriver.NewDriver(csidriver.Config{
		Name: *name, NodeID: *nodeID, StateDir: *stateDir, Mode: mode, PublishMode: publishMode,
		RegistrationDir: *regDir, KubeletRegistrationPath: *kubeletPath,
		CSIErrors: csiErrors, FaultSeed: *faultSeed,
	})
	if err != nil {
		return err
	}
	return d.Run(ctx, *endpoint)
}
