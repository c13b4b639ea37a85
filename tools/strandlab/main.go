// Command strandlab runs stranded-volume experiments (see README.md):
//
//	strandlab run --scenario scenarios/seed-122413.yaml,scenarios/control.yaml
//	strandlab down /tmp/strandlab-smoke-stock-123
//	strandlab run --provider existing --kubeconfig F --cluster-owner-consent --scenario scenarios/existing-control.yaml
//	strandlab down --kubeconfig F --namespace strandlab
//	strandlab merge _output/reports/<run-a> _output/reports/<run-b>
//	strandlab shards --shards 8
//	strandlab bench --cycles 500
//	strandlab calibrate --scenario scenarios/seed-122413.yaml --seeds 1-10 --cycles 1
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/existing"
	"github.com/strandlab/strandlab/internal/cluster/kind"
	"github.com/strandlab/strandlab/internal/cluster/local"
	"github.com/strandlab/strandlab/internal/kcmbuild"
	"github.com/strandlab/strandlab/internal/ownership"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/report/render"
	"github.com/strandlab/strandlab/internal/runner"
	"github.com/strandlab/strandlab/internal/scenario"
	"github.com/strandlab/strandlab/internal/upstream"
)

func main() {
	os.Exit(execute())
}

// exitInterrupted is returned when the run was stopped by a signal: the
// partial report is written, but the run did not complete.
const exitInterrupted = 130

func execute() int {
	root := &cobra.Command{
		Use:           "strandlab",
		Short:         "Chaos/e2e harness measuring volumes stranded by the attach/detach controller",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	root.PersistentFlags().AddGoFlag(klogFlags.Lookup("v"))

	root.AddCommand(runCommand(), downCommand(), validateCommand(), kcmCommand(), mergeCommand(), planCommand(), shardsCommand(), benchCommand(), calibrateCommand(), runtimeTimingsCommand())
	err := root.Execute()
	if err != nil {
		fmt.Fprintln(os.Stderr, "strandlab:", err)
	}
	klog.Flush()
	return exitCode(err)
}

// exitError is an error that exits with its own status instead of 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode maps a command's error to the exit status: 0 without one, an
// exitError's own status, and 1 for any other error (the harness failed).
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		return 1
	}
}

// exitUnmet is returned by `run --check` when a build's outcome is outside
// its scenario's expected band, and by `merge --check` when a pooled build's
// is.
const exitUnmet = 3

// interruptible is parent cancelled at the first SIGINT or SIGTERM, and a
// teardown context cancelled at the second: the run stops at the first and
// tears its clusters down; the second cuts that teardown short (processes
// are killed at once) instead of being swallowed or killing strandlab with
// its clusters still up. stop releases the signals.
func interruptible(parent context.Context, progress io.Writer) (ctx, teardown context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	teardown, cutShort := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			fmt.Fprintln(progress, ">> interrupted: stopping and tearing down (interrupt again to cut the teardown short)")
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			fmt.Fprintln(progress, ">> interrupted again: cutting the teardown short")
			cutShort()
		case <-done:
		}
	}()
	return ctx, teardown, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
		cutShort()
	}
}

