package render

// The comparison outputs of a run with several controller builds:
// compare.md (CompareMarkdown) and compare.png (WritePlot), written by Write
// next to report.json whenever the report has at least one build.

import (
	"bytes"
	"cmp"
	"fmt"
	"image/color"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/stats"
	"github.com/strandlab/strandlab/internal/usage"
)

// baseline is the build the others are tested against and divided by.
const baseline = report.Baseline

// File names of the comparison outputs.
const (
	CompareMarkdownFile = "compare.md"
	ComparePlotFile     = "compare.png"
)

// CompareMarkdown renders compare.md: the builds side by side (one column
// per build), the controller's API requests per cycle by request, a verdict
// line per build and a pointer to compare.png. It is a pure function of r.
func CompareMarkdown(r *report.Report) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# strandlab comparison: %s\n\n", r.Scenario)
	fmt.Fprintf(&b, "- run: `%s` (%s), seed %d\n%s", r.RunID, r.Status(), r.Seed, mergedMarkdown(r))
	names := make([]string, len(r.Builds))
	for i, bld := range r.Builds {
		names[i] = "`" + bld.Name + "`"
	}
	if len(names) == 0 {
		b.WriteString("- builds: none yet\n")
		return b.String()
	}
	fmt.Fprintf(&b, "- builds: %s\n", strings.Join(names, ", "))
	if r.Interrupted || !r.Complete {
		b.WriteString("- partial: the figures cover the cycles run so far\n")
	}

	b.WriteString("\n## Outcomes\n\n|  |")
	for _, bld := range r.Builds {
		fmt.Fprintf(&b, " %s |", mdCell(bld.Name))
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---:|", len(r.Builds)))
	b.WriteString("\n")
	rows := []outcomeRow{
		{"cycles", func(x report.Build) string { return fmt.Sprint(x.Cycles) }},
		{"stranded", func(x report.Build) string { return fmt.Sprint(x.Stranded) }},
		{"stranding episodes", func(x report.Build) string { return fmt.Sprint(report.Episodes(x)) }},
		{"stranded rate (95% CI)", func(x report.Build) string {
			lo, hi := interval(x)
			return fmt.Sprintf("%.4f [%.4f, %.4f]", finite(x.StrandedRate), lo, hi)
		}},
		{"95% CI, rounds as unit", func(x report.Build) string { return clusteredText(report.RoundsRate(x)) }},
		{"95% CI, runs as unit", func(x report.Build) string { return clusteredText(report.RunsRate(x)) }},
		{"safety violations", func(x report.Build) string { return fmt.Sprint(x.SafetyViolations) }},
		{"phantom listings", func(x report.Build) string { return fmt.Sprint(x.PhantomListings) }},
		{"cycles not running", func(x report.Build) string { return fmt.Sprint(x.CyclesNotRunning) }},
		{"created-to-running p50 (ms)", func(x report.Build) string { return runningMS(x, x.CreatedToRunningMS.P50) }},
		{"created-to-running p99 (ms)", func(x report.Build) string { return runningMS(x, x.CreatedToRunningMS.P99) }},
		{"delete-to-running p50 (ms)", func(x report.Build) string { return runningMS(x, x.DeleteToRunningMS.P50) }},
		{"delete-to-running p99 (ms)", func(x report.Build) string { return runningMS(x, x.DeleteToRunningMS.P99) }},
		{"cycles/s", func(x report.Build) string { return fmt.Sprintf("%.2f", finite(x.CyclesPerSecond)) }},
		{"controller API requests per cycle (total)", func(x report.Build) string { return fmt.Sprintf("%.2f", requestTotal(x)) }},
		{rowAllRequests, func(x report.Build) string {
			if x.APIRequestsPerCycleByClient == nil {
				return "–"
			}
			return fmt.Sprintf("%.2f", finite(usage.Total(x.APIRequestsPerCycleByClient)))
		}},
		{rowCPU, func(x report.Build) string {
			if x.CPUSecondsPerCycle == nil {
				return "–"
			}
			return fmt.Sprintf("%.4f", finite(x.CPUSecondsTotalPerCycle))
		}},
		{rowHarnessShare, func(x report.Build) string {
			if x.CPUSecondsPerCycle == nil {
				return "–"
			}
			return fmt.Sprintf("%.1f%%", 100*finite(x.HarnessCPUShare))
		}},
	}
	if !slices.ContainsFunc(r.Builds, func(x report.Build) bool { _, ok := report.RunsRate(x); return ok }) {
		// Only a merged report has runs as units.
		rows = slices.DeleteFunc(rows, func(row outcomeRow) bool { return row.name == "95% CI, runs as unit" })
	}
	// The resource rows only where a build has the figures (the local
	// provider's reports).
	if !slices.ContainsFunc(r.Builds, func(x report.Build) bool { return x.APIRequestsPerCycleByClient != nil }) {
		rows = slices.DeleteFunc(rows, func(row outcomeRow) bool { return row.name == rowAllRequests })
	}
	if !slices.ContainsFunc(r.Builds, func(x report.Build) bool { return x.CPUSecondsPerCycle != nil }) {
		rows = slices.DeleteFunc(rows, func(row outcomeRow) bool { return row.name == rowCPU || row.name == rowHarnessShare })
	}
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s |", row.name)
		for _, bld := range r.Builds {
			fmt.Fprintf(&b, " %s |", row.cell(bld))
		}
		b.WriteString("\n")
	}

	writeTests(&b, r)
	writeSequential(&b, r)

	b.WriteString("\n## Controller API requests per cycle\n\n")
	if keys := requestKeys(r.Builds); len(keys) == 0 {
		b.WriteString("No controller requests were counted (no proxy counters in this report).\n")
	} else {
		writeKeyedTable(&b, r.Builds, "request", keys, "%.2f",
			func(x report.Build, k string) float64 { return x.APIRequestsPerCycle[k] }, requestTotal)
	}
	writeResources(&b, r.Builds)
	writeWatchLag(&b, r.Builds)

	b.WriteString("\n## Verdict\n\n")
	base := slices.IndexFunc(r.Builds, func(x report.Build) bool { return x.Name == baseline })
	for i := range r.Builds {
		fmt.Fprintf(&b, "- %s\n", verdict(r.Builds, i, base))
	}

	fmt.Fprintf(&b, "\n## Plot\n\n![comparison of the builds](%s)\n\n", ComparePlotFile)
	fmt.Fprintf(&b, "`%s`, next to this file: (a) stranded rate with its 95%% interval, (b) safety violations, "+
		"(c) created-to-running p50/p99 (ms), (d) controller API requests per cycle, stacked by verb.\n", ComparePlotFile)
	return b.String()
}

