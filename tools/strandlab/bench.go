package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/kind"
	"github.com/strandlab/strandlab/internal/cluster/local"
	"github.com/strandlab/strandlab/internal/kcmbuild"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/runner"
	"github.com/strandlab/strandlab/internal/scenario"
	"github.com/strandlab/strandlab/internal/upstream"
	"github.com/strandlab/strandlab/internal/usage"
)

// benchScenarios are the bench's fixed profiles: the soak without its
// faults, then with them (docs/performance.md).
var benchScenarios = []string{"scenarios/soak-control.yaml", "scenarios/soak.yaml"}

// benchCommand is `strandlab bench`: the soak's load, stock only, a fixed
// number of cycles per profile, summarised as what a cycle costs
// (docs/performance.md). It runs `strandlab run`'s code (runner.Run) and
// reads the reports it writes.
func benchCommand() *cobra.Command {
	var (
		cycles           int
		output           string
		provider         string
		scenarios        []string
		verdictRepeats   int
		verdictScenarios []string
		reports          []string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure what a churn cycle costs: CPU per component, memory, API requests per client, cycles/s",
		Long: `Run the soak's load with the stock controller, once without faults
(scenarios/soak-control.yaml) and once with the soak's faults
(scenarios/soak.yaml), --cycles cycles each, on the local provider (or
--provider kind: real kubelets, each component's CPU read from the node
containers' control groups), and summarise what a cycle costs: cycles/s,
CPU seconds per cycle per component (and the harness's share), the cores
busy on average, peak memory per component and API requests per cycle per
client (local only).

With --time-to-verdict N, it then measures what users wait for: each of
--verdict-scenario (seed-122413, node-delay, soak) run N times, on seeds
1,000 apart, as 'strandlab run --until-verdict' of stock and fix with the
verdict held to p <= 0.001, and the median wall minutes, CPU minutes (the
whole machine's busy time) and cycles a build each took. That takes
hours for the soak. --scenario '' skips the cost profiles.

With --reports it runs nothing: it tables reports already written (a
calibrate's or an e2e run's, of any build and provider), one column per
report and build, named "scenario (build, provider)".

Writes <output>/bench/<run-id>/: bench.json and bench.md (the table), and
the runs' reports under reports/. Prints the table, then bench.json's path
as the last line. Exit status as run's: 0 when the runs completed, 130 when
interrupted (what was measured is written), 1 when the harness failed.`,
		Example: `  strandlab bench
  strandlab bench --cycles 500
  strandlab bench --provider kind --scenario scenarios/soak-control-kind.yaml --cycles 500
  strandlab bench --scenario '' --time-to-verdict 3
  strandlab bench --scenario '' --time-to-verdict 3 --verdict-scenario scenarios/seed-122413.yaml
  strandlab bench --reports _output/reports/<run>,_output/reports/<run>`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(reports) > 0 {
				for _, name := range []string{"cycles", "provider", "scenario", "time-to-verdict", "verdict-scenario"} {
					if cmd.Flags().Changed(name) {
						return fmt.Errorf("--%s: does not apply to --reports, which tables reports already written", name)
					}
				}
				return benchReports(reports, benchOptions{output: output, command: "strandlab " + strings.Join(os.Args[1:], " ")}, os.Stdout)
			}
			if cycles < 1 {
				return fmt.Errorf("--cycles: %d, want at least 1", cycles)
			}
			if !slices.Contains(ownProviderNames, provider) {
				return fmt.Errorf("--provider: %q, want one of %s (an existing cluster's components are not measured)", provider, strings.Join(ownProviderNames, ", "))
			}
			scenarios = slices.DeleteFunc(scenarios, func(s string) bool { return s == "" })
			verdictScenarios = slices.DeleteFunc(verdictScenarios, func(s string) bool { return s == "" })
			switch {
			case verdictRepeats < 0:
				return fmt.Errorf("--time-to-verdict: %d, want 0 (off) or more runs per profile", verdictRepeats)
			case verdictRepeats > 0 && len(verdictScenarios) == 0:
				return fmt.Errorf("--verdict-scenario: empty, and --time-to-verdict %d needs a profile", verdictRepeats)
			case len(scenarios) == 0 && verdictRepeats == 0:
				return fmt.Errorf("--scenario: empty, and no --time-to-verdict: nothing to measure")
			}
			return bench(cmd.Context(), benchOptions{cycles: cycles, output: output, provider: provider, scenarios: scenarios,
				verdictRepeats: verdictRepeats, verdictScenarios: verdictScenarios,
				command: "strandlab " + strings.Join(os.Args[1:], " ")}, os.Stdout, os.Stderr)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cycles, "cycles", 1000, "cycles per profile (make bench: BENCH_CYCLES)")
	f.StringVar(&output, "output", "_output", "output directory (relative to the repository root)")
	f.StringVar(&provider, "provider", "local", "the cluster provider the profiles run on: "+strings.Join(ownProviderNames, " or ")+" (make bench: PROVIDER)")
	f.StringSliceVar(&scenarios, "scenario", benchScenarios, "the profiles: scenario files, comma-separated or repeated ('' for none)")
	f.IntVar(&verdictRepeats, "time-to-verdict", 0, "also run each --verdict-scenario this many times until a verdict of fix against stock at p <= 0.001, and report the median wall and CPU minutes (make bench: TIME_TO_VERDICT; 0: off)")
	f.StringSliceVar(&verdictScenarios, "verdict-scenario", defaultVerdictScenarios, "--time-to-verdict's profiles: scenario files, comma-separated or repeated")
	f.StringSliceVar(&reports, "reports", nil, "run nothing: table these reports (report.json files, run directories or .json.gz copies), a column per report and build")
	return cmd
}