func runCommand() *cobra.Command {
	var (
		opts      runner.Options
		scenarios []string
		builds    string
		seed      int64
		check     bool
		ext       existingFlags
		verdict   bool
		design    = report.DefaultSequentialDesign()
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run scenarios and write their reports",
		Long: `Run one or more scenarios: for each controller build, start a cluster, create
the workload, run the delete/recreate cycles, and write
<output>/reports/<run-id>/report.{json,md} (also copied to reports/latest/),
one report per scenario. Every scenario is validated before any cluster
starts. The reports' paths are printed last, one per line.

Exit status: 0 when the runs completed (whatever they measured), 130 when
interrupted (a partial report is written), 3 with --check when a build's
outcome is outside the scenario's expect band, 1 when the harness itself
failed (a report.json that cannot be read back included).

--provider existing runs on a cluster strandlab did not create, the one
--kubeconfig (or KUBECONFIG) names, and only with --cluster-owner-consent:
it creates the namespace strandlab (labelled
app.kubernetes.io/managed-by=strandlab; refused if it exists), churns the
scenario's StatefulSets there with the cluster's own controller, and at the
end deletes the namespace and waits until its volumes and their
VolumeAttachments are gone. It refuses scenarios with proxy faults
(proxy.rules ...), pinning (scheduling.pinning), controller builds other
than stock (builds) or simulated-kubelet settings, naming the field, before
anything is touched. See docs/existing.md.`,
		Example: `  strandlab run --scenario scenarios/seed-122413.yaml
  strandlab run --scenario scenarios/seed-122413.yaml,scenarios/control.yaml --builds stock
  strandlab run --scenario scenarios/soak.yaml --cycles 5000 --seed 7
  strandlab run --scenario scenarios/existing-control.yaml --provider existing --kubeconfig ~/.kube/lab --cluster-owner-consent`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if builds != "" {
				opts.Builds = strings.Split(builds, ",")
			}
			if cmd.Flags().Changed("seed") {
				opts.Seed = &seed
			}
			if verdict {
				opts.UntilVerdict = &design
			}
			if len(scenarios) == 0 {
				return errors.New("--scenario: at least one scenario file is required")
			}
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			if opts.RepoRoot, err = upstream.RepoRoot(wd); err != nil {
				return err
			}
			if !filepath.IsAbs(opts.OutputDir) {
				opts.OutputDir = filepath.Join(opts.RepoRoot, opts.OutputDir)
			}
			if opts.RuntimeTimings != "" {
				// kubelet-sim runs in another directory.
				if opts.RuntimeTimings, err = filepath.Abs(opts.RuntimeTimings); err != nil {
					return fmt.Errorf("--runtime-timings: %w", err)
				}
			}
			opts.Progress = os.Stderr
			opts.Providers = providers(opts.RepoRoot, os.Stderr, ext.provider(os.Getenv("KUBECONFIG"), os.Stderr))
			// All scenarios are checked before the first cluster starts.
			prepared := make([]*scenario.Scenario, len(scenarios))
			for i, path := range scenarios {
				o := opts
				o.ScenarioPath = path
				if prepared[i], err = runner.Prepare(cmd.Context(), o); err != nil {
					return err
				}
			}
			designs, err := runDesigns(cmd.Flags().Changed, prepared, opts.UntilVerdict, design)
			if err != nil {
				return err
			}
			ctx, teardown, stop := interruptible(cmd.Context(), os.Stderr)
			defer stop()
			opts.Teardown = teardown
			var dirs []string
			defer func() {
				for _, d := range dirs {
					fmt.Println(filepath.Join(d, "report.json"))
				}
			}()
			for i, sc := range prepared {
				o := opts
				o.ScenarioPath = scenarios[i]
				o.Keep = opts.Keep && i == len(prepared)-1
				o.UntilVerdict = designs[i]
				if len(prepared) > 1 {
					fmt.Fprintf(os.Stderr, "\n== scenario %s (%d of %d)\n", sc.Name, i+1, len(prepared))
				}
				dir, err := runner.Run(ctx, o, sc)
				if dir != "" {
					dirs = append(dirs, dir)
					if rep, rerr := report.Read(filepath.Join(dir, "report.json")); rerr == nil {
						fmt.Fprintf(os.Stderr, "\n%s\n%s", sc.Name, render.Table(rep))
						fmt.Fprint(os.Stderr, render.Verdicts(rep))
					}
				}
				if ctx.Err() != nil {
					// Whatever the phase: the run was stopped by the user.
					msg := "interrupted; partial report written"
					if err != nil {
						msg += " (" + err.Error() + ")"
					}
					return &exitError{exitInterrupted, errors.New(msg)}
				}
				if err != nil {
					return err
				}
			}
			reports := make([]string, len(dirs))
			for i, d := range dirs {
				reports[i] = filepath.Join(d, "report.json")
			}
			return checkReports(reports, check, os.Stderr)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&scenarios, "scenario", []string{"scenarios/seed-122413.yaml", "scenarios/control.yaml"}, "scenario files, comma-separated or repeated")
	f.StringVar(&opts.Provider, "provider", "", "cluster provider: local|kind|existing (default: the scenario's)")
	f.StringVar(&builds, "builds", "", "comma-separated controller builds to compare (default: the scenario's)")
	f.IntVar(&opts.Cycles, "cycles", -1, "number of delete/recreate cycles (default: the scenario's)")
	f.Int64Var(&seed, "seed", 0, "seed for the sequence of actions (default: the scenario's)")
	f.BoolVar(&opts.Keep, "keep", false, "leave the (last) cluster running and print its kubeconfig path")
	f.BoolVar(&opts.RequestsByClient, "requests-by-client", false, "count every client's API requests per cycle (local provider; a /metrics scrape of the API server before and after the churn, which moves the first cycle's timing: docs/performance.md)")
	f.BoolVar(&check, "check", false, "exit 3 when a build's outcome is outside the scenario's expect band (CI smoke checks)")
	f.StringVar(&opts.OutputDir, "output", "_output", "output directory (relative to the repository root)")
	f.StringVar(&opts.CSIDeployment, "csi-driver", "", "the CSI driver the cluster runs: strandlab (default) or upstream (kind, 1 worker, images from registry.k8s.io: docs/kind.md)")
	f.StringVar(&opts.RuntimeTimings, "runtime-timings", "", "local provider: the timings file kubelet-sim draws its container runtime from (strandlab runtime-timings writes one from kind reports; default: kubelet-sim's built-in, measured on kind)")
	f.IntVar(&opts.KubeletVerbosity, "kubelet-verbosity", 0, "the kubelets' log verbosity, 0-10 (kind: the kubelet's -v, 4 logs each pod's syncs and 3 each status patch, in the run's logs/kind; local: kubelet-sim's -v); for reading a run's kubelet logs, not for measuring: it costs the kubelets CPU")
	f.BoolVar(&verdict, "until-verdict", false, "run stock and the other builds in rounds (--cycles each: a round's cycles), fresh clusters and the next seed each round, until a sequential test of each build against stock decides: less, more, or no difference larger than --verdict-margin (docs/statistics.md). A scenario with untilVerdict (seed-122413) runs so when neither this flag nor --cycles is given; --until-verdict=false runs it once")
	f.Float64Var(&design.Alpha, "verdict-alpha", design.Alpha, "--until-verdict: the chance of each kind of wrong verdict, however many rounds are looked at (a scenario's untilVerdict.alpha replaces the default when the scenario goes in rounds without --until-verdict)")
	f.Float64Var(&design.Margin, "verdict-margin", design.Margin, "--until-verdict: the difference of stranding-episode rates (per cycle) that 'no difference' rules out (0.005: 5 per 1,000 cycles; a scenario's untilVerdict.margin replaces the default when the scenario goes in rounds without --until-verdict)")
	f.IntVar(&design.MaxCycles, "max-cycles", 0, fmt.Sprintf("--until-verdict: stop undecided before a build would run more cycles than this (default: %d rounds' worth)", runner.DefaultMaxRounds))
	f.StringVar(&opts.RunIDSuffix, "run-id-suffix", "", "append -SUFFIX to the run id (and report directory): shards of one scenario run in the same second stay distinct for strandlab merge")
	ext.register(cmd)
	return cmd
}