// writeKeyedTable writes a table of per-cycle figures by key: one row per
// key, one column per build, a **total** row, and, when a build named
// stock is present, a <build>/stock ratio column for every other build
// ("–" where stock's figure is 0).
func writeKeyedTable(b *bytes.Buffer, builds []report.Build, header string, keys []string, format string,
	value func(report.Build, string) float64, total func(report.Build) float64) {
	base := slices.IndexFunc(builds, func(x report.Build) bool { return x.Name == baseline })
	var others []int
	if base >= 0 {
		for i := range builds {
			if i != base {
				others = append(others, i)
			}
		}
	}
	fmt.Fprintf(b, "| %s |", header)
	for _, bld := range builds {
		fmt.Fprintf(b, " %s |", mdCell(bld.Name))
	}
	for _, i := range others {
		fmt.Fprintf(b, " %s |", mdCell(builds[i].Name+"/"+baseline))
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---:|", len(builds)+len(others)))
	b.WriteString("\n")
	row := func(label string, value func(report.Build) float64) {
		fmt.Fprintf(b, "| %s |", label)
		for _, bld := range builds {
			fmt.Fprintf(b, " "+format+" |", value(bld))
		}
		for _, i := range others {
			fmt.Fprintf(b, " %s |", ratio(value(builds[i]), value(builds[base])))
		}
		b.WriteString("\n")
	}
	for _, k := range keys {
		row(mdCell(k), func(x report.Build) float64 { return finite(value(x, k)) })
	}
	row("**total**", total)
}

// writeResources writes compare.md's sections on what the builds' runs
// cost: API requests per cycle by client, CPU seconds per cycle by
// component, peak memory by component; each only when a build has it
// (docs/performance.md).
func writeResources(b *bytes.Buffer, builds []report.Build) {
	if keys := unionKeys(builds, func(x report.Build) map[string]float64 { return x.APIRequestsPerCycleByClient }); len(keys) > 0 {
		b.WriteString("\n## API requests per cycle by client\n\nEvery client's requests to the API server during the churn, " +
			"as the API server counted them (a watch counts once, when it starts).\n\n")
		writeKeyedTable(b, builds, "client", keys, "%.2f",
			func(x report.Build, k string) float64 { return x.APIRequestsPerCycleByClient[k] },
			func(x report.Build) float64 { return finite(usage.Total(x.APIRequestsPerCycleByClient)) })
	}
	if keys := unionKeys(builds, func(x report.Build) map[string]float64 { return x.CPUSecondsPerCycle }); len(keys) > 0 {
		b.WriteString("\n## CPU seconds per cycle by component\n\nEach component's CPU time during the churn (user + system), " +
			"per cycle; `harness` is strandlab itself.\n\n")
		writeKeyedTable(b, builds, "component", keys, "%.4f",
			func(x report.Build, k string) float64 { return x.CPUSecondsPerCycle[k] },
			func(x report.Build) float64 { return finite(x.CPUSecondsTotalPerCycle) })
	}
	memKeys := unionKeys(builds, func(x report.Build) map[string]usage.Peak { return x.MemoryPeakMiB })
	if len(memKeys) == 0 {
		return
	}
	b.WriteString("\n## Peak memory (MiB) by component\n\nThe sum of the component's processes' peak resident memory " +
		"at the end of the churn (an upper bound of the component's peak), and for several processes the largest one's. " +
		"On kind a \"process\" is a control group (a container or a node's kubelet or containerd), whose peak counts page cache too.\n\n")
	writeCellTable(b, builds, "component", memKeys, func(x report.Build, k string) (string, bool) {
		p, ok := x.MemoryPeakMiB[k]
		if ok && p.Processes > 1 {
			return fmt.Sprintf("%.0f (%d processes, largest %.0f)", finite(p.SumMiB), p.Processes, finite(p.MaxProcessMiB)), true
		}
		return fmt.Sprintf("%.0f", finite(p.SumMiB)), ok
	})
}

// writeCellTable writes a table with one row per key and one column per
// build, each cell cell's text, "–" where a build has none.
func writeCellTable(b *bytes.Buffer, builds []report.Build, header string, keys []string, cell func(report.Build, string) (string, bool)) {
	fmt.Fprintf(b, "| %s |", header)
	for _, bld := range builds {
		fmt.Fprintf(b, " %s |", mdCell(bld.Name))
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(builds)) + "\n")
	for _, k := range keys {
		fmt.Fprintf(b, "| %s |", mdCell(k))
		for _, bld := range builds {
			if text, ok := cell(bld, k); ok {
				fmt.Fprintf(b, " %s |", text)
			} else {
				b.WriteString(" – |")
			}
		}
		b.WriteString("\n")
	}
}