// ownProviderNames are the providers that start clusters of their own with
// strandlab's controller builds (ownClusterProviders): what calibrate runs
// on, and the ones whose components' CPU the bench can read (local's
// processes, kind's control groups).
var ownProviderNames = []string{"local", "kind"}

type benchOptions struct {
	cycles    int
	output    string
	provider  string // "" is local
	scenarios []string
	// verdictRepeats is --time-to-verdict (0: off), verdictScenarios its
	// profiles.
	verdictRepeats   int
	verdictScenarios []string
	command          string
	progress         io.Writer
}

// bench runs the profiles one after the other (one cluster at a time:
// they measure the machine) and writes the summary.
func bench(ctx context.Context, o benchOptions, stdout, stderr io.Writer) error {
	out, err := outputDir(o.output)
	if err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := upstream.RepoRoot(wd)
	if err != nil {
		return err
	}
	started := time.Now().UTC()
	provider := o.provider
	if provider == "" {
		provider = "local"
	}
	b := Bench{RunID: report.RunID(started, "bench"), Command: strings.TrimSpace(o.command), Commit: gitCommit(root), Provider: provider,
		Machine: Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH}, Cycles: o.cycles, StartedAt: started}
	dir := filepath.Join(out, "bench", b.RunID)
	// Every profile runs on the chosen provider, whatever its file says,
	// so that one file measures both providers.
	opts := runner.Options{Builds: []string{kcmbuild.Stock}, Cycles: o.cycles, OutputDir: dir, RepoRoot: root, Progress: stderr,
		RequestsByClient: true, Provider: provider}
	// Only providers whose components' CPU can be read (ownProviderNames).
	opts.Providers = ownClusterProviders(root, stderr)
	prepared := make([]*scenario.Scenario, len(o.scenarios))
	for i, path := range o.scenarios {
		po := opts
		po.ScenarioPath = path
		if prepared[i], err = runner.Prepare(ctx, po); err != nil {
			return err
		}
	}
	o.progress = stderr
	ctx, teardown, stop := interruptible(ctx, stderr)
	defer stop()
	opts.Teardown = teardown
	var runErr error
	var verdicts verdictRuns
	if o.verdictRepeats > 0 {
		// Refused here, before the cost profiles spend their time.
		if verdicts, err = prepareVerdicts(ctx, o, opts); err != nil {
			return err
		}
	}
	for i, sc := range prepared {
		fmt.Fprintf(stderr, "\n== bench profile %s (%d of %d): %d cycles, stock\n", sc.Name, i+1, len(prepared), o.cycles)
		ro := opts
		ro.ScenarioPath = o.scenarios[i]
		reportDir, err := runner.Run(ctx, ro, sc)
		if reportDir != "" {
			rep, rerr := report.Read(filepath.Join(reportDir, "report.json"))
			if rerr != nil {
				runErr = errors.Join(err, rerr)
				break
			}
			rel, _ := filepath.Rel(dir, filepath.Join(reportDir, "report.json"))
			b.Profiles = append(b.Profiles, profileOf(o.scenarios[i], rel, rep))
		}
		if err != nil {
			runErr = err
			break
		}
		if ctx.Err() != nil {
			runErr = &exitError{exitInterrupted, errors.New("interrupted; what was measured is written")}
			break
		}
	}
	if runErr == nil && o.verdictRepeats > 0 {
		runErr = timeToVerdict(ctx, o, verdicts, dir, &b)
	}
	b.FinishedAt = time.Now().UTC()
	path, err := writeBench(b, dir)
	if err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprintf(stdout, "\n%s\n%s%s\n", BenchTable(b), verdictSection(b), path)
	return runErr
}

