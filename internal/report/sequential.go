package report

// The sequential comparison of `strandlab run --until-verdict`: each build
// against the baseline, after every round, on stranding episodes and on
// safety violations (internal/sequential; docs/statistics.md, "Until a
// verdict").

import (
	"fmt"
	"slices"
	"strings"

	"github.com/strandlab/strandlab/internal/sequential"
	"github.com/strandlab/strandlab/internal/stats"
)

// SequentialDesign is the design a run until a verdict is held to.
type SequentialDesign struct {
	// Alpha bounds each kind of wrong verdict, over all looks.
	Alpha float64 `json:"alpha"`
	// Margin is the difference of episode rates (per cycle) that "no
	// difference" rules out.
	Margin float64 `json:"margin"`
	// RoundCycles is each build's cycles in a round; MaxCycles bounds each
	// build's cycles over all rounds.
	RoundCycles int `json:"round_cycles"`
	MaxCycles   int `json:"max_cycles"`
}

// DefaultSequentialDesign is a run until a verdict's design where neither
// a flag nor the scenario says otherwise: each kind of wrong verdict at
// most 0.001, "no difference" within 5 stranding episodes per 1,000 cycles.
func DefaultSequentialDesign() SequentialDesign {
	return SequentialDesign{Alpha: 0.001, Margin: 0.005}
}

// Check refuses a design's bad alpha or margin, naming the flag that sets
// it (run's and merge's --verdict-alpha, --verdict-margin).
func (d SequentialDesign) Check() error {
	switch {
	case !(d.Alpha > 0 && d.Alpha < 1):
		return fmt.Errorf("--verdict-alpha: %v is not in (0, 1)", d.Alpha)
	case !(d.Margin > 0 && d.Margin < 1):
		return fmt.Errorf("--verdict-margin: %v is not a rate in (0, 1) (events per cycle: 0.005 is 5 per 1,000)", d.Margin)
	}
	return nil
}

// Sequential is report.json's sequential: the design, the rounds looked at
// and each build's verdict.
type Sequential struct {
	// Test names the test in words, with its reference.
	Test string `json:"test"`
	SequentialDesign
	// Rounds are the rounds' run ids (each a run of every undecided build
	// and the baseline on the same seed, fresh clusters), in order.
	Rounds []string `json:"rounds"`
	// Stopped says why the run stopped.
	Stopped string                `json:"stopped"`
	Builds  []SequentialBuildTest `json:"builds"`
}

// SequentialBuildTest is one build's two sequential tests against the
// baseline.
type SequentialBuildTest struct {
	Name       string         `json:"name"`
	Strandings SequentialTest `json:"strandings"`
	Safety     SequentialTest `json:"safety_violations"`
}

// Decided reports whether the build needs no more rounds: its stranding
// test decided, or its safety test found it has more violations.
func (s SequentialBuildTest) Decided() bool {
	return s.Strandings.Outcome != string(sequential.Continue) || s.Safety.Outcome == string(sequential.More)
}

// SequentialTest is one count's test after the last look.
type SequentialTest struct {
	// Outcome is "less", "more", "no-difference" or "continue".
	Outcome string `json:"outcome"`
	// Verdict is the outcome in a sentence a reader can quote.
	Verdict string `json:"verdict"`
	// PValue is the always-valid p-value (the chance under "no difference"
	// of a mixture likelihood ratio this large at any look); PValues is it
	// after each look.
	PValue  float64   `json:"p_value"`
	PValues []float64 `json:"p_values"`
	// Looks is the rounds with this build; DecidedAt the look the outcome
	// was reached (0: not yet).
	Looks     int `json:"looks"`
	DecidedAt int `json:"decided_at,omitempty"`
	// The pooled counts: events among trials, the build's and the
	// baseline's in the same rounds.
	Events     int `json:"events"`
	Trials     int `json:"trials"`
	BaseEvents int `json:"base_events"`
	BaseTrials int `json:"base_trials"`
	// DifferenceLow and DifferenceHigh bound the build's rate minus the
	// baseline's, at every look at once, at 1 - Alpha.
	DifferenceLow  float64 `json:"difference_low"`
	DifferenceHigh float64 `json:"difference_high"`
	// DesignEffect is how far the rounds varied beyond independent trials
	// (at least 1); each round's evidence was divided by it.
	DesignEffect float64 `json:"design_effect"`
}

// SequentialTestName is Sequential.Test.
const SequentialTestName = "mixture sequential probability ratio test on each round's split of the events (Robbins 1970; always-valid p-value, Johari et al. 2022) and gamma-Poisson confidence sequences for 'no difference' (Howard et al. 2021)"

