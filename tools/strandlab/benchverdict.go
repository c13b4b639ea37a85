package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/strandlab/strandlab/internal/kcmbuild"
	"github.com/strandlab/strandlab/internal/procstat"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/runner"
	"github.com/strandlab/strandlab/internal/scenario"
	"github.com/strandlab/strandlab/internal/sequential"
)

// defaultVerdictScenarios are the profiles whose time to a verdict the bench
// measures (--time-to-verdict): the seed, node-delay and the soak.
var defaultVerdictScenarios = []string{"scenarios/seed-122413.yaml", "scenarios/node-delay.yaml", "scenarios/soak.yaml"}

// verdictBuild is the build each verdict run tests against stock.
const verdictBuild = "fix"

// verdictAlpha is the p-value the bench's verdicts are held to.
const verdictAlpha = 0.001

// verdictSeedStep separates the repeated runs' seeds: a run until a
// verdict takes the next seed each round, at most runner.DefaultMaxRounds
// of them, so the repetitions never share a round's seed.
const verdictSeedStep = 1000

// VerdictTime is one profile's time to a verdict: `strandlab run
// --until-verdict` of stock and fix, repeated on different seeds, with the
// medians of what each run took.
type VerdictTime struct {
	Name     string       `json:"name"`
	Scenario string       `json:"scenario"`
	Runs     []VerdictRun `json:"runs"`
	// Reached is the runs that ended with fix stranding less than stock at
	// p <= Alpha; the medians are over every complete run, so a run that
	// stopped undecided counts with the time it took to stop.
	Reached             int     `json:"reached"`
	Alpha               float64 `json:"alpha"`
	MedianWallMinutes   float64 `json:"median_wall_minutes"`
	MedianCPUMinutes    float64 `json:"median_cpu_minutes"`
	MedianCyclesByBuild float64 `json:"median_cycles_a_build"`
}

// VerdictRun is one run until a verdict.
type VerdictRun struct {
	Seed int64 `json:"seed"`
	// Report is the run's report.json, relative to bench.json.
	Report   string `json:"report,omitempty"`
	Complete bool   `json:"complete"`
	// Outcome, PValue and Verdict are fix's stranding test against stock
	// after the last look; Rounds the looks, CyclesByBuild fix's cycles.
	Outcome       string  `json:"outcome"`
	PValue        float64 `json:"p_value"`
	Verdict       string  `json:"verdict"`
	Rounds        int     `json:"rounds"`
	CyclesByBuild int     `json:"cycles_a_build"`
	Stopped       string  `json:"stopped"`
	// WallMinutes is the run's wall time; CPUMinutes the CPU time the
	// whole machine was busy meanwhile (/proc/stat): clusters started and
	// stopped, builds, harness and all.
	WallMinutes float64 `json:"wall_minutes"`
	CPUMinutes  float64 `json:"cpu_minutes"`
}

// reached reports whether the run ended with fix stranding less at p <= alpha.
func (r VerdictRun) reached(alpha float64) bool {
	// The test decides "less" only at p <= alpha (sequential.Verdict).
	return r.Complete && r.Outcome == string(sequential.Less) && r.PValue <= alpha
}

// verdictRuns are the verdict profiles, prepared, and the options their
// runs take.
type verdictRuns struct {
	opts     runner.Options
	prepared []*scenario.Scenario
}

// prepareVerdicts prepares (and refuses) the verdict profiles, before any
// cluster starts.
func prepareVerdicts(ctx context.Context, o benchOptions, opts runner.Options) (verdictRuns, error) {
	design := report.DefaultSequentialDesign()
	design.Alpha = verdictAlpha
	opts.Builds = []string{kcmbuild.Stock, verdictBuild}
	opts.Cycles = -1 // a round is the scenario's cycles, as `strandlab run --until-verdict` without --cycles
	opts.UntilVerdict = &design
	// As `strandlab run` runs: the API server's metrics scrape before the
	// churn moves seed-122413's first cycle (runner.Options.RequestsByClient),
	// and the verdict's time is what a user's run takes.
	opts.RequestsByClient = false
	v := verdictRuns{opts: opts, prepared: make([]*scenario.Scenario, len(o.verdictScenarios))}
	for i, path := range o.verdictScenarios {
		po := opts
		po.ScenarioPath = path
		var err error
		if v.prepared[i], err = runner.Prepare(ctx, po); err != nil {
			return verdictRuns{}, err
		}
	}
	return v, nil
}

