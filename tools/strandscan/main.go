// Command strandscan reports volumes stranded by the attach/detach controller,
// and safety violations, in a live cluster (docs/strandscan.md). It only
// reads, with the RBAC in manifests/strandscan/rbac.yaml:
//
//	strandscan --kubeconfig ~/.kube/config -o json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/scan"
)

// Exit codes, documented in --help: scripts and alerts key on them.
const (
	exitClean    = 0
	exitFindings = 1
	exitError    = 2
)

// requestTimeout bounds every API call, so an unreachable cluster fails in
// seconds instead of hanging until --timeout.
const requestTimeout = 15 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	kubeconfig string
	context    string
	namespace  string
	threshold  time.Duration
	output     string
	timeout    time.Duration
}

func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	code := exitClean
	cmd := &cobra.Command{
		Use:   "strandscan",
		Short: "Report volumes stranded by the attach/detach controller, and safety violations (read-only)",
		Long: `strandscan lists pods, nodes, PVCs, PVs, VolumeAttachments and CSIDrivers and
reports, with the same detector as the strandlab harness (docs/design.md):
  stranded: a pod's CSI volume is attached (VolumeAttachment attached=true) but missing from its node's status.volumesAttached for longer than --threshold.
  safety violation: the volume is listed on the node without a live attached VolumeAttachment, or detached while the pod still has it mounted.
It only reads (RBAC: manifests/strandscan/rbac.yaml). See docs/strandscan.md.

Exit status: 0 no findings, 1 findings, 2 could not scan (bad flag,
unreachable cluster, missing permission, a namespace that does not exist).`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			r, err := run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if o.output == "json" {
				err = scan.WriteJSON(stdout, r)
			} else {
				err = scan.WriteTable(stdout, r)
			}
			if err != nil {
				return fmt.Errorf("writing the report: %w", err)
			}
			if len(r.Findings) > 0 {
				code = exitFindings
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)")
	f.StringVar(&o.context, "context", "", "kubeconfig context (default: the current context)")
	f.StringVarP(&o.namespace, "namespace", "n", "", "scan pods and PVCs of this namespace only (default: all namespaces)")
	f.DurationVar(&o.threshold, "threshold", scan.DefaultThreshold, "report a stranded volume only once it has held this long")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "time limit for the whole scan, re-checks included")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	f.AddGoFlag(klogFlags.Lookup("v"))

	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	klog.Flush()
	if err != nil {
		fmt.Fprintln(stderr, "strandscan:", err)
		return exitError
	}
	return code
}

func (o options) validate() error {
	switch {
	case o.output != "table" && o.output != "json":
		return fmt.Errorf("invalid --output %q: want table or json", o.output)
	case o.threshold < 0:
		return fmt.Errorf("invalid --threshold %v: must not be negative", o.threshold)
	case o.timeout <= o.threshold:
		// A candidate younger than the threshold is re-checked for up to
		// the threshold; a shorter timeout could never confirm it.
		return fmt.Errorf("invalid --timeout %v: must exceed --threshold %v", o.timeout, o.threshold)
	}
	return nil
}

func run(ctx context.Context, o options) (*scan.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	ctx = klog.NewContext(ctx, klog.Background().WithName("strandscan"))

	rules := clientcmd.NewDefaultClientConfigLoadingRules() // $KUBECONFIG, ~/.kube/config
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the client configuration (--kubeconfig %q, --context %q): %w", o.kubeconfig, o.context, err)
	}
	// A scan lists six resources and may re-check a few objects every few
	// seconds: client-go's default 5 QPS would make it crawl.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Timeout = requestTimeout
	cfg.UserAgent = "strandscan"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the client for %s: %w", cfg.Host, err)
	}
	klog.FromContext(ctx).V(1).Info("Scanning", "server", cfg.Host, "namespace", o.namespace, "threshold", o.threshold)

	r, err := scan.Scan(ctx, client, scan.Options{Namespace: o.namespace, Threshold: o.threshold, Cluster: serverHost(cfg)})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (the scan did not finish within --timeout %v)", err, o.timeout)
		}
		return nil, explain(err, cfg.Host)
	}
	return r, nil
}

// explain adds what an operator should check to a scan error.
func explain(err error, server string) error {
	var apiErr *scan.APIError
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w\nstrandscan needs get/list/watch on pods, nodes, persistentvolumeclaims, persistentvolumes, volumeattachments and csidrivers, and get on namespaces for -n: apply manifests/strandscan/rbac.yaml and use its ServiceAccount (docs/strandscan.md)", err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%w\nthe API server %s rejected the credentials: check --kubeconfig and --context", err, server)
	case errors.As(err, &apiErr) && !isStatus(err):
		return fmt.Errorf("%w\ncannot reach the API server %s: check --kubeconfig and --context", err, server)
	}
	return err
}

// isStatus: the API server answered (with an error status), so it is reachable.
func isStatus(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}

// serverHost names the cluster in the report: the API server's host:port.
func serverHost(cfg *rest.Config) string {
	if u, err := url.Parse(cfg.Host); err == nil && u.Host != "" {
		return u.Host
	}
	return cfg.Host
}
