package main

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/spf13/cobra"

	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/scenario"
	"github.com/strandlab/strandlab/internal/stats"
)

// planCommand is `strandlab plan`: the cycles per build a comparison needs,
// before running it (stats.PowerPlan, docs/statistics.md).
func planCommand() *cobra.Command {
	var o planOptions
	cmd := &cobra.Command{
		Use:   "plan SCENARIO",
		Short: "Cycles per build needed to show that a build strands less than stock",
		Long: `Print the cycles per build that Fisher's exact test (one-sided, the test every
comparison against stock uses) needs to show, with the given power, that a
build whose true stranding rate is --build-rate strands less often than a
baseline whose rate is --baseline-rate, and whether the scenario's
churn.cycles is enough. The baseline rate comes from --baseline-rate, or
from stock's measured rate of stranding episodes in a previous report
(--from-report; episodes are the unit of the tests, docs/statistics.md).

Cycles that strand together are worth less than independent ones: the plan
is multiplied by the design effect (--design-effect, or with --from-report
the one of stock's rounds in that report, its runs' in a merged report) and
said in runs of the scenario's churn.cycles, the unit a comparison is run
and pooled in.`,
		Example: `  strandlab plan scenarios/soak.yaml --baseline-rate 0.001
  strandlab plan scenarios/soak.yaml --from-report _output/reports/latest/report.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.scenario = args[0]
			return plan(o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.Float64Var(&o.baselineRate, "baseline-rate", 0, "the baseline's (stock's) stranding rate per cycle, in (0, 1]")
	f.StringVar(&o.fromReport, "from-report", "", "take the baseline rate from stock's rate of stranding episodes in this report.json (the unit of the tests)")
	f.Float64Var(&o.buildRate, "build-rate", 0, "the rate the build is expected to have (0: a fix that removes the bug)")
	f.Float64Var(&o.alpha, "alpha", 0.01, "significance level")
	f.Float64Var(&o.power, "power", 0.8, "the probability of showing the difference when it is real")
	f.Float64Var(&o.designEffect, "design-effect", 0, "how far the cycles' strandings cluster, >= 1 (default: from --from-report's rounds, else 1)")
	return cmd
}

type planOptions struct {
	scenario, fromReport    string
	baselineRate, buildRate float64
	alpha, power            float64
	designEffect            float64
}

func plan(o planOptions, w io.Writer) error {
	sc, err := scenario.Load(o.scenario)
	if err != nil {
		return err
	}
	rate := o.baselineRate
	// Each flag is checked here, by its name: the statistics package's
	// errors name its parameters, not the flags.
	switch {
	case o.alpha <= 0 || o.alpha >= 1:
		return fmt.Errorf("--alpha: %v out of range (0, 1)", o.alpha)
	case o.power <= 0 || o.power >= 1:
		return fmt.Errorf("--power: %v out of range (0, 1)", o.power)
	case o.baselineRate < 0 || o.baselineRate > 1:
		return fmt.Errorf("--baseline-rate: %v out of range (0, 1]", o.baselineRate)
	case o.buildRate < 0 || o.buildRate > 1:
		return fmt.Errorf("--build-rate: %v out of range [0, 1]", o.buildRate)
	case o.designEffect != 0 && !(o.designEffect >= 1 && o.designEffect < 1e6):
		return fmt.Errorf("--design-effect: %v is not at least 1", o.designEffect)
	}
	deff, deffFrom := o.designEffect, "--design-effect"
	switch {
	case o.fromReport != "" && rate != 0:
		return errors.New("--baseline-rate and --from-report: give one")
	case o.fromReport != "":
		r, err := report.Read(o.fromReport)
		if err != nil {
			return fmt.Errorf("--from-report: %w", err)
		}
		found := false
		for _, b := range r.Builds {
			if b.Name == "stock" {
				rate, found = report.EpisodeRate(b), true
				if deff == 0 {
					deff, deffFrom = reportDesignEffect(b)
				}
			}
		}
		if !found {
			return fmt.Errorf("--from-report: %s has no stock build", o.fromReport)
		}
		if rate == 0 {
			return fmt.Errorf("--from-report: stock stranded 0 times in %s: no rate to plan from", o.fromReport)
		}
	case rate == 0:
		return errors.New("--baseline-rate or --from-report is required")
	}
	n, err := stats.PowerPlan(rate, o.buildRate, o.alpha, o.power)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	verdict := "enough"
	if sc.Churn.Cycles < n {
		verdict = "NOT enough"
	}
	fmt.Fprintf(w, "baseline rate %.6g, build rate %.6g, alpha %g, power %g: %d cycles per build\n", rate, o.buildRate, o.alpha, o.power, n)
	fmt.Fprintf(w, "%s: churn.cycles = %d per build: %s\n", o.scenario, sc.Churn.Cycles, verdict)
	if deff == 0 {
		deff, deffFrom = 1, "none given: cycles taken as independent"
	}
	cycles := int(math.Ceil(float64(n) * deff))
	runs := (cycles + sc.Churn.Cycles - 1) / max(sc.Churn.Cycles, 1)
	fmt.Fprintf(w, "design effect %.2f (%s): %d cycles per build, %d runs of %d cycles (churn.cycles), each on a seed of its own\n",
		deff, deffFrom, cycles, runs, sc.Churn.Cycles)
	return nil
}

// reportDesignEffect is the design effect of stock's strandings in a
// report: its runs' in a merged report, else its rounds'; 0 when the report
// has neither (planned as independent).
func reportDesignEffect(b report.Build) (float64, string) {
	if c, ok := report.RunsRate(b); ok {
		return c.DesignEffect, "stock's runs in --from-report"
	}
	if c, ok := report.RoundsRate(b); ok {
		return c.DesignEffect, "stock's rounds in --from-report"
	}
	return 0, ""
}
