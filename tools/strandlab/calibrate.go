package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strandlab/strandlab/internal/calibration"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/runner"
	"github.com/strandlab/strandlab/internal/scenario"
	"github.com/strandlab/strandlab/internal/upstream"
)

// calibrateCommand is `strandlab calibrate`: the same profiles, seeds and
// builds on two providers, and the table that says whether they agree
// (internal/calibration; docs/kind.md, "Calibration").
func calibrateCommand() *cobra.Command {
	var (
		o         calibrateOptions
		providers []string
		seeds     string
		builds    string
	)
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Run profiles on two providers with the same seeds and builds, and table whether they agree",
		Long: `Run each --scenario on both --providers (default local, then kind: the
reference), once per seed of --seeds, with the same builds and cycles, and
write <output>/calibration/<run-id>/calibration.{json,md}: per profile and
build, every class of event (first-cycle stranding per run, stranding
episodes, safety violations, phantom listings) on each provider with its 95%
interval, the two-sided Fisher exact test of one against the other and a
verdict as an effect size (compared where each side saw at least 20 events;
agree within a factor of 1.5), and the timings that decide the races
(delete -> Running, delete -> detach, the volume's listing -> detach) with
medians and a Kolmogorov-Smirnov test (agree: medians within 15% or 250 ms,
distance at most 0.15). The runs' reports are under the same directory.

--runtime-timings FILE makes the local provider's simulated kubelets draw
their container runtime from FILE (written by strandlab runtime-timings)
instead of kubelet-sim's built-in timings, which were measured on another
machine. --runtime-timings reference draws them from this calibration's own
kind runs: each seed runs on kind first, the runtime timings of every kind
run so far are pooled into <run-dir>/runtime-timings.json, and the local run
of the seed draws from them, so that both sides' pod starts and stops are
this machine's (docs/kind.md, "Calibration").

--reports tables reports already written (runs sharded over sittings, or
made with strandlab run) instead of running anything; each report names its
provider. A report.json kept gzip-compressed (a name ending .json.gz, as
the shards kept under docs/evidence) is read as it is.

Prints the table, then calibration.md's path as the last line. Exit status
as run's: 0 when the runs completed, 130 when interrupted (the table of what
ran is written), 1 when the harness failed.`,
		Example: `  strandlab calibrate --scenario scenarios/seed-122413.yaml --seeds 1-10 --cycles 1
  strandlab calibrate --scenario scenarios/mirror-safety.yaml --cycles 100 --builds stock,fix
  strandlab calibrate --scenario scenarios/node-delay.yaml --cycles 60 --builds stock,fix --runtime-timings reference
  strandlab calibrate --reports _output/reports/<local-run>,_output/reports/<kind-run>`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(providers) != 2 || providers[0] == providers[1] {
				return fmt.Errorf("--providers: %q, want two different providers (the second is the reference)", strings.Join(providers, ","))
			}
			o.providers = [2]string{providers[0], providers[1]}
			if len(o.reports) > 0 {
				if len(o.scenarios) > 0 || seeds != "" || builds != "" || o.cycles >= 0 || o.runtimeTimings != "" {
					return errors.New("--reports tables reports already written: --scenario, --seeds, --builds, --cycles and --runtime-timings do not apply")
				}
			} else {
				for _, p := range providers {
					if !slices.Contains(ownProviderNames, p) {
						return fmt.Errorf("--providers: %q, want two of %s (providers that run strandlab's controller builds)", p, strings.Join(ownProviderNames, ", "))
					}
				}
				if len(o.scenarios) == 0 {
					return errors.New("--scenario: at least one scenario file is required (or --reports)")
				}
				var err error
				if o.seeds, err = parseSeeds(seeds); err != nil {
					return err
				}
				if builds != "" {
					o.builds = strings.Split(builds, ",")
				}
				switch {
				case o.runtimeTimings == timingsFromReference:
					if o.providers != [2]string{"local", "kind"} {
						return fmt.Errorf("--runtime-timings %s: the local provider draws from the kind runs' timings: --providers local,kind, not %s", timingsFromReference, strings.Join(providers, ","))
					}
				case o.runtimeTimings != "":
					// Applied to the local runs (the providers are local
					// and kind), checked with them before any starts.
					if o.runtimeTimings, err = filepath.Abs(o.runtimeTimings); err != nil {
						return fmt.Errorf("--runtime-timings: %w", err)
					}
				}
			}
			o.command = "strandlab " + strings.Join(os.Args[1:], " ")
			return calibrate(cmd.Context(), o, os.Stdout, os.Stderr)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.scenarios, "scenario", nil, "the profiles: scenario files, comma-separated or repeated")
	f.StringSliceVar(&providers, "providers", []string{"local", "kind"}, "the two providers, the reference second")
	f.StringVar(&seeds, "seeds", "", "seeds, each run on both providers: 1-10, 1,3,7 or both (default: each scenario's seed)")
	f.StringVar(&builds, "builds", "", "comma-separated controller builds (default: the scenario's)")
	f.IntVar(&o.cycles, "cycles", -1, "cycles per build and run (default: the scenario's)")
	f.StringVar(&o.runtimeTimings, "runtime-timings", "", "the local provider's kubelet-sim draws its container runtime from this timings file, or from this calibration's kind runs (reference); default: kubelet-sim's built-in")
	f.StringSliceVar(&o.reports, "reports", nil, "table these report.json files (or run directories, or .json.gz copies) instead of running")
	f.StringVar(&o.output, "output", "_output", "output directory (relative to the repository root)")
	return cmd
}

