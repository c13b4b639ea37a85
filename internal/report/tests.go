package report

// The tests of each build against the baseline build, computed from the
// builds' counts (internal/stats), and the words the renderings use for them.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/strandlab/strandlab/internal/stats"
)

// Baseline is the build the other builds are tested against (and their
// request counts divided by, in compare.md).
const Baseline = "stock"

// TestAlpha is the level of the tests of each build against the baseline
// (docs/statistics.md).
const TestAlpha = 0.01

// Versus is one test of a build against the baseline build: report.json's
// versus_baseline and safety_versus_baseline.
type Versus struct {
	// Test names the test and the direction its p-value is for, e.g.
	// "fisher-exact one-sided (fewer strandings)".
	Test string `json:"test"`
	// PValue is null when the test was not run (Verdict says why).
	PValue *float64 `json:"p_value"`
	// Verdict is the outcome in words at TestAlpha.
	Verdict string `json:"verdict"`
}

// SetTests sets every build's tests against the baseline (VersusBaseline,
// SafetyVersusBaseline) from the builds' counts, and clears them when the
// report has no baseline: the statistics are computed once, when the
// report's builds are final (Merge) or at each save of a run in progress
// (the runner), not when the report is marshalled or rendered, so that
// report.json, report.md and compare.md show the same tests.
func SetTests(r *Report) {
	base := slices.IndexFunc(r.Builds, func(x Build) bool { return x.Name == Baseline })
	for i := range r.Builds {
		x := &r.Builds[i]
		x.VersusBaseline, x.SafetyVersusBaseline, x.PhantomVersusBaseline, x.NotRunningVersusBaseline = nil, nil, nil, nil
		x.RoundsVersusBaseline, x.AdjustedVersusBaseline = nil, nil
		if base >= 0 && i != base {
			x.VersusBaseline = versus(*x, r.Builds[base], EpisodeMeasure)
			x.SafetyVersusBaseline = versus(*x, r.Builds[base], SafetyMeasure)
			x.PhantomVersusBaseline = versus(*x, r.Builds[base], PhantomMeasure)
			x.NotRunningVersusBaseline = versus(*x, r.Builds[base], NotRunningMeasure)
			x.RoundsVersusBaseline = roundsVersus(*x, r.Builds[base])
			x.AdjustedVersusBaseline = adjustedVersus(*x, r.Builds[base])
		}
	}
}

// Measure is what a test against the baseline counts: events out of
// trials (cycles, or the cycles that could begin an episode).
type Measure struct {
	Noun          string // in the test's name
	Count, Trials func(Build) int
	fewer, more   string // the verdict's verb phrases
}

var (
	// EpisodeMeasure counts stranding episodes out of the cycles that could
	// begin one: a cycle that continues an episode is the same failure,
	// not a new trial (docs/statistics.md, "The unit: stranding episodes").
	EpisodeMeasure = Measure{"stranding episodes", Episodes, EpisodeTrials, "strands less than", "strands more than"}
	// SafetyMeasure counts safety violations out of cycles.
	SafetyMeasure = Measure{"safety violations", func(x Build) int { return x.SafetyViolations }, func(x Build) int { return x.Cycles },
		"has fewer safety violations than", "has more safety violations than"}
	// PhantomMeasure counts phantom listings (one per episode) out of
	// cycles: no failure of a pod, but a build that lists volumes no node
	// has attached is telling the scheduler and the kubelet wrong things.
	PhantomMeasure = Measure{"phantom listings", func(x Build) int { return x.PhantomListings }, func(x Build) int { return x.Cycles },
		"has fewer phantom listings than", "has more phantom listings than"}
	// NotRunningMeasure counts the cycles whose replacement neither ran
	// nor stranded within the cycle timeout, out of cycles.
	NotRunningMeasure = Measure{"cycles not running", func(x Build) int { return x.CyclesNotRunning }, func(x Build) int { return x.Cycles },
		"has fewer cycles not running than", "has more cycles not running than"}
	// Measures are every count a build is tested on against the baseline,
	// in the order compare.md lists them, with the field holding each test.
	Measures = []struct {
		Measure
		Test func(Build) *Versus
	}{
		{EpisodeMeasure, func(x Build) *Versus { return x.VersusBaseline }},
		{SafetyMeasure, func(x Build) *Versus { return x.SafetyVersusBaseline }},
		{PhantomMeasure, func(x Build) *Versus { return x.PhantomVersusBaseline }},
		{NotRunningMeasure, func(x Build) *Versus { return x.NotRunningVersusBaseline }},
	}
)

// versus tests build x against the baseline build base at TestAlpha with
// Fisher's exact test on m's events out of m's trials: one-sided for fewer
// and, when that finds nothing, one-sided for more. When neither rejects,
// it reports the smaller of the two one-sided p-values (the direction the
// counts lean towards; fewer on a tie).
func versus(x, base Build, m Measure) *Versus {
	v := &Versus{Test: "fisher-exact one-sided (fewer " + m.Noun + ")"}
	for _, y := range []Build{x, base} {
		if y.Cycles <= 0 {
			v.Verdict = "not tested: " + y.Name + " has run no cycles"
			return v
		}
		if k, n := m.Count(y), m.Trials(y); k > n {
			v.Verdict = fmt.Sprintf("not tested: %s has %d %s in %d cycles, more than one per cycle", y.Name, k, m.Noun, n)
			return v
		}
	}
	fewer, err := stats.FisherExact(m.Count(base), m.Trials(base), m.Count(x), m.Trials(x), stats.Fewer)
	if err != nil {
		v.Verdict = "not tested: " + err.Error()
		return v
	}
	more, _ := stats.FisherExact(m.Count(base), m.Trials(base), m.Count(x), m.Trials(x), stats.More)
	return decide("fisher-exact one-sided", x, base, m, fewer, more)
}

