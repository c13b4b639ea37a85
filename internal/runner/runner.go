// Package runner executes a scenario end to end: for each controller build it
// starts a cluster, creates the workload, drives the churn and writes the
// contract report. It is the orchestration behind `strandlab run` and
// `make e2e`; the pieces it drives live in their own packages.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/churn"
	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/kcmbuild"
	"github.com/strandlab/strandlab/internal/pinning"
	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/report/render"
	"github.com/strandlab/strandlab/internal/runprovenance"
	"github.com/strandlab/strandlab/internal/scenario"
	"github.com/strandlab/strandlab/internal/timeline"
	"github.com/strandlab/strandlab/internal/workload"
)

// Namespace holds the churned workload.
const Namespace = "strandlab"

// Options are a run's inputs; zero values take the scenario's.
type Options struct {
	ScenarioPath string
	Provider     string
	Builds       []string
	Cycles       int // -1: from the scenario
	Seed         *int64
	Keep         bool
	OutputDir    string // _output
	RepoRoot     string
	// Providers are the cluster providers the scenario's cluster.provider
	// chooses from.
	Providers *cluster.Registry
	// Progress receives human progress lines (stderr).
	Progress io.Writer
	// Teardown is the context clusters are stopped with once the run's
	// own context is done (interrupted): cancelling it cuts teardown short
	// (a second Ctrl-C), and the clusters stop as fast as they can. nil:
	// teardown is never cut short.
	Teardown context.Context
	// RunIDSuffix (--run-id-suffix) is appended to the run id:
	// <time>-<scenario>-<suffix>. Shards of one scenario started on several
	// machines in the same second would otherwise get the same run id, and
	// `strandlab merge` refuses a run id twice (docs/ci.md). "" adds none.
	RunIDSuffix string
	// RequestsByClient (--requests-by-client) reads the API server's
	// requests per client around the churn (docs/performance.md). Off by
	// default: the reading is a scrape of the API server's /metrics, a
	// burst of work for it and for the harness just before the first
	// deletion, and seed-122413's first cycle, which depends on the
	// timing of the next seconds, stranded in 2 of 5 runs with it against
	// 6 of 6 without it. `strandlab bench` turns it on.
	RequestsByClient bool
	// CSIDeployment (--csi-driver) is which CSI driver the cluster runs:
	// "" or cluster.CSIStrandlab, or cluster.CSIUpstream (kind only).
	CSIDeployment string
	// RuntimeTimings (--runtime-timings) is a timings file the local
	// provider's simulated kubelets draw their container runtime from
	// (`strandlab runtime-timings`); "" keeps kubelet-sim's built-in ones.
	// The other providers refuse it.
	RuntimeTimings string
	// KubeletVerbosity (--kubelet-verbosity) is the log verbosity of the
	// cluster's kubelets (0: their default), for a run whose kubelet logs
	// are to be read step by step (-v=4 logs each pod's syncs, -v=3 each
	// status patch). It costs the kubelets CPU: not for measuring runs.
	KubeletVerbosity int
	// UntilVerdict (--until-verdict) runs the builds in rounds until each
	// build's sequential test against stock decides (verdict.go); nil runs
	// the scenario's cycles once.
	UntilVerdict *report.SequentialDesign
}

// runIDSuffix is what --run-id-suffix accepts: it ends the report
// directory's name, so a DNS label like the scenario names.
var runIDSuffix = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)

// runIDOf is the id (and directory name) of a run of the scenario named name
// started at now, with suffix appended when there is one.
func runIDOf(now time.Time, name, suffix string) string {
	id := report.RunID(now, name)
	if suffix != "" {
		id += "-" + suffix
	}
	return id
}

// The phases of a run, as an interrupted run's report names the one it
// was stopped in (report.Report.InterruptedDuring).
const (
	PhaseProviderPreparation = "provider preparation"
	PhaseControllerBuild     = "controller build"
	PhaseClusterStart        = "cluster start"
	PhaseWorkloadStart       = "workload start"
	PhaseChurn               = "churn"
	PhaseTeardown            = "teardown"
)

// teardown is the context clusters are stopped with (Options.Teardown).
func (o Options) teardown() context.Context {
	if o.Teardown == nil {
		return context.Background()
	}
	return o.Teardown
}

