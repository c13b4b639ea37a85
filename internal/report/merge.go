package report

// Merging reports: `strandlab merge` pools the reports of one scenario and
// the same controller builds across runs, seeds and machines into one
// report of the same schema (docs/report.md, "Merged reports").

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/runtimeops"
	"github.com/strandlab/strandlab/internal/usage"
)

// MergeInput is one report to pool and the file it was read from (named
// when the merge is refused).
type MergeInput struct {
	Path   string
	Report *Report
}

// ReadMergeInput reads a report to pool: path is a report directory or a
// report.json.
func ReadMergeInput(path string) (MergeInput, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "report.json")
	}
	r, err := Read(path)
	if err != nil {
		return MergeInput{}, err
	}
	return MergeInput{Path: path, Report: r}, nil
}

// MergeOptions are the choices of a merge.
type MergeOptions struct {
	// AllowPartial pools reports that are interrupted or not complete;
	// without it such a report refuses the merge.
	AllowPartial bool
	// Now names the merged report (MergeRunID); zero means time.Now().
	Now time.Time
	// Expect, when set, holds each pooled build to the scenario's band
	// (`strandlab merge --scenario`): it returns the build's unmet bounds,
	// and ok false for a build the scenario has no band for. The pooled
	// builds' expectation is then its result. Without it the runs'
	// expectations are dropped (each belongs to its run), with a note. A
	// function, not the scenario: the report does not read scenario files.
	Expect func(Build) (unmet []string, ok bool)
	// AllowHarnessChange pools runs measured by different strandlab
	// builds (run_provenance.harness), with a note; without it they
	// refuse the merge.
	AllowHarnessChange bool
	// AllowFewerBuilds pools reports whose builds differ (a run until a
	// verdict stops running a build once it is decided): each build is
	// pooled over the reports that have it.
	AllowFewerBuilds bool
}

// RunID is the id (and directory name) of a run of scenario started at
// now: <UTC yyyymmdd-hhmmss>-<scenario>.
func RunID(now time.Time, scenario string) string {
	return now.UTC().Format("20060102-150405") + "-" + scenario
}

// MergeRunID is the run id of a merged report, made at now: like a run's,
// <UTC yyyymmdd-hhmmss>-merge-<scenario>.
func MergeRunID(now time.Time, scenario string) string {
	return RunID(now, "merge-"+scenario)
}

// MergeConflict refuses a merge: Field has different values in two reports.
type MergeConflict struct {
	// Field is report.json's name for it, e.g. "scenario",
	// "builds[fix].provenance.patch_sha256", "components[etcd].version".
	Field  string
	Values [2]string
	Files  [2]string
}

func (c *MergeConflict) Error() string {
	return fmt.Sprintf("cannot merge: %s differs: %q in %s, %q in %s", c.Field, c.Values[0], c.Files[0], c.Values[1], c.Files[1])
}

// ErrPartial is wrapped by the refusal of an interrupted or incomplete
// report when partial reports are not allowed.
var ErrPartial = errors.New("partial report")