// ownClusterProviders are the providers that start clusters of their own
// with strandlab's controller builds, local and kind: what bench and
// calibrate run on.
func ownClusterProviders(root string, progress io.Writer) *cluster.Registry {
	return cluster.NewRegistry(&local.Provider{RepoRoot: root, Progress: progress},
		&kind.Provider{RepoRoot: root, Progress: progress, NodeImage: os.Getenv(kind.NodeImageEnv)})
}

// gitCommit is the checkout's commit, with "-dirty" when tracked files
// differ from it; "" when git cannot tell. GIT_OPTIONAL_LOCKS=0 keeps
// git status from refreshing (writing) the index.
func gitCommit(root string) string {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	commit, err := git("rev-parse", "--short=12", "HEAD")
	if err != nil {
		return ""
	}
	if status, err := git("status", "--porcelain", "--untracked-files=no"); err == nil && status != "" {
		commit += "-dirty"
	}
	return commit
}

// Bench is bench.json.
type Bench struct {
	RunID string `json:"run_id"`
	// Command is how the bench was run; Commit the checkout's commit.
	Command string `json:"command"`
	Commit  string `json:"commit,omitempty"`
	// Provider is the cluster provider every profile ran on.
	Provider string    `json:"provider,omitempty"`
	Machine  Machine   `json:"machine"`
	Cycles   int       `json:"cycles"`
	Profiles []Profile `json:"profiles"`
	// TimeToVerdict is --time-to-verdict's figures, one per profile.
	TimeToVerdict []VerdictTime `json:"time_to_verdict,omitempty"`
	StartedAt     time.Time     `json:"started_at"`
	FinishedAt    time.Time     `json:"finished_at"`
}