// SequentialTests tests every build of the rounds but the baseline against
// it, round by round: rounds are the reports of the rounds in order, each
// with the baseline and the builds still undecided when it ran. A build
// is looked at in the rounds it ran in.
func SequentialTests(rounds []*Report, d SequentialDesign) ([]SequentialBuildTest, error) {
	var names []string
	for _, r := range rounds {
		for _, b := range r.Builds {
			if b.Name != Baseline && !slices.Contains(names, b.Name) {
				names = append(names, b.Name)
			}
		}
	}
	var out []SequentialBuildTest
	for _, name := range names {
		t := SequentialBuildTest{Name: name}
		var err error
		if t.Strandings, err = sequentialTest(rounds, name, EpisodeMeasure, d); err != nil {
			return nil, err
		}
		if t.Safety, err = sequentialTest(rounds, name, SafetyMeasure, d); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func sequentialTest(rounds []*Report, name string, m Measure, d SequentialDesign) (SequentialTest, error) {
	var looks []sequential.Round
	var unitsB, unitsA []stats.Unit
	for _, r := range rounds {
		var x, base *Build
		for i := range r.Builds {
			switch r.Builds[i].Name {
			case name:
				x = &r.Builds[i]
			case Baseline:
				base = &r.Builds[i]
			}
		}
		if x == nil || base == nil {
			continue
		}
		// A build with more events than trials (safety violations are not
		// one per cycle) is counted at one per trial at most.
		look := sequential.Round{Events: min(m.Count(*x), m.Trials(*x)), Trials: m.Trials(*x),
			BaseEvents: min(m.Count(*base), m.Trials(*base)), BaseTrials: m.Trials(*base)}
		looks = append(looks, look)
		unitsB = append(unitsB, stats.Unit{Trials: look.Trials, Events: look.Events})
		unitsA = append(unitsA, stats.Unit{Trials: look.BaseTrials, Events: look.BaseEvents})
	}
	deff := 1.0
	for _, u := range [][]stats.Unit{unitsA, unitsB} {
		if c, err := stats.Clustered95(u); err == nil {
			deff = max(deff, c.DesignEffect)
		}
	}
	v, err := sequential.Evaluate(looks, sequential.Design{Alpha: d.Alpha, Margin: d.Margin, DesignEffect: deff})
	if err != nil {
		return SequentialTest{}, fmt.Errorf("sequential test of %s (%s): %w", name, m.Noun, err)
	}
	t := SequentialTest{
		Outcome: string(v.Outcome), PValue: v.PValue, PValues: v.PValues, Looks: v.Looks, DecidedAt: v.DecidedAt,
		Events: v.Events, Trials: v.Trials, BaseEvents: v.BaseEvents, BaseTrials: v.BaseTrials,
		DifferenceLow: v.DiffLow, DifferenceHigh: v.DiffHigh, DesignEffect: deff,
	}
	t.Verdict = sequentialVerdict(name, m, t, d)
	return t, nil
}

// sequentialVerdict is the test's outcome in a sentence.
func sequentialVerdict(name string, m Measure, t SequentialTest, d SequentialDesign) string {
	counts := fmt.Sprintf("%d of %d against %d of %d %s", t.Events, t.Trials, t.BaseEvents, t.BaseTrials, m.Noun)
	p := "always-valid " + pEquals(t.PValue)
	rounds := fmt.Sprintf("%d round%s", t.Looks, plural(t.Looks))
	switch sequential.Outcome(t.Outcome) {
	case sequential.Less:
		return fmt.Sprintf("%s %s %s: %s, %s (after %s)", name, m.fewer, Baseline, counts, p, rounds)
	case sequential.More:
		return fmt.Sprintf("%s %s %s: %s, %s (after %s)", name, m.more, Baseline, counts, p, rounds)
	case sequential.NoDifference:
		return fmt.Sprintf("no difference larger than %s per 1,000 cycles between %s and %s: %s, the difference within %s (after %s)",
			perThousand(d.Margin), name, Baseline, counts, difference(t), rounds)
	}
	return fmt.Sprintf("undecided: %s, %s, the difference within %s (after %s)", counts, p, difference(t), rounds)
}

// difference is the bounds of the difference of rates, per 1,000 cycles.
func difference(t SequentialTest) string {
	return fmt.Sprintf("[%s, %s] per 1,000 cycles", perThousand(t.DifferenceLow), perThousand(t.DifferenceHigh))
}

// perThousand is a rate (or difference of rates) times 1,000, to two
// decimals at most.
func perThousand(r float64) string {
	s := strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", 1000*r), "0"), ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// SequentialRoundCycles is the most cycles a build of round r ran: the
// round's size.
func SequentialRoundCycles(r *Report) int {
	n := 0
	for _, b := range r.Builds {
		n = max(n, b.Cycles)
	}
	return n
}