// Merge pools reports of one scenario: the same scenario, provider and
// Kubernetes version, equal component versions, and every build present in
// several reports with one provenance; different seeds are the point. A
// report that is interrupted or not complete refuses the merge unless
// opts.AllowPartial, and so does a run pooled twice. What is pooled, and
// how, is in docs/report.md ("Merged reports"). Merge reads and writes no
// file: a refusal leaves nothing behind.
func Merge(inputs []MergeInput, opts MergeOptions) (*Report, error) {
	if len(inputs) < 2 {
		return nil, fmt.Errorf("cannot merge: %d report(s) given, at least two are needed", len(inputs))
	}
	if err := checkMergeable(inputs, opts); err != nil {
		return nil, err
	}
	first := inputs[0].Report
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	out := &Report{
		RunID: MergeRunID(now, first.Scenario), Scenario: first.Scenario, Provider: first.Provider, Seed: first.Seed,
		KubernetesVersion: first.KubernetesVersion, Components: maps.Clone(first.Components), Builds: []Build{},
		Complete: true,
	}
	if out.Components == nil {
		out.Components = map[string]provenance.Component{}
	}
	var notes, partial []string
	pools := map[string]*buildPool{}
	var order []string
	expectations := false
	for _, in := range inputs {
		r := in.Report
		out.Seeds = append(out.Seeds, seedsOf(r)...)
		out.MergedFrom = append(out.MergedFrom, runsOf(r)...)
		out.ClusterStartSeconds += r.ClusterStartSeconds / float64(len(inputs))
		if !r.StartedAt.IsZero() && (out.StartedAt.IsZero() || r.StartedAt.Before(out.StartedAt)) {
			out.StartedAt = r.StartedAt
		}
		if r.FinishedAt.After(out.FinishedAt) {
			out.FinishedAt = r.FinishedAt
		}
		out.Interrupted = out.Interrupted || r.Interrupted
		out.Complete = out.Complete && r.Complete
		if r.Interrupted || !r.Complete {
			partial = append(partial, fmt.Sprintf("%s (%s)", r.RunID, r.Status()))
		}
		for _, b := range r.Builds {
			p := pools[b.Name]
			if p == nil {
				p = newBuildPool(b)
				pools[b.Name] = p
				order = append(order, b.Name)
			}
			p.add(b, r.RunID)
			expectations = expectations || b.Expectation != nil
		}
	}
	slices.Sort(out.Seeds)
	out.Seeds = slices.Compact(out.Seeds)
	if len(partial) > 0 {
		notes = append(notes, "partial reports pooled (their figures cover the cycles they ran): "+strings.Join(partial, ", "))
	}
	checked := false
	for _, name := range order {
		b, n := pools[name].build()
		if opts.Expect != nil {
			if unmet, ok := opts.Expect(b); ok {
				b.Expectation = &Expectation{Met: len(unmet) == 0, Unmet: unmet}
				checked = true
			}
		}
		out.Builds = append(out.Builds, b)
		notes = append(notes, n...)
	}
	switch {
	case checked:
		notes = append(notes, "expectation: the scenario's expect band held to the pooled counts; each run's own is in its report")
	case expectations:
		notes = append(notes, "expectation: not carried over; each run's expect band is checked in its own report")
	}
	out.Notes = append(notes, runProvenanceNotes(inputs, out)...)
	SetTests(out)
	return out, nil
}