type calibrateOptions struct {
	scenarios []string
	providers [2]string
	seeds     []int64 // nil: each scenario's own
	builds    []string
	cycles    int
	reports   []string
	output    string
	command   string
	// runtimeTimings: "" (kubelet-sim's built-in), a file, or
	// timingsFromReference.
	runtimeTimings string
}

// timingsFromReference (--runtime-timings reference): the local runs draw
// their runtime from the calibration's kind runs so far.
const timingsFromReference = "reference"

// parseSeeds reads --seeds: comma-separated seeds and ranges a-b (at most
// 1,000 seeds); "" is nil (each scenario's seed).
func parseSeeds(s string) ([]int64, error) {
	if s == "" {
		return nil, nil
	}
	var out []int64
	seen := map[int64]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds: %q is not a seed or a range a-b", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("--seeds: %q is not a range a-b with a <= b", part)
			}
		}
		for x := a; x <= b; x++ {
			if len(out) == 1000 {
				return nil, errors.New("--seeds: more than 1000 seeds")
			}
			if !seen[x] {
				seen[x] = true
				out = append(out, x)
			}
		}
	}
	return out, nil
}

// calibrate runs (or reads) the runs and writes the table.
func calibrate(ctx context.Context, o calibrateOptions, stdout, stderr io.Writer) error {
	out, err := outputDir(o.output)
	if err != nil {
		return err
	}
	var runs []calibration.Run
	var runErr error
	id := report.RunID(time.Now().UTC(), "calibration")
	dir := filepath.Join(out, "calibration", id)
	if len(o.reports) > 0 {
		if runs, err = readCalibrationRuns(o.reports); err != nil {
			return err
		}
		// Check before anything is written.
		if _, err := calibration.Compare(o.providers, runs); err != nil {
			return err
		}
	} else {
		runs, runErr = calibrationRuns(ctx, o, dir, stderr)
		if len(runs) == 0 {
			return runErr
		}
	}
	t, err := calibration.Compare(o.providers, runs)
	if err != nil {
		return errors.Join(runErr, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errors.Join(runErr, err)
	}
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return errors.Join(runErr, err)
	}
	md := calibration.Markdown(t, o.command)
	mdPath := filepath.Join(dir, "calibration.md")
	if err := errors.Join(os.WriteFile(filepath.Join(dir, "calibration.json"), append(data, '\n'), 0o644),
		os.WriteFile(mdPath, []byte(md), 0o644)); err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprintf(stdout, "\n%s\n%s\n", md, mdPath)
	return runErr
}

// readCalibrationRuns reads report.json files (or the run directories
// holding them).
func readCalibrationRuns(paths []string) ([]calibration.Run, error) {
	var runs []calibration.Run
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			p = filepath.Join(p, "report.json")
		}
		r, err := report.Read(p)
		if err != nil {
			return nil, fmt.Errorf("--reports: %w", err)
		}
		if r.Provider == "" {
			return nil, fmt.Errorf("--reports: %s names no provider", p)
		}
		if len(r.Builds) == 0 {
			continue // stopped before it measured anything (as calibrationRuns)
		}
		runs = append(runs, calibration.Run{Provider: r.Provider, Report: r, Path: p})
	}
	return runs, nil
}