// runDesigns is each prepared scenario's design: --until-verdict's
// (explicit, for all of them); with neither --until-verdict nor --cycles
// given, the scenario's untilVerdict (runner.ScenarioDesign) with the
// verdict flags given over it; nil for a fixed run. A verdict flag given
// to a run with no run until a verdict is refused, as it would say nothing.
func runDesigns(changed func(flag string) bool, prepared []*scenario.Scenario, explicit *report.SequentialDesign, fromFlags report.SequentialDesign) ([]*report.SequentialDesign, error) {
	// The flags that shape a run until a verdict, and what each sets.
	verdictFlags := []struct {
		name string
		set  func(d *report.SequentialDesign)
	}{
		{"verdict-alpha", func(d *report.SequentialDesign) { d.Alpha = fromFlags.Alpha }},
		{"verdict-margin", func(d *report.SequentialDesign) { d.Margin = fromFlags.Margin }},
		{"max-cycles", func(d *report.SequentialDesign) { d.MaxCycles = fromFlags.MaxCycles }},
	}
	designs := make([]*report.SequentialDesign, len(prepared))
	sequential := explicit != nil
	for i, sc := range prepared {
		designs[i] = explicit
		if changed("until-verdict") || changed("cycles") {
			continue
		}
		d := runner.ScenarioDesign(sc)
		if d == nil {
			continue
		}
		for _, f := range verdictFlags {
			if changed(f.name) {
				f.set(d)
			}
		}
		if err := runner.CheckUntilVerdict(*d, sc.Builds); err != nil {
			return nil, fmt.Errorf("%s (untilVerdict): %w", sc.Name, err)
		}
		designs[i], sequential = d, true
	}
	if !sequential {
		for _, f := range verdictFlags {
			if changed(f.name) {
				return nil, fmt.Errorf("--%s: only with --until-verdict, or a scenario with untilVerdict run without --cycles", f.name)
			}
		}
	}
	return designs, nil
}

