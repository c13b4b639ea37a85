package report

// The tests of each build against the baseline build, computed from the
// builds' counts (internal/stats), and the words the renderings use for them.

import (
	"fmt"
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
		if base >= 0 && i != base {
			x.VersusBaseline = versus(*x, r.Builds[base], EpisodeMeasure)
			x.SafetyVersusBaseline = versus(*x, r.Builds[base], SafetyMeasure)
			x.PhantomVersusBaseline = versus(*x, r.Builds[base], PhantomMeasure)
			x.NotRunningVersusBaseline = versus(*x, r.Builds[base], NotRunningMeasure)
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
	if fewer <= TestAlpha {
		v.PValue = &fewer
		v.Verdict = fmt.Sprintf("%s %s %s, %s", x.Name, m.fewer, base.Name, pEquals(fewer))
		return v
	}
	more, _ := stats.FisherExact(m.Count(base), m.Trials(base), m.Count(x), m.Trials(x), stats.More)
	if more <= TestAlpha {
		v.Test = "fisher-exact one-sided (more " + m.Noun + ")"
		v.PValue = &more
		v.Verdict = fmt.Sprintf("%s %s %s, %s", x.Name, m.more, base.Name, pEquals(more))
		return v
	}
	// Neither: the p-value of the direction the counts lean towards.
	p := fewer
	if more < fewer {
		v.Test = "fisher-exact one-sided (more " + m.Noun + ")"
		p = more
	}
	v.PValue = &p
	v.Verdict = fmt.Sprintf("no evidence either way (%s)", pEquals(p))
	return v
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