// calibrationRuns runs every scenario on both providers, seed by seed
// (the providers alternate, so an interrupted calibration has both
// sides), one cluster at a time. It returns the runs whose reports were
// written, and the error or interruption that stopped it.
func calibrationRuns(ctx context.Context, o calibrateOptions, dir string, stderr io.Writer) ([]calibration.Run, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	root, err := upstream.RepoRoot(wd)
	if err != nil {
		return nil, err
	}
	base := runner.Options{Builds: o.builds, Cycles: o.cycles, OutputDir: dir, RepoRoot: root, Progress: stderr,
		Providers: ownClusterProviders(root, stderr)}
	type job struct {
		path     string
		sc       *scenario.Scenario
		provider string
		seed     int64
	}
	var jobs []job
	fromReference := o.runtimeTimings == timingsFromReference
	// Every scenario is checked on both providers before the first
	// cluster starts.
	prepare := func(path, provider string, seed *int64) (*scenario.Scenario, error) {
		po := base
		po.ScenarioPath, po.Provider, po.Seed = path, provider, seed
		if provider == "local" && !fromReference {
			po.RuntimeTimings = o.runtimeTimings
		}
		sc, err := runner.Prepare(ctx, po)
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", path, provider, err)
		}
		return sc, nil
	}
	// Each seed runs on the reference first when the local side draws from
	// its timings.
	order := o.providers
	if fromReference {
		order = [2]string{o.providers[1], o.providers[0]}
	}
	for _, path := range o.scenarios {
		seeds := o.seeds
		if seeds == nil {
			sc, err := prepare(path, o.providers[0], nil)
			if err != nil {
				return nil, err
			}
			seeds = []int64{sc.Seed}
		}
		for _, seed := range seeds {
			for _, p := range order {
				sc, err := prepare(path, p, &seed)
				if err != nil {
					return nil, err
				}
				jobs = append(jobs, job{path, sc, p, seed})
			}
		}
	}
	ctx, teardown, stop := interruptible(ctx, stderr)
	defer stop()
	base.Teardown = teardown
	var runs []calibration.Run
	var references []*report.Report // the reference's reports, for fromReference
	timingsPath := filepath.Join(dir, "runtime-timings.json")
	for i, j := range jobs {
		fmt.Fprintf(stderr, "\n== calibrate %s on %s, seed %d (%d of %d)\n", j.sc.Name, j.provider, j.seed, i+1, len(jobs))
		ro := base
		seed := j.seed
		ro.ScenarioPath, ro.Provider, ro.Seed = j.path, j.provider, &seed
		switch {
		case j.provider != "local":
		case !fromReference:
			ro.RuntimeTimings = o.runtimeTimings
		case len(references) == 0:
			return runs, fmt.Errorf("--runtime-timings %s: no kind run measured a churn before the local run of %s, seed %d", timingsFromReference, j.sc.Name, j.seed)
		default:
			if err := writeReferenceTimings(timingsPath, references); err != nil {
				return runs, err
			}
			ro.RuntimeTimings = timingsPath
		}
		reportDir, err := runner.Run(ctx, ro, j.sc)
		if reportDir != "" {
			path := filepath.Join(reportDir, "report.json")
			r, rerr := report.Read(path)
			if rerr != nil {
				return runs, errors.Join(err, rerr)
			}
			// A run stopped before its first build's churn measured
			// nothing: it is not one of the table's runs.
			if len(r.Builds) > 0 {
				runs = append(runs, calibration.Run{Provider: j.provider, Report: r, Path: path})
				if j.provider == o.providers[1] {
					references = append(references, r)
				}
			}
		}
		// Interrupted (in any phase, the cluster's start included: its
		// error is then the cancellation's) comes first.
		if ctx.Err() != nil {
			return runs, &exitError{exitInterrupted, errors.New("interrupted; the table of what ran is written")}
		}
		if err != nil {
			return runs, err
		}
	}
	return runs, nil
}

// writeReferenceTimings pools the reference's runtime timings so far into
// the file the next local run's kubelets draw from.
func writeReferenceTimings(path string, references []*report.Report) error {
	t, err := poolTimings(references)
	if err != nil {
		return fmt.Errorf("--runtime-timings %s: %w", timingsFromReference, err)
	}
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return report.WriteFileAtomic(path, append(data, '\n'))
}