// existingFlags are run's flags for the existing provider.
type existingFlags struct {
	kubeconfig string
	consent    bool
}

func (e *existingFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&e.kubeconfig, "kubeconfig", "", "--provider existing: the cluster's kubeconfig, its current context (default: $KUBECONFIG; never ~/.kube/config)")
	f.BoolVar(&e.consent, strings.TrimPrefix(existing.ConsentFlag, "--"), false,
		"--provider existing: the cluster's owner agrees that strandlab creates the namespace strandlab there, churns StatefulSet pods and their volumes in it, and deletes it afterwards (make: CLUSTER_OWNER_CONSENT=1)")
}

// provider is the existing provider these flags configure; the flag wins
// over KUBECONFIG (env).
func (e *existingFlags) provider(env string, progress io.Writer) *existing.Provider {
	kubeconfig := e.kubeconfig
	if kubeconfig == "" {
		kubeconfig = env
	}
	return &existing.Provider{Kubeconfig: kubeconfig, Consent: e.consent, Progress: progress}
}

// checkReports reads the reports a run wrote and prints every unmet
// expectation to w; with check, any unmet one is an error exiting exitUnmet.
// A report that cannot be read or decoded is a harness failure (exit 1),
// with or without check: the run's outcome is then unknown, not met.
func checkReports(reports []string, check bool, w io.Writer) error {
	var unmet []string
	var errs []error
	for _, path := range reports {
		u, err := expectationsUnmet(path)
		unmet = append(unmet, u...)
		errs = append(errs, err)
	}
	for _, u := range unmet {
		fmt.Fprintln(w, "expectation not met:", u)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if check && len(unmet) > 0 {
		return &exitError{exitUnmet, fmt.Errorf("%d expectation(s) not met (--check)", len(unmet))}
	}
	return nil
}

// expectationsUnmet lists, from a written report, each build's unmet
// expectations as "scenario/build: what".
func expectationsUnmet(reportJSON string) ([]string, error) {
	r, err := report.Read(reportJSON)
	if err != nil {
		return nil, fmt.Errorf("cannot check the run's outcome: %w", err)
	}
	var out []string
	for _, b := range r.Builds {
		if b.Expectation == nil {
			continue
		}
		for _, u := range b.Expectation.Unmet {
			out = append(out, fmt.Sprintf("%s/%s: %s", r.Scenario, b.Name, u))
		}
	}
	return out, nil
}

// providers are the cluster providers strandlab can run on.
func providers(repoRoot string, progress io.Writer, ext *existing.Provider) *cluster.Registry {
	return cluster.NewRegistry(
		&local.Provider{RepoRoot: repoRoot, Progress: progress},
		&kind.Provider{RepoRoot: repoRoot, Progress: progress, NodeImage: os.Getenv(kind.NodeImageEnv)},
		ext,
	)
}

// downDir stops the kept cluster whose state directory is dir, after its
// provider (the one its marker names, through the registry) has proved the
// directory (and the cluster) are strandlab's own; with dryRun it prints
// the plan and does nothing.
func downDir(ctx context.Context, registry *cluster.Registry, dir string, dryRun bool, out io.Writer) error {
	m, err := ownership.ReadMarker(dir, "")
	if err != nil {
		return fmt.Errorf("%w: nothing stopped, nothing removed", err)
	}
	provider, err := registry.Provider(m.Provider)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", dir, ownership.ErrNotOurs, err)
	}
	plan, err := provider.PlanDown(ctx, dir)
	if err != nil {
		return err
	}
	fmt.Fprint(out, plan)
	if dryRun {
		return nil
	}
	return provider.Down(ctx, dir)
}

