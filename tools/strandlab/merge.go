package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/report/render"
	"github.com/strandlab/strandlab/internal/scenario"
	"github.com/strandlab/strandlab/internal/upstream"
)

// mergeCommand is `strandlab merge`: reports of one scenario pooled into one
// (internal/report/merge.go, docs/report.md "Merged reports").
func mergeCommand() *cobra.Command {
	var o mergeOptions
	cmd := &cobra.Command{
		Use:   "merge REPORT_DIR...",
		Short: "Pool reports of one scenario and the same builds across runs, seeds and machines",
		Long: `Pool the reports of several runs of one scenario into one report of the same
schema, written like a run's: <output>/reports/<UTC time>-merge-<scenario>/
report.{json,md}, compare.{md,png}, copied to reports/latest/. Each argument
is a report directory, a report.json, or a directory of report directories
(one holding no report.json itself, such as a run's <output>/reports): every
directory directly under it that holds a report.json is pooled, except
latest/ (a copy of one of them). At least two reports are pooled. Counts are
summed and the rates, intervals and tests recomputed from them; see
docs/report.md for the rest.

Refused, with nothing written (exit 1): reports of different scenarios,
providers, Kubernetes or component versions, different builds (a build
present in only some reports), a build whose provenance differs between two
reports, a run given twice, scenario files whose content differs (their
run_provenance.scenario_sha256), runs measured by different strandlab builds
unless --allow-harness-change, and an interrupted or incomplete report
unless --allow-partial. Runs from several machines are pooled and the
merged report lists the machines. The merged report.json's path is
printed last.

Reports do not carry their scenario's expect bands: with --scenario FILE
(the scenario the reports ran; refused, exit 1, when its name is not the
reports') each pooled build is held to its band, the result is written into
the merged report (builds[].expectation, compare.md's verdicts) and unmet
bounds are printed. firstCycle, a bound on one run's cycle 0, is not checked
on a pool. With --check (which needs --scenario) an unmet band exits 3, as
run --check does; the merged report is written and its path printed all the
same.`,
		Example: `  strandlab merge _output/reports/20261130-061347-seed-122413 _output/reports/20261130-061721-seed-122413
  strandlab merge --check --scenario scenarios/soak.yaml shards/*/
  strandlab merge --scenario scenarios/soak.yaml --output /reports/merged /reports/shards/reports`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := outputDir(o.output)
			if err != nil {
				return err
			}
			o.output, o.now = out, time.Now()
			_, err = mergeReports(args, o, os.Stdout, os.Stderr)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.output, "output", "_output", "output directory (relative to the repository root)")
	f.BoolVar(&o.allowPartial, "allow-partial", false, "pool interrupted or incomplete reports too")
	f.BoolVar(&o.allowHarnessChange, "allow-harness-change", false, "pool runs measured by different strandlab builds (run_provenance.harness) too, with a note")
	f.BoolVar(&o.sequential, "sequential", false, "also test each build against stock sequentially, each report a round in argument order (shards of --until-verdict's design: docs/ci.md), and say at which report the verdict was reached")
	f.Float64Var(&o.design.Alpha, "verdict-alpha", 0.001, "--sequential: the chance of each kind of wrong verdict, over all looks")
	f.Float64Var(&o.design.Margin, "verdict-margin", 0.005, "--sequential: the difference of stranding-episode rates (per cycle) 'no difference' rules out")
	f.StringVar(&o.scenario, "scenario", "", "scenario file the reports ran: hold the pooled builds to its expect bands")
	f.BoolVar(&o.check, "check", false, "exit 3 when a pooled build is outside the scenario's expect band (needs --scenario)")
	return cmd
}

// mergeOptions are merge's flags; output is an absolute directory.
type mergeOptions struct {
	output       string
	allowPartial bool
	// allowHarnessChange: --allow-harness-change.
	allowHarnessChange bool
	// sequential (--sequential) tests the builds against stock with each
	// report a round, under design.
	sequential bool
	design     report.SequentialDesign
	// scenario is the scenario file whose expect bands the pooled builds
	// are held to ("": none); check turns an unmet band into exit 3.
	scenario string
	check    bool
	now      time.Time
}

// outputDir resolves --output as run does: a relative path is relative to
// the repository root.
func outputDir(dir string) (string, error) {
	if filepath.IsAbs(dir) {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := upstream.RepoRoot(wd)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, dir), nil
}