// Machine is what the figures were measured on.
type Machine struct {
	CPUs int    `json:"cpus"`
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// Profile is one profile's figures: its report's stock build.
type Profile struct {
	Name     string `json:"name"`
	Scenario string `json:"scenario"`
	// Report is the run's report.json, relative to bench.json.
	Report              string  `json:"report"`
	Complete            bool    `json:"complete"`
	Cycles              int     `json:"cycles"`
	Stranded            int     `json:"stranded"`
	CyclesPerSecond     float64 `json:"cycles_per_second"`
	ClusterStartSeconds float64 `json:"cluster_start_seconds"`
	// WorkloadStartSeconds: from the workload's creation to every pod
	// Running.
	WorkloadStartSeconds float64 `json:"workload_start_seconds"`
	// CPU seconds per cycle by component, their total and the harness's
	// share, as in the report; CoresBusy is the total times the cycle
	// rate: the cores the cluster and the harness kept busy on average
	// during the churn.
	CPUSecondsPerCycle      map[string]float64 `json:"cpu_seconds_per_cycle,omitempty"`
	CPUSecondsTotalPerCycle float64            `json:"cpu_seconds_total_per_cycle,omitempty"`
	HarnessCPUShare         float64            `json:"harness_cpu_share,omitempty"`
	// StandInsCPUShare is the share of strandlab's own programs: the
	// harness and the stand-ins for a real cluster's parts (usage.StandIns).
	StandInsCPUShare            float64               `json:"stand_ins_cpu_share,omitempty"`
	CoresBusy                   float64               `json:"cores_busy,omitempty"`
	MemoryPeakMiB               map[string]usage.Peak `json:"memory_peak_mib,omitempty"`
	APIRequestsPerCycleByClient map[string]float64    `json:"api_requests_per_cycle_by_client,omitempty"`
	// DeleteToRunningMS and CycleStepsMS are where a cycle's time went, as
	// in the report: at a fixed concurrency, the rate is the cycles in
	// flight over this latency.
	DeleteToRunningMS report.Percentiles `json:"delete_to_running_ms"`
	CycleStepsMS      *report.CycleSteps `json:"cycle_steps_ms,omitempty"`
	// WatchLag is how long the controller's watch events waited at the
	// proxy for it to read them, per resource, as in the report (a
	// profile with the proxy in the controller's path).
	WatchLag map[string]report.WatchLag `json:"watch_lag,omitempty"`
}

// benchReports tables reports already written: a profile per report and
// build. Nothing is run; bench.json and bench.md are written as bench's.
func benchReports(paths []string, o benchOptions, stdout io.Writer) error {
	out, err := outputDir(o.output)
	if err != nil {
		return err
	}
	started := time.Now().UTC()
	b := Bench{RunID: report.RunID(started, "bench"), Command: strings.TrimSpace(o.command), StartedAt: started}
	dir := filepath.Join(out, "bench", b.RunID)
	var providers []string
	for _, path := range paths {
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			path = filepath.Join(path, "report.json")
		}
		r, err := report.Read(path)
		if err != nil {
			return fmt.Errorf("--reports: %w", err)
		}
		if len(r.Builds) == 0 {
			return fmt.Errorf("--reports: %s has no build: it stopped before it measured anything", path)
		}
		abs, _ := filepath.Abs(path)
		rel, err := filepath.Rel(dir, abs)
		if err != nil {
			rel = abs
		}
		for i := range r.Builds {
			p := buildProfile("", rel, r, i)
			p.Name = fmt.Sprintf("%s (%s, %s)", r.Scenario, r.Builds[i].Name, orDash(r.Provider))
			b.Profiles = append(b.Profiles, p)
		}
		if !slices.Contains(providers, r.Provider) {
			providers = append(providers, r.Provider)
		}
	}
	b.Provider = strings.Join(providers, ", ")
	b.FinishedAt = time.Now().UTC()
	path, err := writeBench(b, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%s\n%s\n", BenchTable(b), path)
	return nil
}

// profileOf is a profile's figures from its report (its first build: the
// bench runs stock alone).
func profileOf(scenarioFile, reportPath string, r *report.Report) Profile {
	return buildProfile(scenarioFile, reportPath, r, 0)
}

// buildProfile is the figures of r's build i (none past its builds).
func buildProfile(scenarioFile, reportPath string, r *report.Report, i int) Profile {
	p := Profile{Name: r.Scenario, Scenario: scenarioFile, Report: reportPath, Complete: r.Complete && !r.Interrupted,
		ClusterStartSeconds: r.ClusterStartSeconds}
	if i >= len(r.Builds) {
		return p
	}
	b := r.Builds[i]
	p.Cycles, p.Stranded, p.CyclesPerSecond = b.Cycles, b.Stranded, b.CyclesPerSecond
	p.WorkloadStartSeconds = b.WorkloadStartSeconds
	p.CPUSecondsPerCycle, p.CPUSecondsTotalPerCycle, p.HarnessCPUShare = b.CPUSecondsPerCycle, b.CPUSecondsTotalPerCycle, b.HarnessCPUShare
	p.StandInsCPUShare = usage.Share(b.CPUSecondsPerCycle, usage.StandIns)
	p.CoresBusy = b.CPUSecondsTotalPerCycle * b.CyclesPerSecond
	p.MemoryPeakMiB, p.APIRequestsPerCycleByClient = b.MemoryPeakMiB, b.APIRequestsPerCycleByClient
	p.DeleteToRunningMS, p.CycleStepsMS = b.DeleteToRunningMS, b.CycleStepsMS
	p.WatchLag = b.Proxy.WatchLag
	return p
}

// writeBench writes bench.json and bench.md into dir and returns
// bench.json's path.
func writeBench(b Bench, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "bench.json")
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return "", err
	}
	machine := "the reports' (bench --reports ran nothing)"
	if b.Machine.CPUs > 0 {
		machine = fmt.Sprintf("%d CPUs, %s/%s", b.Machine.CPUs, b.Machine.OS, b.Machine.Arch)
	}
	md := fmt.Sprintf("# strandlab bench %s\n\n- command: `%s`\n- commit: %s\n- provider: %s\n- machine: %s\n\n%s%s",
		b.RunID, b.Command, orDash(b.Commit), orDash(b.Provider), machine, BenchTable(b), verdictSection(b))
	return path, os.WriteFile(filepath.Join(dir, "bench.md"), []byte(md), 0o644)
}

