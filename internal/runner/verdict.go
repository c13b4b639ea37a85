package runner

// A run until a verdict (--until-verdict): rounds of the scenario, each a
// run of stock and every build still undecided on the same seed with fresh
// clusters, and after each round the sequential test of every build
// against stock (report.SequentialTests). The rounds' reports are kept
// under the run's directory (rounds/); the run's own report pools them
// (report.Merge) and holds the test (report.json's sequential).

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/strandlab/strandlab/internal/kcmbuild"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/report/render"
	"github.com/strandlab/strandlab/internal/scenario"
)

// DefaultMaxRounds bounds a run until a verdict without --max-cycles: 50
// rounds (150 cycles a build of seed-122413, 250,000 of the soak).
const DefaultMaxRounds = 50

// CheckUntilVerdict refuses a design or a build list a run until a
// verdict cannot use, naming the flag.
func CheckUntilVerdict(d report.SequentialDesign, builds []string) error {
	if err := d.Check(); err != nil {
		return err
	}
	switch {
	case d.MaxCycles < 0:
		return fmt.Errorf("--max-cycles: %d is negative", d.MaxCycles)
	case !slices.Contains(builds, report.Baseline):
		return fmt.Errorf("--until-verdict: the builds (%s) need %s, the build the others are tested against", strings.Join(builds, ","), report.Baseline)
	case len(builds) < 2:
		return fmt.Errorf("--until-verdict: the builds (%s) need one to test against %s", strings.Join(builds, ","), report.Baseline)
	}
	return nil
}

// ScenarioDesign is the design of a run of sc whose command line says
// neither --until-verdict nor --cycles: the scenario's untilVerdict over
// the default design, or nil (its cycles once) when it has none or its
// builds, after --builds, are not stock and another. A scenario's default
// never makes a run fail: a run of stock alone is a fixed run.
func ScenarioDesign(sc *scenario.Scenario) *report.SequentialDesign {
	u := sc.UntilVerdict
	if u == nil || !slices.Contains(sc.Builds, report.Baseline) || len(sc.Builds) < 2 {
		return nil
	}
	d := report.DefaultSequentialDesign()
	if u.Alpha > 0 {
		d.Alpha = u.Alpha
	}
	if u.Margin > 0 {
		d.Margin = u.Margin
	}
	return &d
}