// writeWatchLag tables, per watched resource, how long the controller's
// watch events waited at the proxy for it to read them, when a build has
// the figures.
func writeWatchLag(b *bytes.Buffer, builds []report.Build) {
	keys := report.AttachDetachWatchLagKeys(func(r string) bool {
		return slices.ContainsFunc(builds, func(x report.Build) bool { _, ok := x.Proxy.WatchLag[r]; return ok })
	})
	if len(keys) == 0 {
		return
	}
	b.WriteString("\n## Watch lag at the proxy\n\nHow long the controller's watch events waited at the proxy during the churn, " +
		"after they were due (arrival, or the release of an event a rule held back), for the controller to read them: " +
		"p50 / p99 ms (events), read inside buckets whose first ends at 1 ms, for the resources the attach/detach controller watches " +
		"(report.json has every resource kube-controller-manager watched). What the controller does with an event after reading it is not in it.\n\n")
	writeCellTable(b, builds, "resource", keys, func(x report.Build, k string) (string, bool) {
		l, ok := x.Proxy.WatchLag[k]
		return fmt.Sprintf("%.1f / %.1f (%d)", finite(l.P50MS), finite(l.P99MS), l.Events), ok
	})
}

// unionKeys is the union of the builds' keys of a map, sorted.
func unionKeys[V any](builds []report.Build, m func(report.Build) map[string]V) []string {
	seen := map[string]bool{}
	for _, x := range builds {
		for k := range m(x) {
			seen[k] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Names of the Outcomes rows that only some reports have.
const (
	rowAllRequests  = "API requests per cycle, all clients"
	rowCPU          = "CPU seconds per cycle, all components"
	rowHarnessShare = "harness share of the CPU"
)

// outcomeRow is a row of compare.md's "Outcomes": its name and a build's cell.
type outcomeRow struct {
	name string
	cell func(report.Build) string
}

// clusteredText is a clustered interval's cell: the interval, its units
// and design effect; "–" when there is none (fewer than two units, or no
// per-round counts).
func clusteredText(c stats.ClusteredRate, ok bool) string {
	if !ok {
		return "–"
	}
	return fmt.Sprintf("[%.4f, %.4f], %d units, design effect %.2f", finite(c.Low), finite(c.High), c.Units, finite(c.DesignEffect))
}

// verdict is one build's line under "Verdict".
func verdict(builds []report.Build, i, base int) string {
	x := builds[i]
	name := "`" + x.Name + "`"
	if x.Cycles == 0 {
		return name + ": no cycles run yet"
	}
	lo, hi := interval(x)
	var s string
	if x.Stranded == 0 {
		s = fmt.Sprintf("%s: 0 stranded in %d cycles (95%% CI upper bound %.4f", name, x.Cycles, hi)
	} else {
		s = fmt.Sprintf("%s: %d stranded in %d cycles, %d episode(s) (rate %.4f, 95%% CI %.4f–%.4f", name, x.Stranded, x.Cycles, report.Episodes(x), finite(x.StrandedRate), lo, hi)
	}
	if c, ok := report.RoundsRate(x); ok {
		s += fmt.Sprintf("; rounds as unit %.4f–%.4f", finite(c.Low), finite(c.High))
	}
	s += ")"
	if base >= 0 && base != i && builds[base].Cycles > 0 {
		blo, bhi := interval(builds[base])
		switch {
		case hi < blo:
			s += "; interval entirely below " + baseline + "'s"
		case lo > bhi:
			s += "; interval entirely above " + baseline + "'s"
		default:
			s += "; interval overlaps " + baseline + "'s"
		}
		if v := x.VersusBaseline; v != nil && v.PValue != nil {
			s += "; Fisher exact test: " + v.Verdict
		}
	}
	if x.SafetyViolations > 0 {
		s += fmt.Sprintf("; %d safety violation(s)", x.SafetyViolations)
	} else {
		s += "; no safety violations"
	}
	if x.CyclesNotRunning > 0 {
		s += fmt.Sprintf("; %d cycle(s) not running", x.CyclesNotRunning)
	}
	if e := x.Expectation; e != nil {
		if e.Met {
			s += "; expectation met"
		} else {
			s += "; expectation NOT met: " + strings.Join(e.Unmet, "; ")
		}
	}
	return s
}

// writeTests writes compare.md's "Tests against stock": a row per build
// other than the baseline with both of its tests.
func writeTests(b *bytes.Buffer, r *report.Report) {
	fmt.Fprintf(b, "\n## Tests against %s\n\n", baseline)
	base := slices.IndexFunc(r.Builds, func(x report.Build) bool { return x.Name == baseline })
	switch {
	case base < 0:
		fmt.Fprintf(b, "No build named `%s`: nothing to test against.\n", baseline)
		return
	case len(r.Builds) == 1:
		fmt.Fprintf(b, "Only `%s` ran: nothing to test against it.\n", baseline)
		return
	}
	fmt.Fprintf(b, "Fisher's exact test, one-sided, at α = %g (docs/statistics.md): "+
		"does the build have fewer events than `%s` (or, failing that, more)? Strandings are counted in episodes, "+
		"out of the cycles that could begin one (a cycle that continues an episode is not a new trial); "+
		"safety violations, phantom listings and cycles not running per cycle.\n\n", report.TestAlpha, baseline)
	b.WriteString("| build | count | build vs " + baseline + " | test | p | verdict |\n")
	b.WriteString("|---|---|---:|---|---:|---|\n")
	stock := r.Builds[base]
	for i, x := range r.Builds {
		if i == base {
			continue
		}
		var rows []testRow
		for _, m := range report.Measures {
			rows = append(rows, testRow{m.Noun, m.Measure, m.Test(x)})
			if m.Noun == report.EpisodeMeasure.Noun {
				// The same count with the round as the unit, and with the
				// design effect (docs/statistics.md, "Rounds paired").
				rows = append(rows, testRow{m.Noun + ", rounds paired", m.Measure, x.RoundsVersusBaseline},
					testRow{m.Noun + ", design effect", m.Measure, x.AdjustedVersusBaseline})
			}
		}
		for _, r := range rows {
			v := r.v
			if v == nil {
				v = &report.Versus{Test: "–", Verdict: "not tested (the report carries no test)"}
			}
			p := "–"
			if v.PValue != nil {
				p = report.PValueText(*v.PValue)
			}
			fmt.Fprintf(b, "| %s | %s | %d/%d vs %d/%d | %s | %s | %s |\n", mdCell(x.Name), r.label, r.m.Count(x), r.m.Trials(x), r.m.Count(stock), r.m.Trials(stock), v.Test, p, mdCell(v.Verdict))
		}
	}
	writeEnoughCycles(b, r.Builds[base])
}

// runningMS is a latency of the cycles that reached Running, in ms; "–"
// when none did (a build whose every cycle stranded has no median, not 0).
func runningMS(x report.Build, ms float64) string {
	if x.Cycles-x.Stranded-x.CyclesNotRunning <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", finite(ms))
}

// testRow is a row of compare.md's tests: what is counted, how, and the
// test.
type testRow struct {
	label string
	m     report.Measure
	v     *report.Versus
}

// planPower is the power the "enough cycles" line plans for.
const planPower = 0.8

// writeEnoughCycles says whether the run had the cycles to show a fix that
// removes the bug, at the baseline's measured rate of stranding episodes
// (the unit of the test; stats.PowerPlan): a "no evidence" verdict from
// too few cycles is not evidence of no difference.
func writeEnoughCycles(b *bytes.Buffer, base report.Build) {
	if base.Stranded == 0 || base.Cycles == 0 {
		fmt.Fprintf(b, "\nEnough cycles? `%s` did not strand: there is no rate to plan from (strandlab plan --baseline-rate).\n", baseline)
		return
	}
	rate := report.EpisodeRate(base)
	n, err := stats.PowerPlan(rate, 0, report.TestAlpha, planPower)
	if err != nil {
		fmt.Fprintf(b, "\nEnough cycles? No plan: %v.\n", err)
		return
	}
	verdict := "yes"
	if base.Cycles < n {
		verdict = "no"
	}
	fmt.Fprintf(b, "\nEnough cycles? %s: showing that a build which never strands beats `%s`'s measured rate of stranding episodes %.4g at α = %g with power %g takes %d cycles per build; `%s` ran %d.\n",
		verdict, baseline, rate, report.TestAlpha, planPower, n, baseline, base.Cycles)
}

// interval is the build's 95% interval for the stranded rate; empty (0, 0)
// when no cycle ran.
func interval(x report.Build) (lo, hi float64) {
	if x.Cycles <= 0 {
		return 0, 0
	}
	return finite(x.StrandedRateCI95[0]), finite(x.StrandedRateCI95[1])
}

// requestTotal is the controller's API requests per cycle, all requests.
func requestTotal(x report.Build) float64 {
	keys := make([]string, 0, len(x.APIRequestsPerCycle))
	for k := range x.APIRequestsPerCycle {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a fixed summation order keeps the output deterministic
	t := 0.0
	for _, k := range keys {
		t += finite(x.APIRequestsPerCycle[k])
	}
	return t
}

// requestKeys is the union of the builds' request keys, sorted.
func requestKeys(builds []report.Build) []string {
	return unionKeys(builds, func(x report.Build) map[string]float64 { return x.APIRequestsPerCycle })
}

// requestVerbs are the verbs of requestKeys, sorted.
func requestVerbs(builds []report.Build) []string {
	var verbs []string
	for _, k := range requestKeys(builds) {
		if v := verb(k); !slices.Contains(verbs, v) {
			verbs = append(verbs, v)
		}
	}
	return verbs
}

// verb is the verb of a "VERB resource[/subresource]" key.
func verb(key string) string {
	v, _, _ := strings.Cut(key, " ")
	return v
}

func ratio(x, base float64) string {
	if base == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", x/base)
}

// finite maps NaN and ±Inf to 0, so that no figure or plot carries them.
func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// WritePlot writes compare.png to path atomically (a temp file in the same
// directory, renamed over path): four panels side by side, one bar or point
// per build in each. It works with any number of builds, including builds
// that ran no cycle.
func WritePlot(r *report.Report, path string) error {
	png, err := drawPlot(r)
	if err != nil {
		return err
	}
	return report.WriteFileAtomic(path, png)
}

// Plot geometry.
const (
	plotDPI     = 96
	panelHeight = 4.5 * vg.Inch
	headerH     = 0.45 * vg.Inch
	// legendFontSize and the height of a legend row it makes.
	legendFontSize vg.Length = 9 // points
	legendRowH     vg.Length = 12
)

var (
	colorRate   = color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff}
	colorSafety = color.RGBA{R: 0xc4, G: 0x4e, B: 0x52, A: 0xff}
	colorP50    = color.RGBA{R: 0x55, G: 0xa8, B: 0x68, A: 0xff}
	colorP99    = color.RGBA{R: 0xdd, G: 0x84, B: 0x52, A: 0xff}
	// verbColors stack the request panel's bars, one colour per verb.
	verbColors = []color.Color{
		color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff},
		color.RGBA{R: 0xdd, G: 0x84, B: 0x52, A: 0xff},
		color.RGBA{R: 0x55, G: 0xa8, B: 0x68, A: 0xff},
		color.RGBA{R: 0xc4, G: 0x4e, B: 0x52, A: 0xff},
		color.RGBA{R: 0x81, G: 0x72, B: 0xb3, A: 0xff},
		color.RGBA{R: 0x93, G: 0x78, B: 0x60, A: 0xff},
		color.RGBA{R: 0xda, G: 0x8b, B: 0xc3, A: 0xff},
		color.RGBA{R: 0x8c, G: 0x8c, B: 0x8c, A: 0xff},
	}
)

// drawPlot is renderPlot; tests replace it to make drawing fail.
var drawPlot = renderPlot

// renderPlot draws compare.png in memory.
func renderPlot(r *report.Report) (out []byte, err error) {
	defer func() {
		// gonum/plot panics on some degenerate inputs; a report must not
		// take the run down with it.
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("report: drawing %s: %v", ComparePlotFile, p)
		}
	}()
	n := len(r.Builds)
	names := make([]string, n)
	for i, x := range r.Builds {
		names[i] = x.Name
	}
	// Each panel is wide enough for its categories; with 1-3 builds 4 in.
	panelW := 4*vg.Inch + vg.Length(max(0, n-3))*0.9*vg.Inch
	slot := (panelW - 1.2*vg.Inch) / vg.Length(max(n, 1)) // data width per build
	barW := min(slot*0.6, 1.2*vg.Inch)

	panels := make([]*plot.Plot, 0, 4)
	legendRows := []int{0, 0, min(n, 1) * 2, len(requestVerbs(r.Builds))}
	for _, mk := range []func([]report.Build, vg.Length) (*plot.Plot, error){ratePanel, safetyPanel, latencyPanel, requestPanel} {
		p, err := mk(r.Builds, barW)
		if err != nil {
			return nil, err
		}
		setBuildAxis(p, names, slot, legendRows[len(panels)], len(panels) == 1)
		panels = append(panels, p)
	}

	w, h := panelW*vg.Length(len(panels)), panelHeight+headerH
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(plotDPI), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	header := text.Style{
		Color:   color.Black,
		Font:    font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, 13),
		XAlign:  draw.XCenter,
		YAlign:  draw.YCenter,
		Handler: plot.DefaultTextHandler,
	}
	title := fmt.Sprintf("strandlab: %s, seed %d, run %s (%s)", r.Scenario, r.Seed, cmp.Or(r.RunID, "-"), r.Status())
	if n == 0 {
		title += ": no builds"
	}
	dc.FillText(header, vg.Point{X: w / 2, Y: h - headerH/2}, title)

	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadTop: headerH, PadBottom: 0.1 * vg.Inch,
		PadLeft: 0.1 * vg.Inch, PadRight: 0.15 * vg.Inch, PadX: 0.3 * vg.Inch}
	canvases := plot.Align([][]*plot.Plot{panels}, tiles, dc)
	for i, p := range panels {
		p.Draw(canvases[0][i])
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// setBuildAxis puts the build names on the X axis (one category per build,
// labels slanted when they would not fit), starts the Y axis at 0 and leaves
// head room above the data for the legend's rows (drawn in the data area).
func setBuildAxis(p *plot.Plot, names []string, slot vg.Length, legendRows int, integerY bool) {
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	if len(names) == 0 {
		p.X.Min, p.X.Max = -0.5, 0.5
		p.X.Tick.Marker = plot.ConstantTicks(nil)
	} else {
		p.NominalX(names...)
		widest := vg.Length(0)
		for _, s := range names {
			widest = max(widest, p.X.Tick.Label.Width(s))
		}
		if widest > slot*0.95 {
			p.X.Tick.Label.Rotation = math.Pi / 6
			p.X.Tick.Label.XAlign = draw.XRight
			p.X.Tick.Label.YAlign = draw.YTop
		}
	}
	p.Y.Min = 0
	if !(p.Y.Max > 0) || math.IsInf(p.Y.Max, 0) {
		p.Y.Max = 1
	}
	// The data area is roughly the panel less its title and axes.
	legend := min(float64(legendRows)*float64(legendRowH)/float64(panelHeight-1.3*vg.Inch), 0.6)
	p.Y.Max *= 1.08 / (1 - legend)
	p.Y.Tick.Marker = niceTicks{integer: integerY}
}

// niceTicks are major ticks every 1, 2 or 5 × 10^k, about five of them,
// labelled with just the decimals the step needs; integer ones step by
// whole numbers (counts).
type niceTicks struct{ integer bool }

func (nt niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return nil
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	if nt.integer {
		step = max(step, 1)
	}
	prec := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	var ts []plot.Tick
	for i := math.Ceil(lo/step - 1e-9); i*step <= hi+step*1e-9; i++ {
		v := i * step
		if v == 0 {
			v = 0 // not -0
		}
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', prec, 64)})
	}
	return ts
}

func newPanel(title, ylabel string) *plot.Plot {
	p := plot.New()
	for _, f := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		f.Variant = "Sans"
	}
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = legendFontSize
	p.Add(plotter.NewGrid()) // first, so that the data are drawn over it
	return p
}