// Prepare loads and validates everything a run needs before any cluster
// starts — the scenario, its provider (known and available here) and its
// builds — so bad input fails fast with nothing left behind.
func Prepare(ctx context.Context, opts Options) (*scenario.Scenario, error) {
	sc, err := scenario.Load(opts.ScenarioPath)
	if err != nil {
		return nil, err
	}
	if s := opts.RunIDSuffix; s != "" && !runIDSuffix.MatchString(s) {
		return nil, fmt.Errorf("--run-id-suffix: %q is not a DNS label of at most 40 characters (lower-case letters, digits, '-')", s)
	}
	if opts.Provider != "" {
		sc.Cluster.Provider = opts.Provider
	}
	if len(opts.Builds) > 0 {
		sc.Builds = opts.Builds
	}
	if opts.Cycles >= 0 {
		sc.Churn.Cycles = opts.Cycles
	}
	if opts.Seed != nil {
		sc.Seed = *opts.Seed
	}
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %s (with overrides): %w", opts.ScenarioPath, err)
	}
	if opts.UntilVerdict != nil {
		if err := CheckUntilVerdict(*opts.UntilVerdict, sc.Builds); err != nil {
			return nil, fmt.Errorf("scenario %s: %w", opts.ScenarioPath, err)
		}
	}
	provider, err := opts.Providers.Lookup(ctx, sc.Cluster.Provider)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: cluster.provider: %w", opts.ScenarioPath, err)
	}
	caps := provider.Capabilities()
	if !caps.ControllerBuilds && !slices.Equal(sc.Builds, []string{kcmbuild.Stock}) {
		return nil, fmt.Errorf("scenario %s: builds: provider %q runs the cluster's own controller, not builds %v", opts.ScenarioPath, provider.Name(), sc.Builds)
	}
	if err := caps.CheckScenario(sc); err != nil {
		return nil, fmt.Errorf("scenario %s: provider %q cannot run it:\n%w", opts.ScenarioPath, provider.Name(), err)
	}
	// What the provider refuses (its capabilities, and a SpecChecker's
	// own refusals) is checked on the spec each build would start with,
	// before any cluster is touched. The controller binary is not known
	// yet (it is built in Run); builds are checked above.
	for _, b := range sc.Builds {
		if err := cluster.CheckSpec(provider, clusterSpec(sc, b, "", opts.OutputDir, false, opts)); err != nil {
			return nil, fmt.Errorf("scenario %s: provider %q cannot run it:\n%w", opts.ScenarioPath, provider.Name(), err)
		}
	}
	seen := map[string]bool{}
	for i, b := range sc.Builds {
		if seen[b] {
			return nil, fmt.Errorf("builds[%d]: %q is listed twice", i, b)
		}
		seen[b] = true
		if _, err := kcmbuild.Lookup(opts.RepoRoot, b); err != nil {
			return nil, fmt.Errorf("builds[%d]: %w", i, err)
		}
		// A diff that does not apply fails here, before a report
		// directory, latest/ or a cluster exists.
		if caps.ControllerBuilds {
			if err := kcmbuild.Check(ctx, opts.RepoRoot, b); err != nil {
				return nil, fmt.Errorf("builds[%d]: %w", i, err)
			}
		}
	}
	if err := sc.CheckExpectKeys(kcmbuild.Names(opts.RepoRoot)); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", opts.ScenarioPath, err)
	}
	return sc, nil
}

// Run executes the scenario and returns the report directory. The report is
// written (marked partial) even when the run is interrupted or fails midway.
func Run(ctx context.Context, opts Options, sc *scenario.Scenario) (string, error) {
	if opts.UntilVerdict != nil {
		return runUntilVerdict(ctx, opts, sc)
	}
	return runInto(ctx, opts, sc, filepath.Join(opts.OutputDir, "reports"), runIDOf(time.Now(), sc.Name, opts.RunIDSuffix), filepath.Join(opts.OutputDir, "reports", "latest"))
}