// decide is the verdict of a test at TestAlpha from its two one-sided
// p-values: fewer if that rejects, else more if that does, else "no
// evidence" with the p-value of the direction the counts lean towards
// (fewer on a tie). test names the test, e.g. "fisher-exact one-sided".
func decide(test string, x, base Build, m Measure, fewer, more float64) *Versus {
	v := &Versus{Test: test + " (fewer " + m.Noun + ")"}
	switch {
	case fewer <= TestAlpha:
		v.PValue = &fewer
		v.Verdict = fmt.Sprintf("%s %s %s, %s", x.Name, m.fewer, base.Name, pEquals(fewer))
	case more <= TestAlpha:
		v.Test = test + " (more " + m.Noun + ")"
		v.PValue = &more
		v.Verdict = fmt.Sprintf("%s %s %s, %s", x.Name, m.more, base.Name, pEquals(more))
	default:
		p := fewer
		if more < fewer {
			v.Test = test + " (more " + m.Noun + ")"
			p = more
		}
		v.PValue = &p
		v.Verdict = fmt.Sprintf("no evidence either way (%s)", pEquals(p))
	}
	return v
}

// roundsVersus tests x's stranding episodes against the baseline's with
// the round as the unit: the rounds of the same run and index (the same
// seed's deletions, so the same pods in the same order) are paired, and
// the paired sign-flip test asks whether x's episodes per round are fewer
// (stats.SignFlip). It makes no assumption about the cycles within a
// round. Not tested without per-round counts or paired rounds.
func roundsVersus(x, base Build) *Versus {
	type key struct {
		run   string
		index int
	}
	index := func(b Build) map[key]int {
		out := map[key]int{}
		n := map[string]int{}
		for _, r := range b.Rounds {
			out[key{r.RunID, n[r.RunID]}] = r.Episodes
			n[r.RunID]++
		}
		return out
	}
	if !roundsComplete(x) || !roundsComplete(base) {
		return &Versus{Test: "sign-flip over paired rounds", Verdict: "not tested: no per-round counts"}
	}
	xs, bs := index(x), index(base)
	var diffs []int
	for k, e := range xs {
		if be, ok := bs[k]; ok {
			diffs = append(diffs, e-be)
		}
	}
	if len(diffs) == 0 {
		return &Versus{Test: "sign-flip over paired rounds", Verdict: "not tested: no round of one run in both builds"}
	}
	slices.Sort(diffs) // map order must not reach the drawn p-values
	fewer, more := stats.SignFlip(diffs)
	return decide(fmt.Sprintf("sign-flip over %d paired rounds", len(diffs)), x, base, EpisodeMeasure, fewer, more)
}

// adjustedVersus is Fisher's test of stranding episodes with each build's
// counts divided by the design effect of the rounds (the larger of the
// two builds', stats.Clustered95, at least 1), rounded: the evidence of d
// dependent cycles taken as that of one (Kish's effective sample size).
// Not tested without per-round counts.
func adjustedVersus(x, base Build) *Versus {
	d := 0.0
	for _, b := range []Build{x, base} {
		if c, ok := RoundsRate(b); ok {
			d = max(d, c.DesignEffect)
		}
	}
	if d == 0 {
		return &Versus{Test: "fisher-exact one-sided, design effect", Verdict: "not tested: no per-round counts"}
	}
	m := EpisodeMeasure
	eff := func(n int) int { return int(math.Round(float64(n) / d)) }
	fewer, err := stats.FisherExact(eff(m.Count(base)), eff(m.Trials(base)), eff(m.Count(x)), eff(m.Trials(x)), stats.Fewer)
	if err != nil {
		return &Versus{Test: "fisher-exact one-sided, design effect", Verdict: "not tested: " + err.Error()}
	}
	more, _ := stats.FisherExact(eff(m.Count(base)), eff(m.Trials(base)), eff(m.Count(x)), eff(m.Trials(x)), stats.More)
	return decide(fmt.Sprintf("fisher-exact one-sided, counts / design effect %.2f", d), x, base, m, fewer, more)
}

// pEquals is "p = <p>" for a verdict.
func pEquals(p float64) string {
	if p <= 0 {
		return "p < 1e-300"
	}
	return "p = " + PValueText(p)
}

// PValueText is p with two significant digits, more when two would round it
// to the other side of TestAlpha (0.0104 is "0.0104", not "0.01"); "< 1e-300"
// for a p-value too small for a float64 (stats.FisherExact returns 0).
func PValueText(p float64) string {
	if p <= 0 {
		return "< 1e-300"
	}
	var s string
	for prec := 2; prec <= 6; prec++ {
		s = strconv.FormatFloat(p, 'g', prec, 64)
		if v, err := strconv.ParseFloat(s, 64); err == nil && (v <= TestAlpha) == (p <= TestAlpha) {
			break
		}
	}
	return strings.Replace(s, "e-0", "e-", 1) // 9.4e-07 -> 9.4e-7
}

// Status says whether r's figures are the whole run's, and if not why.
func (r *Report) Status() string {
	switch {
	case r.Interrupted && r.InterruptedDuring != "":
		return "interrupted during " + r.InterruptedDuring + " (partial)"
	case r.Interrupted:
		return "interrupted (partial)"
	case r.Failure != "" && r.FailedDuring != "":
		return "failed during " + r.FailedDuring + " (partial)"
	case r.Failure != "":
		return "failed (partial)"
	case !r.Complete:
		return "in progress (partial)"
	}
	return "complete"
}
