// Command strandlab runs stranded-volume experiments (see README.md):
//
//	strandlab run --scenario scenarios/seed-122413.yaml,scenarios/control.yaml
//	strandlab down /tmp/strandlab-smoke-stock-123
package main

import (
	"encoding/json"
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
	"github.com/strandlab/strandlab/internal/report"
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
	root.AddCommand(runCommand(&code), downCommand(), validateCommand(), kcmCommand())
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

// exitUnmet is returned by `run --check` when a build's outcome is outside
// its scenario's expected band.
const exitUnmet = 3

func runCommand(code *int) *cobra.Command {
	var (
		opts      runner.Options
		scenarios []string
		builds    string
		seed      int64
		check     bool
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
failed.`,
		Example: `  strandlab run --scenario scenarios/seed-122413.yaml
  strandlab run --scenario scenarios/seed-122413.yaml,scenarios/control.yaml --builds stock
  strandlab run --scenario scenarios/soak.yaml --cycles 5000 --seed 7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if builds != "" {
				opts.Builds = strings.Split(builds, ",")
			}
			if cmd.Flags().Changed("seed") {
				opts.Seed = &seed
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
			opts.Progress = os.Stderr
			// All scenarios are checked before the first cluster starts.
			prepared := make([]*scenario.Scenario, len(scenarios))
			for i, path := range scenarios {
				o := opts
				o.ScenarioPath = path
				if prepared[i], err = runner.Prepare(o); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var dirs []string
			defer func() {
				for _, d := range dirs {
					fmt.Println(filepath.Join(d, "report.json"))
				}
			}()
			var unmet []string
			for i, sc := range prepared {
				o := opts
				o.ScenarioPath = scenarios[i]
				o.Keep = opts.Keep && i == len(prepared)-1
				if len(prepared) > 1 {
					fmt.Fprintf(os.Stderr, "\n== scenario %s (%d of %d)\n", sc.Name, i+1, len(prepared))
				}
				dir, err := runner.Run(ctx, o, sc)
				if dir != "" {
					dirs = append(dirs, dir)
					if data, rerr := os.ReadFile(filepath.Join(dir, "report.md")); rerr == nil {
						fmt.Fprintf(os.Stderr, "\n%s\n%s", sc.Name, tableOf(string(data)))
					}
					unmet = append(unmet, expectationsUnmet(filepath.Join(dir, "report.json"))...)
				}
				if ctx.Err() != nil && err == nil {
					*code = exitInterrupted
					return errors.New("interrupted; partial report written")
				}
				if err != nil {
					return err
				}
			}
			for _, u := range unmet {
				fmt.Fprintln(os.Stderr, "expectation not met:", u)
			}
			if check && len(unmet) > 0 {
				*code = exitUnmet
				return fmt.Errorf("%d expectation(s) not met (--check)", len(unmet))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&scenarios, "scenario", []string{"scenarios/seed-122413.yaml", "scenarios/control.yaml"}, "scenario files, comma-separated or repeated")
	f.StringVar(&opts.Provider, "provider", "", "cluster provider: local|kind|existing (default: the scenario's)")
	f.StringVar(&builds, "builds", "", "comma-separated controller builds to compare (default: the scenario's)")
	f.IntVar(&opts.Cycles, "cycles", -1, "number of delete/recreate cycles (default: the scenario's)")
	f.Int64Var(&seed, "seed", 0, "seed for the sequence of actions (default: the scenario's)")
	f.BoolVar(&opts.Keep, "keep", false, "leave the (last) cluster running and print its kubeconfig path")
	f.BoolVar(&check, "check", false, "exit 3 when a build's outcome is outside the scenario's expect band (CI smoke checks)")
	f.StringVar(&opts.OutputDir, "output", "_output", "output directory (relative to the repository root)")
	return cmd
}

// expectationsUnmet lists, from a written report, each build's unmet
// expectations as "scenario/build: what".
func expectationsUnmet(reportJSON string) []string {
	data, err := os.ReadFile(reportJSON)
	if err != nil {
		return nil
	}
	var r report.Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil
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
	return out
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