// runInto runs sc once, its report in a directory claimed under root as
// id, copied to latest when that is not "".
func runInto(ctx context.Context, opts Options, sc *scenario.Scenario, root, id, latest string) (string, error) {
	reportDir, runID, err := report.ClaimDir(root, id)
	if err != nil {
		return "", fmt.Errorf("create the report directory: %w", err)
	}
	rep := &report.Report{
		RunID: runID, Scenario: sc.Name, Provider: sc.Cluster.Provider, Seed: sc.Seed,
		Components: map[string]provenance.Component{}, Builds: []report.Build{}, StartedAt: time.Now().UTC(),
	}
	if rp, err := runprovenance.Of(opts.ScenarioPath); err == nil {
		rep.RunProvenance = &rp
	} else {
		klog.ErrorS(err, "Reading the run's provenance failed; the report will not record it")
	}
	save := func() error {
		rep.FinishedAt = time.Now().UTC()
		report.SetTests(rep)
		return render.Write(rep, reportDir, latest)
	}
	if err := save(); err != nil {
		return "", fmt.Errorf("write report: %w", err)
	}

	// phase is where the run is, for the report of an interrupted run.
	phase := PhaseProviderPreparation
	// fail ends the run early with err; a run whose context is done was
	// interrupted, and its report says in which phase.
	fail := func(err error) (string, error) {
		if ctx.Err() != nil {
			rep.Interrupted, rep.InterruptedDuring = true, phase
		}
		return reportDir, errors.Join(err, save())
	}
	provider, err := opts.Providers.Lookup(ctx, sc.Cluster.Provider)
	if err != nil {
		return fail(err)
	}
	starter, err := provider.Prepare(ctx)
	if err != nil {
		return fail(fmt.Errorf("prepare the %s provider: %w", provider.Name(), err))
	}
	phase = PhaseControllerBuild
	// Every build's controller is built (or found cached) before the first
	// cluster starts: a patch that does not apply fails the run up front.
	// A provider that runs the cluster's own controller (existing; Prepare
	// allowed it stock alone) needs no binary: its build is the cluster's.
	controllers := map[string]kcmbuild.Result{}
	for _, build := range sc.Builds {
		if !provider.Capabilities().ControllerBuilds {
			controllers[build] = kcmbuild.Result{Provenance: provenance.ControllerBuild{Module: ClusterOwnController}}
			continue
		}
		res, err := kcmbuild.Build(ctx, opts.RepoRoot, build, opts.Progress)
		if err != nil {
			return fail(fmt.Errorf("controller build %s: %w", build, err))
		}
		controllers[build] = res
	}

	var runErr error
	for i, build := range sc.Builds {
		last := i == len(sc.Builds)-1
		b, err := runBuild(ctx, opts, sc, provider, starter, build, controllers[build], filepath.Join(reportDir, build), rep, save, opts.Keep && last, &phase)
		if b != nil {
			rep.Builds = append(rep.Builds, *b)
		}
		if ctx.Err() != nil {
			rep.Interrupted, rep.InterruptedDuring = true, phase
		}
		if err != nil {
			runErr = err
			break
		}
		if rep.Interrupted {
			break
		}
	}
	rep.Complete = runErr == nil && !rep.Interrupted
	if runErr != nil && !rep.Interrupted {
		rep.Failure, rep.FailedDuring = runErr.Error(), phase
	}
	if err := save(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	return reportDir, runErr
}

func runBuild(ctx context.Context, opts Options, sc *scenario.Scenario, provider cluster.Provider, starter cluster.Starter, build string, controller kcmbuild.Result, outDir string,
	rep *report.Report, save func() error, keep bool, phase *string) (*report.Build, error) {
	*phase = PhaseClusterStart
	if provider.Capabilities().ControllerBuilds {
		fmt.Fprintf(opts.Progress, ">> build %s: starting a %d-node %s cluster\n", build, sc.Cluster.Nodes, provider.Name())
	} else {
		fmt.Fprintf(opts.Progress, ">> build %s: the %s cluster's own controller, at least %d schedulable nodes\n", build, provider.Name(), sc.Cluster.Nodes)
	}
	c, err := starter.Start(ctx, clusterSpec(sc, build, controller.Binary, outDir, keep, opts))
	if err != nil {
		return nil, fmt.Errorf("build %s: start cluster: %w", build, err)
	}
	runCtx := ctx // ctx is re-bound to the watches' context below, which ends first
	defer func() {
		if keep {
			printKept(opts.Progress, c)
			return
		}
		if runCtx.Err() == nil {
			*phase = PhaseTeardown
		}
		fmt.Fprintf(opts.Progress, ">> build %s: tearing down the cluster\n", build)
		if err := c.Stop(opts.teardown()); err != nil {
			klog.ErrorS(err, "Teardown failed", "build", build)
			fmt.Fprintf(opts.Progress, ">> build %s: teardown failed: %v\n", build, err)
		}
	}()
	// The harness's watches of this cluster end before the cluster does
	// (deferred calls run last-in first-out), not with the whole run.
	ctx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	fmt.Fprintf(opts.Progress, ">> cluster ready in %.1fs (Kubernetes %s)\n", c.StartDuration().Seconds(), c.KubernetesVersion())
	rep.KubernetesVersion = c.KubernetesVersion()
	rep.ClusterStartSeconds = c.StartDuration().Seconds()
	for _, comp := range c.Components() {
		rep.Components[comp.Name] = comp
	}
	if err := save(); err != nil {
		return nil, err
	}

	*phase = PhaseWorkloadStart
	// A pin to a node the cluster does not have would leave its pod
	// Pending until the cycle times out; local's names are checked with
	// the scenario, the other providers' only now.
	for i, pin := range sc.Scheduling.Static {
		if !slices.Contains(c.Nodes(), pin.Node) {
			return nil, fmt.Errorf("build %s: scheduling.static[%d].node: %q is not a node of the %s cluster (its nodes: %s)", build, i, pin.Node, provider.Name(), strings.Join(c.Nodes(), ", "))
		}
	}
	// Likewise a CSI fault for a node the cluster does not have would fail
	// nothing.
	for i, e := range sc.CSIErrors {
		for j, n := range e.Nodes {
			if !slices.Contains(c.Nodes(), n) {
				return nil, fmt.Errorf("build %s: csiErrors[%d].nodes[%d]: %q is not a node of the %s cluster (its nodes: %s)", build, i, j, n, provider.Name(), strings.Join(c.Nodes(), ", "))
			}
		}
	}
	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return nil, err
	}
	targets, err := createWorkload(ctx, client, sc)
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", build, err)
	}
	pods, err := workload.WatchPods(ctx, client, Namespace)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = workload.PodName(t.StatefulSet, t.Ordinal)
	}
	workloadStart, err := waitWorkloadRunning(ctx, pods, names, opts.Progress, workloadStall)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("build %s: %w (see %s/logs)", build, err, outDir)
	}

	// With a proxy, timelines include its journal.
	proxied := cluster.InstrumentsOf(c).Proxy
	if sc.Proxy == nil {
		proxied = nil
	}
	// With CSI faults, timelines include the CSI driver's journal.
	csiFaults := cluster.InstrumentsOf(c).CSIFaults
	if len(sc.CSIErrors) == 0 {
		csiFaults = nil
	}
	strands, err := startStrandWatch(ctx, client, pods, proxied, csiFaults, Namespace, sc.Churn.StrandingThreshold.Duration)
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", build, err)
	}
	defer func() {
		stopWatching()
		strands.Wait()
	}()
	*phase = PhaseChurn
	fmt.Fprintf(opts.Progress, ">> churning: %d cycles, seed %d\n", sc.Churn.Cycles, sc.Seed)
	// The proxy's counters, the processes' CPU time and the API server's
	// requests per client are read around the churn, so that startup
	// (informers listing everything) does not count per cycle.
	var before fault.Counters
	if proxied != nil {
		if before, err = proxied.ProxyCounters(ctx); err != nil {
			return nil, fmt.Errorf("build %s: %w", build, err)
		}
	}
	var nextPartial time.Time
	meter := newMeter(c, opts.RequestsByClient)
	usageBefore := meter.read(ctx)
	res, err := churn.Run(ctx, client, pods, churn.Config{
		Namespace: Namespace, Targets: targets, Cycles: sc.Churn.Cycles, Seed: sc.Seed, RoundRobin: sc.Churn.Order == "roundRobin",
		CycleTimeout: sc.Churn.CycleTimeout.Duration, Progress: opts.Progress, ProgressEvery: 5 * time.Second,
		StrandedPod: strands.StrandedPod, SafetyViolations: func() int { return len(strands.SafetyViolations()) },
		Concurrency: sc.Churn.Concurrency, Interval: sc.Churn.Interval.Duration,
		Explain:  func(cy cycle.Cycle) []timeline.Entry { return strands.Explain(ctx, cy) },
		Annotate: strands.Annotate,
		OnProgress: func(done cycle.Result) {
			if time.Now().Before(nextPartial) {
				return
			}
			began := time.Now()
			partial := report.BuildFromCycles(build, controller.Provenance, done, strands.SafetyViolations())
			report.AddPhantomListings(&partial, strands.PhantomListings())
			rep.Builds = append(rep.Builds, partial)
			if err := save(); err != nil {
				klog.ErrorS(err, "Writing the partial report failed")
			}
			rep.Builds = rep.Builds[:len(rep.Builds)-1]
			nextPartial = nextPartialSave(time.Now(), time.Since(began))
		},
	})
	// Read at once (before the proxy's journal is saved), with a context
	// of its own: an interrupted run's churn is measured too.
	mctx, mcancel := context.WithTimeout(context.Background(), 30*time.Second)
	usageAfter := meter.read(mctx)
	mcancel()
	b := report.BuildFromCycles(build, controller.Provenance, res, strands.SafetyViolations())
	b.WorkloadStartSeconds = workloadStart.Seconds()
	report.AddPhantomListings(&b, strands.PhantomListings())
	meter.apply(&b, usageBefore, usageAfter)
	if band, ok := sc.BandFor(build); ok && !res.Interrupted {
		unmet := band.Check(outcomeOf(b, res))
		b.Expectation = &report.Expectation{Met: len(unmet) == 0, Unmet: unmet}
	}
	if proxied != nil {
		after, cerr := proxied.ProxyCounters(context.Background())
		if cerr != nil {
			return &b, errors.Join(err, fmt.Errorf("build %s: %w", build, cerr))
		}
		report.AddProxyCounters(&b, before, after)
		if jerr := saveProxyJournal(proxied, filepath.Join(outDir, "logs", "apiproxy-journal.json")); jerr != nil {
			klog.ErrorS(jerr, "Saving the proxy's journal failed", "build", build)
		}
	}
	if csiFaults != nil {
		journal, jerr := csiFaults.CSIFaultJournal(context.Background())
		if jerr != nil {
			return &b, errors.Join(err, fmt.Errorf("build %s: reading the CSI driver's fault journal: %w", build, jerr))
		}
		report.AddCSIFaults(&b, journal)
		if jerr := saveJournal(journal, filepath.Join(outDir, "logs", "csi-fault-journal.json")); jerr != nil {
			klog.ErrorS(jerr, "Saving the CSI driver's fault journal failed", "build", build)
		}
	}
	if res.Interrupted {
		fmt.Fprintf(opts.Progress, ">> interrupted after %d cycles\n", len(res.Cycles))
	}
	return &b, err
}