// mergeReports merges the reports at paths, writes the merged report under
// output/reports/<run-id>/ (and reports/latest/) and prints its report.json
// path to stdout as the last line; the builds' table, the notes and the
// unmet expectations go to stderr. A refusal writes nothing. An unmet
// expectation with o.check is an exitUnmet error returned with the path of
// the report, which is written: CI shows the pool that failed its check.
func mergeReports(paths []string, o mergeOptions, stdout, stderr io.Writer) (string, error) {
	if o.check && o.scenario == "" {
		return "", errors.New("--check: needs --scenario FILE: reports do not carry their scenario's expect bands")
	}
	paths, err := expandReportDirs(paths)
	if err != nil {
		return "", err
	}
	if o.sequential {
		if err := o.design.Check(); err != nil {
			return "", err
		}
	}
	var sc *scenario.Scenario
	if o.scenario != "" {
		var err error
		if sc, err = scenario.Load(o.scenario); err != nil {
			return "", fmt.Errorf("--scenario: %w", err)
		}
		if err := sc.CheckExpectKeys(knownBuilds()); err != nil {
			return "", fmt.Errorf("--scenario %s: %w", o.scenario, err)
		}
	}
	inputs := make([]report.MergeInput, len(paths))
	for i, p := range paths {
		in, err := report.ReadMergeInput(p)
		if err != nil {
			return "", err
		}
		inputs[i] = in
		// The merged report's directory is named after the scenario: a
		// report.json edited to name "../x" must not write outside --output.
		if err := scenario.ValidName(in.Report.Scenario); err != nil {
			return "", fmt.Errorf("%s: scenario %w", p, err)
		}
	}
	opts := report.MergeOptions{AllowPartial: o.allowPartial, AllowHarnessChange: o.allowHarnessChange, Now: o.now}
	if sc != nil {
		opts.Expect = pooledExpectation(sc, stderr)
	}
	rep, err := report.Merge(inputs, opts)
	if err != nil {
		return "", err
	}
	if sc != nil && sc.Name != rep.Scenario {
		return "", fmt.Errorf("--scenario: %s is scenario %q, the reports are of %q", o.scenario, sc.Name, rep.Scenario)
	}
	if o.sequential {
		if rep.Sequential, err = shardsAsRounds(inputs, o.design); err != nil {
			return "", err
		}
	}
	dir, id, err := report.ClaimDir(filepath.Join(o.output, "reports"), rep.RunID)
	if err != nil {
		return "", fmt.Errorf("create the merged report's directory: %w", err)
	}
	rep.RunID = id
	if err := render.Write(rep, dir, filepath.Join(o.output, "reports", "latest")); err != nil {
		return "", fmt.Errorf("write the merged report: %w", err)
	}
	fmt.Fprintf(stderr, "%s: %d runs pooled (seeds %s)\n%s", rep.Scenario, len(rep.MergedFrom), seedList(rep.Seeds), render.Table(rep))
	for _, n := range rep.Notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	fmt.Fprint(stderr, render.Verdicts(rep))
	path := filepath.Join(dir, "report.json")
	// The check reads the report back, as run --check does: what is
	// checked is what was written.
	checkErr := checkReports([]string{path}, o.check, stderr)
	fmt.Fprintln(stdout, path)
	return path, checkErr
}

// latestDir is the directory a run or a merge copies its last report to,
// beside the report directories (docs/design.md, "Report directory").
const latestDir = "latest"

// expandReportDirs replaces each argument that is a directory without a
// report.json by the directories directly under it that hold one, sorted,
// leaving out latest/ (a copy of one of them): a Job's shards write their
// reports under one directory, and a FROM-scratch image has no shell to
// expand a glob (docs/soak-job.md). Other arguments are kept as they are.
func expandReportDirs(args []string) ([]string, error) {
	var out []string
	for _, arg := range args {
		fi, err := os.Stat(arg)
		if err != nil || !fi.IsDir() {
			out = append(out, arg)
			continue
		}
		if _, err := os.Stat(filepath.Join(arg, "report.json")); err == nil {
			out = append(out, arg)
			continue
		}
		entries, err := os.ReadDir(arg)
		if err != nil {
			return nil, err
		}
		var found []string
		for _, e := range entries {
			if !e.IsDir() || e.Name() == latestDir {
				continue
			}
			dir := filepath.Join(arg, e.Name())
			if _, err := os.Stat(filepath.Join(dir, "report.json")); err == nil {
				found = append(found, dir)
			}
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no report.json in it, nor in any directory directly under it (%s/ left out)", arg, latestDir)
		}
		out = append(out, found...)
	}
	return out, nil
}

// pooledExpectation holds a pooled build to sc's band for it, without the
// bounds that are about one run (scenario.Band.Pooled), and says on w which
// were left out.
func pooledExpectation(sc *scenario.Scenario, w io.Writer) func(report.Build) ([]string, bool) {
	return func(b report.Build) ([]string, bool) {
		band, ok := sc.BandFor(b.Name)
		if !ok {
			return nil, false
		}
		band, dropped := band.Pooled()
		for _, d := range dropped {
			fmt.Fprintf(w, "note: %s/%s: %s is a bound on one run, not checked on a pool (run --check checks it)\n", sc.Name, b.Name, d)
		}
		return band.Check(scenario.Outcome{Cycles: b.Cycles, Stranded: b.Stranded, SafetyViolations: b.SafetyViolations,
			CyclesNotRunning: b.CyclesNotRunning}), true
	}
}

func seedList(seeds []int64) string {
	s := make([]string, len(seeds))
	for i, x := range seeds {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// shardsAsRounds is the sequential comparison of the pooled reports, each
// a round in the order given: what --until-verdict would have decided had
// the shards been its rounds, and at which shard.
func shardsAsRounds(inputs []report.MergeInput, d report.SequentialDesign) (*report.Sequential, error) {
	rounds := make([]*report.Report, len(inputs))
	ids := make([]string, len(inputs))
	for i, in := range inputs {
		rounds[i], ids[i] = in.Report, in.Report.RunID
		d.RoundCycles = max(d.RoundCycles, report.SequentialRoundCycles(in.Report))
	}
	tests, err := report.SequentialTests(rounds, d)
	if err != nil {
		return nil, err
	}
	var decided, undecided []string
	for _, t := range tests {
		if at := t.Strandings.DecidedAt; at > 0 {
			decided = append(decided, fmt.Sprintf("%s %s at report %d of %d", t.Name, t.Strandings.Outcome, at, len(inputs)))
		} else {
			undecided = append(undecided, t.Name)
		}
	}
	stopped := "merged " + fmt.Sprint(len(inputs)) + " reports as rounds"
	if len(decided) > 0 {
		stopped += "; decided: " + strings.Join(decided, ", ")
	}
	if len(undecided) > 0 {
		stopped += "; undecided: " + strings.Join(undecided, ", ")
	}
	return &report.Sequential{Test: report.SequentialTestName, SequentialDesign: d, Rounds: ids, Stopped: stopped, Builds: tests}, nil
}