// checkMergeable refuses inputs that are not of one scenario and build
// provenance (MergeConflict), partial ones unless allowed, and a run given
// twice.
// buildSet names a report's builds, sorted: "fix,stock".
func buildSet(r *Report) string {
	names := make([]string, len(r.Builds))
	for i, b := range r.Builds {
		names[i] = b.Name
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// CheckCounts refuses counts no run can produce: negative ones, more
// stranded or not-Running cycles than cycles, more episodes than stranded
// cycles, a build named twice.
func (r *Report) CheckCounts() error {
	seen := map[string]bool{}
	for _, b := range r.Builds {
		if seen[b.Name] {
			return fmt.Errorf("builds[%s]: listed twice", b.Name)
		}
		seen[b.Name] = true
		for _, c := range []struct {
			field string
			n     int
		}{{"cycles", b.Cycles}, {"stranded", b.Stranded}, {"stranded_episodes", b.StrandedEpisodes},
			{"safety_violations", b.SafetyViolations}, {"cycles_not_running", b.CyclesNotRunning}} {
			if c.n < 0 {
				return fmt.Errorf("builds[%s].%s: %d is negative", b.Name, c.field, c.n)
			}
		}
		switch {
		case b.Stranded > b.Cycles:
			return fmt.Errorf("builds[%s].stranded: %d is more than its %d cycles", b.Name, b.Stranded, b.Cycles)
		case b.CyclesNotRunning > b.Cycles:
			return fmt.Errorf("builds[%s].cycles_not_running: %d is more than its %d cycles", b.Name, b.CyclesNotRunning, b.Cycles)
		case b.StrandedEpisodes > b.Stranded:
			return fmt.Errorf("builds[%s].stranded_episodes: %d is more than its %d stranded cycles", b.Name, b.StrandedEpisodes, b.Stranded)
		}
	}
	return nil
}

func checkMergeable(inputs []MergeInput, opts MergeOptions) error {
	allowPartial := opts.AllowPartial
	first := inputs[0]
	builds := map[string]MergeInput{} // build name -> first report with it
	runs := map[string]string{}       // run id -> file
	for _, in := range inputs {
		r := in.Report
		if !allowPartial && (r.Interrupted || !r.Complete) {
			return fmt.Errorf("cannot merge: %s is a %w (complete: %t, interrupted: %t); pool it only with --allow-partial",
				in.Path, ErrPartial, r.Complete, r.Interrupted)
		}
		if len(r.Builds) == 0 {
			return fmt.Errorf("cannot merge: %s has no builds", in.Path)
		}
		if err := r.CheckCounts(); err != nil {
			return fmt.Errorf("cannot merge: %s: %w", in.Path, err)
		}
		// Pooled builds are compared with each other: a build missing from
		// one report would be pooled over fewer cycles than the rest.
		if !opts.AllowFewerBuilds {
			if err := differ("builds", buildSet(first.Report), buildSet(r), first, in); err != nil {
				return err
			}
		}
		if err := checkRunProvenance(first, in, opts.AllowHarnessChange); err != nil {
			return err
		}
		if s := r.Scenario; s == "" || s != filepath.Base(s) || s == "." || s == ".." {
			return fmt.Errorf("cannot merge: %s: scenario %q cannot name a report directory", in.Path, s)
		}
		for _, f := range []struct {
			field string
			get   func(*Report) string
		}{
			{"scenario", func(r *Report) string { return r.Scenario }},
			{"provider", func(r *Report) string { return r.Provider }},
			{"kubernetes_version", func(r *Report) string { return r.KubernetesVersion }},
		} {
			if err := differ(f.field, f.get(first.Report), f.get(r), first, in); err != nil {
				return err
			}
		}
		names := slices.Sorted(maps.Keys(first.Report.Components))
		for n := range r.Components {
			if _, ok := first.Report.Components[n]; !ok {
				names = append(names, n)
			}
		}
		for _, n := range names {
			if err := differ("components["+n+"].version", componentVersion(first.Report, n), componentVersion(r, n), first, in); err != nil {
				return err
			}
		}
		for _, b := range r.Builds {
			seen, ok := builds[b.Name]
			if !ok {
				builds[b.Name] = in
				continue
			}
			sp := buildProvenance(seen.Report, b.Name)
			for _, f := range []struct {
				field string
				a, b  string
			}{
				{"module", sp.Module, b.Provenance.Module},
				{"patch", sp.Patch, b.Provenance.Patch},
				{"patch_sha256", sp.PatchSHA256, b.Provenance.PatchSHA256},
			} {
				if err := differ("builds["+b.Name+"].provenance."+f.field, f.a, f.b, seen, in); err != nil {
					return err
				}
			}
		}
		for _, id := range runsOf(r) {
			if other, ok := runs[id]; ok {
				return fmt.Errorf("cannot merge: run %s is in both %s and %s (its cycles would count twice)", id, other, in.Path)
			}
			runs[id] = in.Path
		}
	}
	return nil
}

// checkRunProvenance refuses to pool runs of different scenario files
// (by content, not name) and, unless allowed, of different harness
// builds. A report that does not record them is pooled with a note.
func checkRunProvenance(first, in MergeInput, allowHarnessChange bool) error {
	a, b := first.Report.RunProvenance, in.Report.RunProvenance
	if a == nil || b == nil {
		return nil
	}
	if err := differ("run_provenance.scenario_sha256", a.ScenarioSHA256, b.ScenarioSHA256, first, in); err != nil {
		return err
	}
	if allowHarnessChange {
		return nil
	}
	if err := differ("run_provenance.harness", a.Harness, b.Harness, first, in); err != nil {
		return fmt.Errorf("%w (pool them anyway with --allow-harness-change)", err)
	}
	return nil
}

// runProvenanceNotes says what a merged report's run provenance covers:
// the inputs without one, the harness builds and the machines pooled.
func runProvenanceNotes(inputs []MergeInput, out *Report) []string {
	var notes, missing, harnesses []string
	var machines []provenance.Machine
	for _, in := range inputs {
		rp := in.Report.RunProvenance
		if rp == nil {
			missing = append(missing, in.Report.RunID)
			continue
		}
		if out.RunProvenance == nil {
			c := *rp
			out.RunProvenance = &c
		}
		if !slices.Contains(harnesses, rp.Harness) {
			harnesses = append(harnesses, rp.Harness)
		}
		ms := in.Report.Machines
		if len(ms) == 0 {
			ms = []provenance.Machine{rp.Machine}
		}
		for _, m := range ms {
			if !slices.ContainsFunc(machines, func(x provenance.Machine) bool { return x.ID == m.ID }) {
				machines = append(machines, m)
			}
		}
	}
	if len(missing) > 0 {
		notes = append(notes, "run provenance (harness, scenario hash, machine) not recorded in: "+strings.Join(missing, ", "))
	}
	if len(harnesses) > 1 {
		notes = append(notes, "pooled across strandlab builds: "+strings.Join(harnesses, ", "))
	}
	if len(machines) > 1 {
		out.Machines = machines
		descs := make([]string, len(machines))
		for i, m := range machines {
			descs[i] = fmt.Sprintf("%s (%d CPUs, %.1f GiB)", m.ID, m.CPUs, m.MemoryGiB)
		}
		notes = append(notes, fmt.Sprintf("pooled across %d machines: %s", len(machines), strings.Join(descs, ", ")))
	}
	return notes
}

func differ(field, a, b string, inA, inB MergeInput) error {
	if a == b {
		return nil
	}
	return &MergeConflict{Field: field, Values: [2]string{a, b}, Files: [2]string{inA.Path, inB.Path}}
}

func componentVersion(r *Report, name string) string {
	c, ok := r.Components[name]
	if !ok {
		return "(absent)"
	}
	return c.Version
}

func buildProvenance(r *Report, name string) provenance.ControllerBuild {
	i := slices.IndexFunc(r.Builds, func(b Build) bool { return b.Name == name })
	return r.Builds[i].Provenance
}

// seedsOf and runsOf are what a report pools: its own seed and run id, or
// those of the runs a merged report pooled.
func seedsOf(r *Report) []int64 {
	if len(r.Seeds) > 0 {
		return r.Seeds
	}
	return []int64{r.Seed}
}

func runsOf(r *Report) []string {
	if len(r.MergedFrom) > 0 {
		return r.MergedFrom
	}
	return []string{r.RunID}
}

// buildPool accumulates one build's figures across reports.
type buildPool struct {
	b Build
	// cycles and seconds of churn of the reports with a cycle rate.
	rateCycles   int
	rateSeconds  float64
	noRateCycles int
	// running cycles (the samples of the latency percentiles and the
	// same-node ratio) and their weighted sums.
	running         int
	attach, del     Percentiles
	sameNode        float64
	fullLog         bool
	log             []cycle.Cycle
	requestCycles   int
	requests        map[string]float64
	noRequestCycles int
	// byClient and cpu: cycle-weighted sums of the per-cycle figures of
	// the reports that have them, and the cycles of those and the others.
	byClient perCycleMean
	cpu      perCycleMean
	memory   map[string]usage.Peak
	// runtime pools the runs' runtime operations; runtimeErr says why it
	// cannot (different buckets).
	runtime    runtimeops.Ops
	runtimeErr error
	// watchLag pools the runs' watch lag histograms; watchLagErr says why
	// it could not.
	watchLag    runtimeops.Ops
	watchLagErr error
	// rounds of every report pooled, each naming its run; noRounds and
	// noEpisodes name the runs whose report lacks per-round counts or
	// stranding episodes (written before they were counted).
	rounds     []Round
	noRounds   []string
	noEpisodes []string
}

func newBuildPool(first Build) *buildPool {
	return &buildPool{
		b: Build{Name: first.Name, Provenance: first.Provenance, APIRequestsPerCycle: map[string]float64{},
			Strandings: []Stranding{}, SafetyFindings: []SafetyFinding{}},
		fullLog: true, requests: map[string]float64{},
	}
}

// perCycleMean pools per-cycle figures by key (API requests by client,
// CPU seconds by component): each report's figure weighted by its cycles,
// over the reports that have the figure (a key a report lacks counts 0
// there), as api_requests_per_cycle is pooled.
type perCycleMean struct {
	sums             map[string]float64
	cycles, noCycles int
}

func (m *perCycleMean) add(figures map[string]float64, cycles int) {
	if figures == nil {
		m.noCycles += cycles
		return
	}
	if m.sums == nil {
		m.sums = map[string]float64{}
	}
	m.cycles += cycles
	for k, v := range figures {
		m.sums[k] += v * float64(cycles)
	}
}

// mean is the pooled figures (nil when no report had them) and a note
// when only some reports had them.
func (m *perCycleMean) mean(build, field string, total int) (map[string]float64, string) {
	if m.cycles == 0 {
		return nil, ""
	}
	out := make(map[string]float64, len(m.sums))
	for k, v := range m.sums {
		out[k] = v / float64(m.cycles)
	}
	note := ""
	if m.noCycles > 0 {
		note = fmt.Sprintf("build %s: %s covers %d of %d cycles (the other reports do not have it)", build, field, m.cycles, total)
	}
	return out, note
}

func (p *buildPool) add(x Build, runID string) {
	b := &p.b
	b.Cycles += x.Cycles
	b.CyclesNotRunning += x.CyclesNotRunning
	b.Stranded += x.Stranded
	// Episodes never span runs (each run has its own cluster), so they add.
	b.StrandedEpisodes += Episodes(x)
	if x.Stranded > 0 && x.StrandedEpisodes == 0 {
		p.noEpisodes = append(p.noEpisodes, runID)
	}
	if x.Cycles > 0 && !roundsComplete(x) {
		p.noRounds = append(p.noRounds, runID)
	}
	for _, r := range x.Rounds {
		if r.RunID == "" {
			r.RunID = runID
		}
		p.rounds = append(p.rounds, r)
	}
	b.SafetyViolations += x.SafetyViolations
	for _, s := range x.Strandings {
		if s.RunID == "" {
			s.RunID = runID
		}
		b.Strandings = append(b.Strandings, s)
	}
	for _, f := range x.SafetyFindings {
		if f.RunID == "" {
			f.RunID = runID
		}
		b.SafetyFindings = append(b.SafetyFindings, f)
	}
	b.PhantomListings += x.PhantomListings
	for _, f := range x.PhantomFindings {
		if f.RunID == "" {
			f.RunID = runID
		}
		b.PhantomFindings = append(b.PhantomFindings, f)
	}
	if x.CyclesPerSecond > 0 {
		p.rateCycles += x.Cycles
		p.rateSeconds += float64(x.Cycles) / x.CyclesPerSecond
	} else {
		p.noRateCycles += x.Cycles
	}
	running := max(0, x.Cycles-x.Stranded-x.CyclesNotRunning)
	p.running += running
	w := float64(running)
	p.attach.P50 += w * x.CreatedToRunningMS.P50
	p.attach.P99 += w * x.CreatedToRunningMS.P99
	p.del.P50 += w * x.DeleteToRunningMS.P50
	p.del.P99 += w * x.DeleteToRunningMS.P99
	p.sameNode += w * x.PinningSameNodeRatio
	if len(x.CycleLog) != x.Cycles {
		p.fullLog = false
	}
	p.log = append(p.log, x.CycleLog...)
	if len(x.APIRequestsPerCycle) > 0 {
		p.requestCycles += x.Cycles
		for k, v := range x.APIRequestsPerCycle {
			p.requests[k] += v * float64(x.Cycles)
		}
	} else {
		p.noRequestCycles += x.Cycles
	}
	p.byClient.add(x.APIRequestsPerCycleByClient, x.Cycles)
	p.cpu.add(x.CPUSecondsPerCycle, x.Cycles)
	// A peak is a peak: the largest of the runs'.
	for k, m := range x.MemoryPeakMiB {
		if p.memory == nil {
			p.memory = map[string]usage.Peak{}
		}
		q := p.memory[k]
		p.memory[k] = usage.Peak{SumMiB: max(q.SumMiB, m.SumMiB), MaxProcessMiB: max(q.MaxProcessMiB, m.MaxProcessMiB), Processes: max(q.Processes, m.Processes)}
	}
	if len(x.RuntimeOps) > 0 {
		sum, err := runtimeops.Add(p.runtime, RuntimeOpsHistograms(x))
		if err != nil {
			p.runtimeErr = err
		} else {
			p.runtime = sum
		}
	}
	b.Proxy.EventsDelayed += x.Proxy.EventsDelayed
	b.Proxy.APIErrors += x.Proxy.APIErrors
	for k, n := range x.CSIFaults {
		if b.CSIFaults == nil {
			b.CSIFaults = map[string]int64{}
		}
		b.CSIFaults[k] += n
	}
	b.Proxy.MaxQueueDepth = max(b.Proxy.MaxQueueDepth, x.Proxy.MaxQueueDepth)
	if len(x.Proxy.WatchLag) > 0 {
		if sum, err := runtimeops.Add(p.watchLag, watchLagHistograms(x.Proxy)); err != nil {
			p.watchLagErr = err
		} else {
			p.watchLag = sum
		}
	}
}

// build is the pooled build and the notes on its approximate figures.
func (p *buildPool) build() (Build, []string) {
	b := p.b
	var notes []string
	if len(p.noRounds) == 0 {
		b.Rounds = p.rounds
	} else {
		notes = append(notes, fmt.Sprintf("build %s: no interval with rounds or runs as the unit: %s has no per-round counts",
			b.Name, strings.Join(p.noRounds, ", ")))
	}
	if len(p.noEpisodes) > 0 {
		notes = append(notes, fmt.Sprintf("build %s: stranded_episodes counts each stranded cycle of %s as its own episode (its report has no episodes)",
			b.Name, strings.Join(p.noEpisodes, ", ")))
	}
	setStrandedRates(&b)
	if p.rateSeconds > 0 {
		b.CyclesPerSecond = float64(p.rateCycles) / p.rateSeconds
	}
	if p.noRateCycles > 0 && p.rateCycles > 0 {
		notes = append(notes, fmt.Sprintf("build %s: cycles_per_second covers %d of %d cycles (the other reports have no cycle rate)",
			b.Name, p.rateCycles, b.Cycles))
	}
	if p.running > 0 {
		b.PinningSameNodeRatio = p.sameNode / float64(p.running)
	}
	if p.fullLog {
		var toRunning, deleteToRunning []time.Duration
		for _, c := range p.log {
			if c.Outcome == cycle.Running {
				toRunning = append(toRunning, c.CreateToRunning)
				deleteToRunning = append(deleteToRunning, c.DeleteToRunning)
			}
		}
		b.CreatedToRunningMS = percentilesMS(toRunning)
		b.DeleteToRunningMS = percentilesMS(deleteToRunning)
		b.CycleStepsMS = cycleSteps(p.log)
		b.DetachMS = detachSteps(p.log)
		if len(p.log) > 0 {
			b.CycleLog = p.log
		}
	} else {
		if p.running > 0 {
			w := float64(p.running)
			b.CreatedToRunningMS = Percentiles{P50: p.attach.P50 / w, P99: p.attach.P99 / w}
			b.DeleteToRunningMS = Percentiles{P50: p.del.P50 / w, P99: p.del.P99 / w}
		}
		notes = append(notes, fmt.Sprintf("build %s: created_to_running_ms and delete_to_running_ms are means of the reports' "+
			"percentiles weighted by their cycles that reached Running, not percentiles of the pooled cycles "+
			"(not every report has a full cycle_log; the merged report has none)", b.Name))
	}
	if p.requestCycles > 0 {
		for k, v := range p.requests {
			b.APIRequestsPerCycle[k] = v / float64(p.requestCycles)
		}
		if p.noRequestCycles > 0 {
			notes = append(notes, fmt.Sprintf("build %s: api_requests_per_cycle covers %d of %d cycles (the other reports have no request counts)",
				b.Name, p.requestCycles, b.Cycles))
		}
	}
	var note string
	if b.APIRequestsPerCycleByClient, note = p.byClient.mean(b.Name, "api_requests_per_cycle_by_client", b.Cycles); note != "" {
		notes = append(notes, note)
	}
	if b.CPUSecondsPerCycle, note = p.cpu.mean(b.Name, "cpu_seconds_per_cycle", b.Cycles); note != "" {
		notes = append(notes, note)
	}
	if b.CPUSecondsPerCycle != nil {
		setCPUTotals(&b)
	}
	b.MemoryPeakMiB = p.memory
	if p.runtimeErr != nil {
		notes = append(notes, fmt.Sprintf("build %s: no runtime_ops: the reports bucket them differently (%v)", b.Name, p.runtimeErr))
	} else {
		AddRuntimeOps(&b, p.runtime)
	}
	if p.watchLagErr != nil {
		notes = append(notes, fmt.Sprintf("build %s: no proxy.watch_lag: the reports bucket it differently (%v)", b.Name, p.watchLagErr))
	} else {
		setWatchLag(&b.Proxy, p.watchLag)
	}
	return b, notes
}