// ClusterOwnController is the controller build's provenance (module) on a
// provider that runs the cluster's own kube-controller-manager (existing):
// the report's build "stock" is then whatever the cluster runs.
const ClusterOwnController = "the cluster's own kube-controller-manager"

// clusterSpec is the spec a build of sc starts its cluster with (Run), and
// what a SpecChecker provider is asked about (Prepare, with controller ""
// as the binary is not built yet).
func clusterSpec(sc *scenario.Scenario, build, controller, outDir string, keep bool, opts Options) cluster.Spec {
	return cluster.Spec{Name: sc.Name + "-" + build, Nodes: sc.Cluster.Nodes, OutputDir: outDir, Keep: keep,
		CSIDriverName: sc.Cluster.CSIDriver, NodeStatusUpdateFrequency: sc.Cluster.NodeStatusUpdateFrequency.Duration,
		NodeStatusReportFrequency: sc.Cluster.NodeStatusReportFrequency.Duration,
		FailedMountOnTimeout:      sc.Cluster.FailedMountOnTimeout, ControllerManager: controller,
		Pinning: pinningConfig(sc), Proxy: proxyProfile(sc), CSIErrors: sc.CSIErrors,
		Namespace: Namespace, StorageClass: sc.Cluster.StorageClassName(), CSIDeployment: opts.CSIDeployment, Seed: sc.Seed,
		RuntimeTimings: opts.RuntimeTimings, KubeletVerbosity: opts.KubeletVerbosity}
}