func bars(vs []float64, w vg.Length, c color.Color) (*plotter.BarChart, error) {
	b, err := plotter.NewBarChart(plotter.Values(vs), w)
	if err != nil {
		return nil, err
	}
	b.Color = c
	b.LineStyle.Width = vg.Length(0.5)
	return b, nil
}

// rateErr is the stranded rate with its interval, relative to the rate as
// plotter.NewYErrorBars wants it.
type rateErr struct {
	plotter.XYs
	plotter.YErrors
}

func ratePanel(builds []report.Build, barW vg.Length) (*plot.Plot, error) {
	p := newPanel("(a) stranded rate, 95% interval", "stranded / cycles")
	if len(builds) == 0 {
		return p, nil
	}
	re := rateErr{XYs: make(plotter.XYs, len(builds)), YErrors: make(plotter.YErrors, len(builds))}
	rates := make([]float64, len(builds))
	for i, x := range builds {
		rate := 0.0
		if x.Cycles > 0 {
			rate = min(max(finite(x.StrandedRate), 0), 1)
		}
		lo, hi := interval(x)
		lo, hi = min(lo, rate), max(hi, rate)
		rates[i] = rate
		re.XYs[i] = plotter.XY{X: float64(i), Y: rate}
		re.YErrors[i] = struct{ Low, High float64 }{rate - lo, hi - rate}
	}
	b, err := bars(rates, barW, colorRate)
	if err != nil {
		return nil, err
	}
	eb, err := plotter.NewYErrorBars(re)
	if err != nil {
		return nil, err
	}
	eb.LineStyle.Width = vg.Points(1.5)
	eb.CapWidth = min(barW/2, vg.Points(12))
	sc, err := plotter.NewScatter(re.XYs)
	if err != nil {
		return nil, err
	}
	sc.GlyphStyle.Shape = draw.CircleGlyph{}
	sc.GlyphStyle.Radius = vg.Points(2.5)
	p.Add(b, eb, sc)
	return p, nil
}