func runUntilVerdict(ctx context.Context, opts Options, sc *scenario.Scenario) (string, error) {
	d := *opts.UntilVerdict
	d.RoundCycles = sc.Churn.Cycles
	if err := CheckUntilVerdict(d, sc.Builds); err != nil {
		return "", err
	}
	if d.RoundCycles <= 0 {
		return "", fmt.Errorf("--until-verdict: a round of %d cycles", d.RoundCycles)
	}
	if d.MaxCycles == 0 {
		d.MaxCycles = DefaultMaxRounds * d.RoundCycles
	}
	fmt.Fprintf(opts.Progress, ">> until a verdict: rounds of %d cycles a build, at most %d cycles a build; alpha %g, no difference within %g per cycle\n",
		d.RoundCycles, d.MaxCycles, d.Alpha, d.Margin)
	topDir, topID, err := report.ClaimDir(filepath.Join(opts.OutputDir, "reports"), runIDOf(time.Now(), sc.Name, opts.RunIDSuffix))
	if err != nil {
		return "", fmt.Errorf("create the report directory: %w", err)
	}
	latest := filepath.Join(opts.OutputDir, "reports", "latest")
	started := time.Now().UTC()
	seq := &report.Sequential{Test: report.SequentialTestName, SequentialDesign: d, Rounds: []string{}, Builds: []report.SequentialBuildTest{}}
	var rounds []*report.Report
	var inputs []report.MergeInput
	// save pools the rounds so far into the run's report, with the test.
	save := func(stopped string, interrupted bool, failure string) error {
		seq.Stopped = stopped
		var top *report.Report
		switch len(inputs) {
		case 0:
			top = &report.Report{Scenario: sc.Name, Provider: sc.Cluster.Provider, Seed: sc.Seed, Builds: []report.Build{}, StartedAt: started}
		case 1:
			c := *inputs[0].Report
			top = &c
			top.MergedFrom = []string{c.RunID}
		default:
			var err error
			if top, err = report.Merge(inputs, report.MergeOptions{AllowPartial: true, AllowFewerBuilds: true}); err != nil {
				return fmt.Errorf("pool the rounds: %w", err)
			}
		}
		top.RunID, top.StartedAt, top.FinishedAt = topID, started, time.Now().UTC()
		top.Sequential = seq
		top.Interrupted = top.Interrupted || interrupted
		top.Complete = !top.Interrupted && failure == "" && stopped != ""
		if failure != "" {
			top.Failure = failure
		}
		report.SetTests(top)
		return render.Write(top, topDir, latest)
	}
	if err := save("", false, ""); err != nil {
		return "", fmt.Errorf("write report: %w", err)
	}
	fail := func(stopped string, err error) (string, error) {
		interrupted := ctx.Err() != nil
		failure := ""
		if !interrupted {
			failure = err.Error()
		}
		return topDir, errors.Join(err, save(stopped, interrupted, failure))
	}

	undecided := slices.DeleteFunc(slices.Clone(sc.Builds), func(b string) bool { return b == report.Baseline })
	cycles := 0 // each build's cycles so far (the baseline runs in every round)
	decided := map[string]bool{}
	for round := 1; ; round++ {
		if d.MaxCycles > 0 && cycles+d.RoundCycles > d.MaxCycles {
			return topDir, save(fmt.Sprintf("max cycles: another round of %d would pass --max-cycles %d (%d a build run); undecided: %s",
				d.RoundCycles, d.MaxCycles, cycles, strings.Join(undecided, ", ")), false, "")
		}
		rsc := *sc
		rsc.Seed = sc.Seed + int64(round-1)
		rsc.Builds = append([]string{kcmbuild.Stock}, undecided...)
		fmt.Fprintf(opts.Progress, "\n== round %d: %s, %d cycles a build, seed %d\n", round, strings.Join(rsc.Builds, ", "), d.RoundCycles, rsc.Seed)
		o := opts
		o.UntilVerdict = nil
		o.Keep = false
		dir, err := runInto(ctx, o, &rsc, filepath.Join(topDir, "rounds"), fmt.Sprintf("round-%03d", round), "")
		if dir != "" {
			// A round stopped before any build ran has nothing to pool.
			if r, rerr := report.Read(filepath.Join(dir, "report.json")); rerr == nil && len(r.Builds) > 0 {
				rounds = append(rounds, r)
				inputs = append(inputs, report.MergeInput{Path: filepath.Join(dir, "report.json"), Report: r})
				seq.Rounds = append(seq.Rounds, r.RunID)
			} else if rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		cycles += d.RoundCycles
		tests, terr := report.SequentialTests(rounds, d)
		if terr != nil {
			return fail("the test failed", errors.Join(err, terr))
		}
		seq.Builds = tests
		if err != nil || ctx.Err() != nil {
			if err == nil {
				err = ctx.Err()
			}
			return fail(fmt.Sprintf("round %d did not complete", round), err)
		}
		undecided = undecided[:0]
		for _, t := range tests {
			if decided[t.Name] {
				continue
			}
			fmt.Fprintf(opts.Progress, ">> after round %d: %s\n", round, t.Strandings.Verdict)
			// A decided build runs no more rounds, even if the design
			// effect of later rounds would move its test back.
			if decided[t.Name] = t.Decided(); !decided[t.Name] {
				undecided = append(undecided, t.Name)
			}
		}
		if len(undecided) == 0 {
			return topDir, save(fmt.Sprintf("every build decided, after %d cycles a build", cycles), false, "")
		}
		if err := save("", false, ""); err != nil {
			return topDir, err
		}
	}
}