// outcomeOf is what a band checks of a build.
func outcomeOf(b report.Build, res cycle.Result) scenario.Outcome {
	o := scenario.Outcome{Cycles: b.Cycles, Stranded: b.Stranded, SafetyViolations: b.SafetyViolations, CyclesNotRunning: b.CyclesNotRunning}
	for _, c := range res.Cycles {
		if c.Index == 0 {
			o.FirstCycle = string(c.Outcome)
		}
	}
	return o
}

// createWorkload creates the scenario's StatefulSets and returns every pod
// the churn may delete (those of churn.statefulSets, default all).
func createWorkload(ctx context.Context, client kubernetes.Interface, sc *scenario.Scenario) ([]churn.Target, error) {
	if err := workload.CreateNamespace(ctx, client, Namespace); err != nil {
		return nil, err
	}
	var targets []churn.Target
	for _, s := range sc.Workload.StatefulSets {
		if err := workload.Create(ctx, client, workload.StatefulSet{Namespace: Namespace, Name: s.Name, Replicas: s.Replicas,
			VolumesPerPod: s.VolumesPerPod, StorageClass: sc.Cluster.StorageClassName(), NoService: s.Service != nil && !*s.Service,
			HostNetwork: sc.Workload.HostNetwork}); err != nil {
			return nil, err
		}
		if len(sc.Churn.StatefulSets) > 0 && !slices.Contains(sc.Churn.StatefulSets, s.Name) {
			continue
		}
		for o := 0; o < int(s.Replicas); o++ {
			targets = append(targets, churn.Target{StatefulSet: s.Name, Ordinal: o})
		}
	}
	return targets, nil
}