// timeToVerdict runs each prepared verdict profile o.verdictRepeats times
// until a verdict and appends what each took to b.
func timeToVerdict(ctx context.Context, o benchOptions, v verdictRuns, dir string, b *Bench) error {
	opts, prepared, alpha := v.opts, v.prepared, v.opts.UntilVerdict.Alpha
	for i, base := range prepared {
		vt := VerdictTime{Name: base.Name, Scenario: o.verdictScenarios[i], Alpha: alpha}
		b.TimeToVerdict = append(b.TimeToVerdict, vt)
		cur := &b.TimeToVerdict[len(b.TimeToVerdict)-1]
		for rep := 0; rep < o.verdictRepeats; rep++ {
			sc := *base
			sc.Seed = base.Seed + int64(rep)*verdictSeedStep
			fmt.Fprintf(o.progress, "\n== time to a verdict, %s (%d of %d), run %d of %d: stock and %s until p < %g, seed %d\n",
				sc.Name, i+1, len(prepared), rep+1, o.verdictRepeats, verdictBuild, alpha, sc.Seed)
			ro := opts
			ro.ScenarioPath = o.verdictScenarios[i]
			run, err := measureVerdictRun(ctx, ro, &sc, dir)
			if run.Report != "" || err == nil {
				cur.Runs = append(cur.Runs, run)
				cur.summarise()
			}
			if ctx.Err() != nil {
				// The run's own error is the interruption's consequence.
				return &exitError{exitInterrupted, errors.New("interrupted; what was measured is written")}
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// measureVerdictRun runs sc until a verdict and reads what it took.
func measureVerdictRun(ctx context.Context, opts runner.Options, sc *scenario.Scenario, dir string) (VerdictRun, error) {
	run := VerdictRun{Seed: sc.Seed}
	busyBefore, berr := procstat.MachineBusySeconds()
	started := time.Now()
	reportDir, err := runner.Run(ctx, opts, sc)
	run.WallMinutes = time.Since(started).Minutes()
	if busyAfter, aerr := procstat.MachineBusySeconds(); berr == nil && aerr == nil {
		run.CPUMinutes = (busyAfter - busyBefore) / 60
	}
	if reportDir == "" {
		return run, err
	}
	rep, rerr := report.Read(filepath.Join(reportDir, "report.json"))
	if rerr != nil {
		return run, errors.Join(err, rerr)
	}
	run.Report, _ = filepath.Rel(dir, filepath.Join(reportDir, "report.json"))
	run.Complete = rep.Complete && !rep.Interrupted
	if s := rep.Sequential; s != nil {
		run.Rounds, run.Stopped = len(s.Rounds), s.Stopped
		if i := slices.IndexFunc(s.Builds, func(t report.SequentialBuildTest) bool { return t.Name == verdictBuild }); i >= 0 {
			t := s.Builds[i].Strandings
			run.Outcome, run.PValue, run.Verdict, run.CyclesByBuild = t.Outcome, t.PValue, t.Verdict, t.Trials
		}
	}
	return run, err
}

// summarise sets the medians and the runs that reached the verdict.
func (v *VerdictTime) summarise() {
	var wall, cpu, cycles []float64
	v.Reached = 0
	for _, r := range v.Runs {
		if r.reached(v.Alpha) {
			v.Reached++
		}
		if r.Complete {
			wall, cpu, cycles = append(wall, r.WallMinutes), append(cpu, r.CPUMinutes), append(cycles, float64(r.CyclesByBuild))
		}
	}
	v.MedianWallMinutes, v.MedianCPUMinutes, v.MedianCyclesByBuild = median(wall), median(cpu), median(cycles)
}

// median of xs (0 for none; the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// VerdictTable is the time to a verdict as a Markdown table, one row per
// profile; "" when the bench measured none.
func VerdictTable(b Bench) string {
	if len(b.TimeToVerdict) == 0 {
		return ""
	}
	var buf bytes.Buffer
	buf.WriteString("| profile | runs reaching \"fix strands less\" at p ≤ α | median wall min | median CPU min | median cycles a build | each run: outcome, p, rounds, wall min |\n")
	buf.WriteString("|---|---:|---:|---:|---:|---|\n")
	for _, v := range b.TimeToVerdict {
		var each []string
		complete := 0
		for _, r := range v.Runs {
			outcome := r.Outcome
			if !r.Complete {
				outcome += ", partial"
			} else {
				complete++
			}
			each = append(each, fmt.Sprintf("%s, p = %.2g, %d, %.1f", orDash(outcome), r.PValue, r.Rounds, r.WallMinutes))
		}
		med := func(x float64, format string) string {
			if complete == 0 {
				return "–"
			}
			return fmt.Sprintf(format, x)
		}
		fmt.Fprintf(&buf, "| %s | %d of %d (α = %g) | %s | %s | %s | %s |\n", v.Name, v.Reached, len(v.Runs), v.Alpha,
			med(v.MedianWallMinutes, "%.1f"), med(v.MedianCPUMinutes, "%.1f"), med(v.MedianCyclesByBuild, "%.0f"), strings.Join(each, "; "))
	}
	return buf.String()
}

// verdictSection is bench.md's (and the console's) time to a verdict,
// headed; "" when the bench measured none.
func verdictSection(b Bench) string {
	t := VerdictTable(b)
	if t == "" {
		return ""
	}
	return "\n## Time to a verdict\n\n`strandlab run --until-verdict`, stock and fix, each run on its own seeds; CPU minutes are the whole machine's busy time during the run.\n\n" + t + "\n"
}