func safetyPanel(builds []report.Build, barW vg.Length) (*plot.Plot, error) {
	p := newPanel("(b) safety violations", "violations")
	if len(builds) == 0 {
		return p, nil
	}
	vs := make([]float64, len(builds))
	for i, x := range builds {
		vs[i] = float64(max(x.SafetyViolations, 0))
	}
	b, err := bars(vs, barW, colorSafety)
	if err != nil {
		return nil, err
	}
	p.Add(b)
	return p, nil
}

func latencyPanel(builds []report.Build, barW vg.Length) (*plot.Plot, error) {
	p := newPanel("(c) replacement created to Running (ms)", "ms")
	if len(builds) == 0 {
		return p, nil
	}
	p50, p99 := make([]float64, len(builds)), make([]float64, len(builds))
	for i, x := range builds {
		p50[i] = max(finite(x.CreatedToRunningMS.P50), 0)
		p99[i] = max(finite(x.CreatedToRunningMS.P99), 0)
	}
	b50, err := bars(p50, barW/2, colorP50)
	if err != nil {
		return nil, err
	}
	b99, err := bars(p99, barW/2, colorP99)
	if err != nil {
		return nil, err
	}
	b50.Offset, b99.Offset = -barW/4, barW/4
	p.Add(b50, b99)
	p.Legend.Add("p50", b50)
	p.Legend.Add("p99", b99)
	return p, nil
}

func requestPanel(builds []report.Build, barW vg.Length) (*plot.Plot, error) {
	p := newPanel("(d) controller API requests, by verb", "requests / cycle")
	if len(builds) == 0 {
		return p, nil
	}
	// One stacked layer per verb, in sorted order.
	verbs := requestVerbs(builds)
	if len(verbs) == 0 {
		b, err := bars(make([]float64, len(builds)), barW, colorRate)
		if err != nil {
			return nil, err
		}
		p.Add(b)
		return p, nil
	}
	var below *plotter.BarChart
	for j, v := range verbs {
		vs := make([]float64, len(builds))
		for i, x := range builds {
			keys := make([]string, 0, len(x.APIRequestsPerCycle))
			for k := range x.APIRequestsPerCycle {
				if verb(k) == v {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				vs[i] += max(finite(x.APIRequestsPerCycle[k]), 0)
			}
		}
		b, err := bars(vs, barW, verbColors[j%len(verbColors)])
		if err != nil {
			return nil, err
		}
		if below != nil {
			b.StackOn(below)
		}
		below = b
		p.Add(b)
		p.Legend.Add(v, b)
	}
	return p, nil
}