func printKept(w io.Writer, c cluster.Cluster) {
	if d, ok := c.(cluster.DownArgsCluster); ok {
		fmt.Fprintf(w, ">> the run's namespace %s is kept, with its workload and volumes (KEEP=1)\n   kubeconfig: %s\n", Namespace, c.Kubeconfig())
		fmt.Fprintf(w, "   remove it with: go run ./tools/strandlab down %s\n", strings.Join(d.DownArgs(), " "))
	} else {
		fmt.Fprintf(w, ">> cluster kept running (KEEP=1)\n   kubeconfig: %s\n", c.Kubeconfig())
	}
	if d, ok := c.(cluster.StateDirCluster); ok {
		fmt.Fprintf(w, "   stop it with: go run ./tools/strandlab down %s\n", d.StateDir())
	}
	fmt.Fprintf(w, "   e.g. kubectl --kubeconfig %s get nodes,pods -A\n", c.Kubeconfig())
}

// pinningConfig turns the scenario's scheduling section into the pinning
// extender's configuration; nil when pinning is off.
func pinningConfig(sc *scenario.Scenario) *pinning.Config {
	sch := sc.Scheduling
	if sch.Pinning == "" || sch.Pinning == "none" {
		return nil
	}
	// Unlisted ordinals of a static scenario are sticky: every pod stays put.
	cfg := &pinning.Config{Sticky: true, Latency: sch.ExtenderLatency, Seed: uint64(sc.Seed)}
	for _, p := range sch.Static {
		cfg.Static = append(cfg.Static, pinning.StaticPin{Namespace: Namespace, StatefulSet: p.StatefulSet, Ordinal: p.Ordinal, Node: p.Node})
	}
	return cfg
}

func proxyProfile(sc *scenario.Scenario) *fault.Profile {
	if sc.Proxy == nil {
		return nil
	}
	p := sc.Proxy.Profile(sc.Seed)
	return &p
}

// saveProxyJournal writes what the proxy delayed and what the controller
// wrote (its last 20,000 entries) next to the components' logs: the raw
// material of every timeline, for a reader who wants more than the report.
func saveProxyJournal(proxied cluster.ProxyReader, path string) error {
	entries, err := proxied.ProxyJournal(context.Background(), time.Time{})
	if err != nil {
		return err
	}
	return saveJournal(entries, path)
}

// saveJournal writes a component's journal next to the components' logs.
func saveJournal(entries []fault.JournalEntry, path string) error {
	data, err := json.MarshalIndent(entries, "", " ")
	if err != nil {
		return err
	}
	// A provider whose components log elsewhere (kind) has made no logs
	// directory yet.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// partialSaveShare bounds the CPU the partial report's writes take from
// the churn: the writing grows with the cycles (the report keeps the cycle
// log, and draws its plot each time), so at the progress line's pace of 5 s
// a long soak spent more and more of the harness's time rewriting it.
const partialSaveShare = 0.02

// nextPartialSave is the earliest time of the next partial report after a
// write that ended at now and took took: the writes then take at most
// partialSaveShare of the churn's time.
func nextPartialSave(now time.Time, took time.Duration) time.Time {
	return now.Add(time.Duration(float64(took) * (1/partialSaveShare - 1)))
}