func downCommand() *cobra.Command {
	var kubeconfig, namespace string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "down DIR | down --kubeconfig FILE [--namespace NS]",
		Short: "Stop a cluster left running with --keep (DIR is printed by run), or remove a kept existing-provider run's namespace",
		Long: `Stop a local or kind cluster left running with --keep: DIR is the state
directory run printed. down acts only on what it can prove is strandlab's own:
DIR must hold the marker strandlab wrote when it created it (with its run
token), the run that created it must have ended, only processes whose pid
still names the recorded process (same start time and executable) are
stopped, and a kind cluster is deleted only if it mounts DIR (so a kind
cluster strandlab did not create is never touched). It prints what it stops
and removes; --dry-run prints that and does nothing.

With --kubeconfig (the existing provider), remove what a kept or killed run
left on that cluster: the namespace (only if strandlab created it: label
app.kubernetes.io/managed-by=strandlab) with everything in it, then wait
until its PersistentVolumes and their VolumeAttachments are gone (at most
5 minutes; what is left is named).`,
		Example: `  strandlab down /tmp/strandlab-smoke-stock-123
  strandlab down --kubeconfig ~/.kube/lab --namespace strandlab`,
		Args: func(cmd *cobra.Command, args []string) error {
			if kubeconfig != "" {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if kubeconfig != "" {
				return existing.Down(cmd.Context(), kubeconfig, namespace, os.Stderr)
			}
			return downDir(cmd.Context(), providers("", io.Discard, &existing.Provider{}), args[0], dryRun, os.Stdout)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what down would stop and remove, and do nothing")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "the existing provider's cluster: remove a kept run's namespace there instead of stopping DIR")
	cmd.Flags().StringVar(&namespace, "namespace", runner.Namespace, "with --kubeconfig: the run's namespace")
	return cmd
}

// knownBuilds are the controller builds of the repository strandlab runs
// in (stock alone outside one): what a scenario's expect keys may name.
func knownBuilds() []string {
	wd, err := os.Getwd()
	if err != nil {
		return []string{kcmbuild.Stock}
	}
	root, err := upstream.RepoRoot(wd)
	if err != nil {
		return []string{kcmbuild.Stock}
	}
	return kcmbuild.Names(root)
}

func validateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check scenario files without starting anything",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			// Only what each provider can do is asked of the registry:
			// nothing here needs Docker or a kubeconfig.
			registry := providers("", io.Discard, &existing.Provider{})
			for _, f := range args {
				sc, err := scenario.Load(f)
				if err == nil {
					err = sc.CheckExpectKeys(knownBuilds())
					if err != nil {
						err = fmt.Errorf("scenario %s: %w", f, err)
					}
				}
				if err == nil {
					if caps, lookupErr := registry.Capabilities(sc.Cluster.Provider); lookupErr != nil {
						err = fmt.Errorf("scenario %s: cluster.provider: %w", f, lookupErr)
					} else if refused := caps.CheckScenario(sc); refused != nil {
						err = fmt.Errorf("scenario %s: provider %q cannot run it:\n%w", f, sc.Cluster.Provider, refused)
					}
				}
				if err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Printf("%s: ok\n", f)
			}
			return errors.Join(errs...)
		},
	}
}
