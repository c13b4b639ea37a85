// Command strandlab runs stranded-volume experiments (see README.md):
//
//	strandlab run --scenario scenarios/smoke.yaml
//	strandlab down /tmp/strandlab-smoke-stock-123
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/cluster/local"
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

	code := 0
	root.AddCommand(runCommand(&code), downCommand(), validateCommand())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strandlab:", err)
		klog.Flush()
		if code != 0 {
			return code
		}
		return 1
	}
	klog.Flush()
	return code
}

func runCommand(code *int) *cobra.Command {
	var (
		opts   runner.Options
		builds string
		seed   int64
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run a scenario and write the report",
		Long: `Run a scenario: for each controller build, start a cluster, create the
workload, run the delete/recreate cycles, and write
<output>/reports/<run-id>/report.{json,md} (also copied to reports/latest/).
The report's path is printed as the last line. Exit status: 0 when the run
completed (whatever it measured), 130 when interrupted (a partial report is
written), 1 when the harness itself failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if builds != "" {
				opts.Builds = strings.Split(builds, ",")
			}
			if cmd.Flags().Changed("seed") {
				opts.Seed = &seed
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
			opts.Progress = os.Stderr
			sc, err := runner.Prepare(opts)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			dir, err := runner.Run(ctx, opts, sc)
			if dir != "" {
				if data, rerr := os.ReadFile(filepath.Join(dir, "report.md")); rerr == nil {
					fmt.Fprintln(os.Stderr)
					fmt.Fprint(os.Stderr, tableOf(string(data)))
				}
			}
			if ctx.Err() != nil && err == nil {
				*code = exitInterrupted
				err = errors.New("interrupted; partial report written")
			}
			if dir != "" {
				defer fmt.Println(filepath.Join(dir, "report.json"))
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.ScenarioPath, "scenario", "scenarios/smoke.yaml", "scenario file")
	f.StringVar(&opts.Provider, "provider", "", "cluster provider: local|kind|existing (default: the scenario's)")
	f.StringVar(&builds, "builds", "", "comma-separated controller builds to compare (default: the scenario's)")
	f.IntVar(&opts.Cycles, "cycles", -1, "number of delete/recreate cycles (default: the scenario's)")
	f.Int64Var(&seed, "seed", 0, "seed for the sequence of actions (default: the scenario's)")
	f.BoolVar(&opts.Keep, "keep", false, "leave the (last) cluster running and print its kubeconfig path")
	f.StringVar(&opts.OutputDir, "output", "_output", "output directory (relative to the repository root)")
	return cmd
}

// tableOf extracts the builds table from a report's Markdown.
func tableOf(md string) string {
	var out strings.Builder
	in := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| build ") {
			in = true
		}
		if in {
			if !strings.HasPrefix(line, "|") {
				break
			}
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}

func downCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "down DIR",
		Short: "Stop a cluster left running with --keep (DIR is printed by run)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return local.Down(cmd.Context(), args[0])
		},
	}
}

func validateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check scenario files without starting anything",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			for _, f := range args {
				if _, err := scenario.Load(f); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Printf("%s: ok\n", f)
			}
			return errors.Join(errs...)
		},
	}
}