// BenchTable is the bench's figures as a Markdown table, one column per
// profile; a figure a profile lacks is "–"; a line saying so without
// profiles.
func BenchTable(b Bench) string {
	if len(b.Profiles) == 0 {
		return "No cost profiles were run.\n"
	}
	var buf bytes.Buffer
	buf.WriteString("| |")
	for _, p := range b.Profiles {
		fmt.Fprintf(&buf, " %s |", p.Name)
	}
	buf.WriteString("\n|---|" + strings.Repeat("---:|", len(b.Profiles)) + "\n")
	row := func(label string, cell func(Profile) string) {
		fmt.Fprintf(&buf, "| %s |", label)
		for _, p := range b.Profiles {
			fmt.Fprintf(&buf, " %s |", cell(p))
		}
		buf.WriteString("\n")
	}
	num := func(format string, v float64, present bool) string {
		if !present {
			return "–"
		}
		return fmt.Sprintf(format, v)
	}
	hasCPU := func(p Profile) bool { return p.CPUSecondsPerCycle != nil }
	row("cycles (stranded)", func(p Profile) string {
		s := fmt.Sprintf("%d (%d)", p.Cycles, p.Stranded)
		if !p.Complete {
			s += ", partial"
		}
		return s
	})
	row("cycles/s", func(p Profile) string { return fmt.Sprintf("%.2f", p.CyclesPerSecond) })
	row("cluster start (s)", func(p Profile) string { return fmt.Sprintf("%.1f", p.ClusterStartSeconds) })
	row("workload start (s)", func(p Profile) string { return fmt.Sprintf("%.1f", p.WorkloadStartSeconds) })
	row("delete → Running p50 (ms)", func(p Profile) string { return fmt.Sprintf("%.0f", p.DeleteToRunningMS.P50) })
	step := func(label string, of func(*report.CycleSteps) report.Percentiles) {
		row(label, func(p Profile) string {
			if p.CycleStepsMS == nil {
				return "–"
			}
			return fmt.Sprintf("%.0f", of(p.CycleStepsMS).P50)
		})
	}
	step("… delete → replacement p50 (ms)", func(s *report.CycleSteps) report.Percentiles { return s.ToReplacement })
	step("… replacement → bound p50 (ms)", func(s *report.CycleSteps) report.Percentiles { return s.ToBound })
	step("… bound → Running p50 (ms)", func(s *report.CycleSteps) report.Percentiles { return s.ToRunning })
	for _, r := range report.AttachDetachWatchLagKeys(func(r string) bool {
		return slices.ContainsFunc(b.Profiles, func(p Profile) bool { _, ok := p.WatchLag[r]; return ok })
	}) {
		row("watch lag at the proxy, p50 / p99 (ms): "+r, func(p Profile) string {
			l, ok := p.WatchLag[r]
			if !ok {
				return "–"
			}
			return fmt.Sprintf("%.1f / %.1f", l.P50MS, l.P99MS)
		})
	}
	row("**CPU s/cycle, all**", func(p Profile) string { return num("%.4f", p.CPUSecondsTotalPerCycle, hasCPU(p)) })
	row("cores busy", func(p Profile) string { return num("%.2f", p.CoresBusy, hasCPU(p)) })
	row("harness share of the CPU", func(p Profile) string { return num("%.1f%%", 100*p.HarnessCPUShare, hasCPU(p)) })
	row("strandlab's programs' share ("+strings.Join(usage.StandIns, ", ")+")", func(p Profile) string {
		return num("%.1f%%", 100*p.StandInsCPUShare, hasCPU(p))
	})
	for _, c := range keysOf(b.Profiles, func(p Profile) []string { return mapKeys(p.CPUSecondsPerCycle) }) {
		row("CPU s/cycle: "+c, func(p Profile) string {
			v, ok := p.CPUSecondsPerCycle[c]
			return num("%.4f", v, ok)
		})
	}
	for _, c := range keysOf(b.Profiles, func(p Profile) []string { return mapKeys(p.MemoryPeakMiB) }) {
		row("peak MiB: "+c, func(p Profile) string {
			m, ok := p.MemoryPeakMiB[c]
			if ok && m.Processes > 1 {
				return fmt.Sprintf("%.0f (%d × ≤ %.0f)", m.SumMiB, m.Processes, m.MaxProcessMiB)
			}
			return num("%.0f", m.SumMiB, ok)
		})
	}
	row("**requests/cycle, all**", func(p Profile) string {
		return num("%.1f", usage.Total(p.APIRequestsPerCycleByClient), p.APIRequestsPerCycleByClient != nil)
	})
	for _, c := range keysOf(b.Profiles, func(p Profile) []string { return mapKeys(p.APIRequestsPerCycleByClient) }) {
		row("requests/cycle: "+c, func(p Profile) string {
			v, ok := p.APIRequestsPerCycleByClient[c]
			return num("%.1f", v, ok)
		})
	}
	return buf.String()
}

// keysOf is the sorted union of the profiles' keys.
func keysOf(ps []Profile, keys func(Profile) []string) []string {
	var out []string
	for _, p := range ps {
		out = append(out, keys(p)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
