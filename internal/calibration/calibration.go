// Package calibration compares what two cluster providers measured on the
// same profiles, seeds and controller builds: local's simulated kubelets
// against kind's real ones (docs/kind.md, "Calibration"). For each profile
// and build it tables every class of event's rate on each provider with its
// interval and the two-sided exact test of one against the other, and the
// timings that decide the attach/detach races side by side with a
// two-sample Kolmogorov–Smirnov test; and it says, as an effect size,
// whether the providers agree. It is pure: `strandlab calibrate` runs the
// profiles and hands it the reports.
package calibration

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/stats"
)

// The agreement criteria (docs/kind.md): rates are compared only where
// each provider saw MinEvents of a class, and agree within RateFactor of
// each other; a timing's medians agree within MedianShare of the
// reference's median or MedianSlack, whichever is larger, with a
// Kolmogorov–Smirnov distance of at most MaxKSDistance.
const (
	MinEvents     = 20
	RateFactor    = 1.5
	MedianShare   = 0.15
	MedianSlack   = 250 * time.Millisecond
	MaxKSDistance = 0.15
)

// Verdicts.
const (
	Agree     = "agree"
	Disagree  = "disagree"
	TooFew    = "too few events"      // a side saw fewer than MinEvents
	NoSamples = "no samples"          // a side has no timing samples
	NoneSeen  = "none on either side" // 0 events on both sides
)

// Run is one report and the provider it ran on.
type Run struct {
	Provider string
	Report   *report.Report
	// Path is the report's file, for the table's sources.
	Path string
}

// Classes of events.
const (
	FirstCycleStranded = "first cycle stranded" // per run: its cycle 0 stranded
	StrandingEpisodes  = "stranding episodes"   // per cycle
	SafetyViolations   = "safety violations"    // per cycle
	PhantomListings    = "phantom listings"     // per cycle
	// DetachingCycles counts the cycles whose volume was detached from
	// the old node (per logged cycle): the timings of a detach rest on
	// them only, so two providers that detach in different cycles
	// compare different samples.
	DetachingCycles = "cycles with a detach"
)

// Timing measures, from the reports' cycle logs.
const (
	DeleteToRunning = "delete → Running"
	DeleteToDetach  = "delete → detach"
	ListedToDetach  = "listed → detach"
	// The stages of delete → Running and what decides whether a cycle
	// detaches: the old pod's end and the StatefulSet controller's
	// re-create (delete → replacement), the kubelet dropping the volume
	// from volumesInUse (delete → released), and the new node's attach,
	// mount and start (bound → Running).
	DeleteToReplacement = "delete → replacement"
	DeleteToReleased    = "delete → released"
	BoundToRunning      = "bound → Running"
	// The old pod's end, within delete → replacement: its terminal phase
	// (containers stopped, status written) and its removal (the
	// kubelet's final delete, after the volumes' teardown).
	DeleteToTerminal = "delete → old pod terminal"
	DeleteToGone     = "delete → old pod gone"
	// delete → detach's stages, over the cycles with both ends: the old
	// kubelet's teardown and node status (terminal → released) and the
	// controller's detach after it (released → detach); and the old pod's
	// end over the detaching cycles only, which shows a difference in
	// which cycles detach that delete → detach alone would hide.
	TerminalToReleased        = "old pod terminal → released"
	ReleasedToDetach          = "released → detach"
	DeleteToTerminalDetaching = "delete → old pod terminal, cycles with a detach"
)

// Measures is every timing a table compares, in its order.
var Measures = []string{DeleteToRunning, DeleteToReplacement, DeleteToTerminal, DeleteToGone, BoundToRunning, DeleteToReleased,
	TerminalToReleased, DeleteToDetach, DeleteToTerminalDetaching, ReleasedToDetach, ListedToDetach}

// Side is one provider's count of a class.
type Side struct {
	Trials int        `json:"trials"`
	Events int        `json:"events"`
	Rate   float64    `json:"rate"`
	CI95   [2]float64 `json:"ci95"`
}

// RateRow compares one class of events of one profile and build.
type RateRow struct {
	Scenario string `json:"scenario"`
	Build    string `json:"build"`
	Class    string `json:"class"`
	// Unit is what a trial is: "runs" or "cycles".
	Unit string `json:"unit"`
	// Sides are the providers' counts, in Table.Providers' order.
	Sides [2]Side `json:"sides"`
	// Ratio is the first provider's rate over the second's; absent when
	// the second's is 0.
	Ratio *float64 `json:"ratio,omitempty"`
	// P is the two-sided Fisher exact test of the two rates.
	P       float64 `json:"p"`
	Verdict string  `json:"verdict"`
}

// TimingSide is one provider's distribution of a timing.
type TimingSide struct {
	N     int     `json:"n"`
	P50MS float64 `json:"p50_ms"`
	P90MS float64 `json:"p90_ms"`
}

// TimingRow compares one timing of one profile and build.
type TimingRow struct {
	Scenario string        `json:"scenario"`
	Build    string        `json:"build"`
	Measure  string        `json:"measure"`
	Sides    [2]TimingSide `json:"sides"`
	// MedianDiffMS is the first provider's median minus the second's.
	MedianDiffMS float64 `json:"median_diff_ms"`
	KSDistance   float64 `json:"ks_distance"`
	KSP          float64 `json:"ks_p"`
	Verdict      string  `json:"verdict"`
}

// Source is what one provider's rows of a profile rest on.
type Source struct {
	Scenario string  `json:"scenario"`
	Provider string  `json:"provider"`
	Runs     int     `json:"runs"`
	Seeds    []int64 `json:"seeds"`
	// Cycles per build.
	Cycles map[string]int `json:"cycles"`
	// Incomplete counts the runs that were interrupted or did not
	// complete (their cycles count).
	Incomplete int `json:"incomplete,omitempty"`
}

// Table is the calibration: calibration.json.
type Table struct {
	// Providers: the compared providers; the second is the reference
	// (kind, whose numbers a published rate must hold on).
	Providers [2]string   `json:"providers"`
	Rates     []RateRow   `json:"rates"`
	Timings   []TimingRow `json:"timings"`
	Sources   []Source    `json:"sources"`
}

// key groups the runs of one profile and build.
type key struct{ scenario, build string }

// tally is one provider's pooled runs of one profile and build.
type tally struct {
	runs, firstStranded, cycles, episodes, safety, phantoms int
	logged, detaching                                       int
	timings                                                 map[string][]float64
}

// Compare tables runs on providers (the second the reference). A run on
// another provider is an error, as is a provider with no runs.
func Compare(providers [2]string, runs []Run) (*Table, error) {
	if providers[0] == providers[1] {
		return nil, fmt.Errorf("calibration: compare two providers, got %q twice", providers[0])
	}
	tallies := map[key]*[2]tally{}
	sources := map[[2]string]*Source{}
	var keys []key
	seen := [2]bool{}
	for _, r := range runs {
		side := slices.Index(providers[:], r.Provider)
		if side < 0 {
			return nil, fmt.Errorf("calibration: %s ran on %q, not on %s or %s", r.Path, r.Provider, providers[0], providers[1])
		}
		seen[side] = true
		src := sources[[2]string{r.Report.Scenario, r.Provider}]
		if src == nil {
			src = &Source{Scenario: r.Report.Scenario, Provider: r.Provider, Cycles: map[string]int{}}
			sources[[2]string{r.Report.Scenario, r.Provider}] = src
		}
		src.Runs++
		seeds := r.Report.Seeds
		if len(seeds) == 0 {
			seeds = []int64{r.Report.Seed}
		}
		for _, s := range seeds {
			if !slices.Contains(src.Seeds, s) {
				src.Seeds = append(src.Seeds, s)
			}
		}
		if !r.Report.Complete || r.Report.Interrupted {
			src.Incomplete++
		}
		for _, b := range r.Report.Builds {
			k := key{r.Report.Scenario, b.Name}
			if tallies[k] == nil {
				tallies[k] = &[2]tally{}
				keys = append(keys, k)
			}
			t := &tallies[k][side]
			if t.timings == nil {
				t.timings = map[string][]float64{}
			}
			src.Cycles[b.Name] += b.Cycles
			t.cycles += b.Cycles
			t.episodes += b.StrandedEpisodes
			t.safety += b.SafetyViolations
			t.phantoms += b.PhantomListings
			t.logged += len(b.CycleLog)
			for _, c := range b.CycleLog {
				if c.Index == 0 {
					t.runs++
					if c.Outcome == cycle.Stranded {
						t.firstStranded++
					}
				}
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				if c.Outcome == cycle.Running && c.DeleteToRunning > 0 {
					t.timings[DeleteToRunning] = append(t.timings[DeleteToRunning], ms(c.DeleteToRunning))
					if !c.ReplacementBoundAt.IsZero() {
						runningAt := c.DeletedAt.Add(c.DeleteToRunning)
						t.timings[BoundToRunning] = append(t.timings[BoundToRunning], ms(runningAt.Sub(c.ReplacementBoundAt)))
					}
				}
				if !c.ReplacementSeenAt.IsZero() && !c.DeletedAt.IsZero() {
					t.timings[DeleteToReplacement] = append(t.timings[DeleteToReplacement], ms(c.ReplacementSeenAt.Sub(c.DeletedAt)))
				}
				if c.DeleteToTerminal > 0 {
					t.timings[DeleteToTerminal] = append(t.timings[DeleteToTerminal], ms(c.DeleteToTerminal))
				}
				if c.DeleteToGone > 0 {
					t.timings[DeleteToGone] = append(t.timings[DeleteToGone], ms(c.DeleteToGone))
				}
				if c.DeleteToReleased > 0 {
					t.timings[DeleteToReleased] = append(t.timings[DeleteToReleased], ms(c.DeleteToReleased))
				}
				if c.DeleteToTerminal > 0 && c.DeleteToReleased >= c.DeleteToTerminal {
					t.timings[TerminalToReleased] = append(t.timings[TerminalToReleased], ms(c.DeleteToReleased-c.DeleteToTerminal))
				}
				if c.DeleteToDetach > 0 {
					t.detaching++
					t.timings[DeleteToDetach] = append(t.timings[DeleteToDetach], ms(c.DeleteToDetach))
					if c.DeleteToTerminal > 0 {
						t.timings[DeleteToTerminalDetaching] = append(t.timings[DeleteToTerminalDetaching], ms(c.DeleteToTerminal))
					}
					if c.DeleteToReleased > 0 && c.DeleteToDetach >= c.DeleteToReleased {
						t.timings[ReleasedToDetach] = append(t.timings[ReleasedToDetach], ms(c.DeleteToDetach-c.DeleteToReleased))
					}
				}
				if c.ListedToDetach > 0 {
					t.timings[ListedToDetach] = append(t.timings[ListedToDetach], ms(c.ListedToDetach))
				}
			}
		}
	}
	for i, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("calibration: no run on %s", providers[i])
		}
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.scenario, b.scenario), cmp.Compare(a.build, b.build)) })
	t := &Table{Providers: providers, Rates: []RateRow{}, Timings: []TimingRow{}}
	for _, k := range keys {
		ts := tallies[k]
		for _, c := range []struct {
			class, unit string
			trials      func(tally) int
			events      func(tally) int
		}{
			{FirstCycleStranded, "runs", func(x tally) int { return x.runs }, func(x tally) int { return x.firstStranded }},
			{StrandingEpisodes, "cycles", func(x tally) int { return x.cycles }, func(x tally) int { return x.episodes }},
			{SafetyViolations, "cycles", func(x tally) int { return x.cycles }, func(x tally) int { return x.safety }},
			{PhantomListings, "cycles", func(x tally) int { return x.cycles }, func(x tally) int { return x.phantoms }},
			{DetachingCycles, "cycles", func(x tally) int { return x.logged }, func(x tally) int { return x.detaching }},
		} {
			row, err := rateRow(k, c.class, c.unit, [2]int{c.events(ts[0]), c.events(ts[1])}, [2]int{c.trials(ts[0]), c.trials(ts[1])})
			if err != nil {
				return nil, err
			}
			t.Rates = append(t.Rates, row)
		}
		for _, m := range Measures {
			t.Timings = append(t.Timings, timingRow(k, m, ts[0].timings[m], ts[1].timings[m]))
		}
	}
	for _, s := range sources {
		slices.Sort(s.Seeds)
		t.Sources = append(t.Sources, *s)
	}
	slices.SortFunc(t.Sources, func(a, b Source) int {
		return cmp.Or(cmp.Compare(a.Scenario, b.Scenario), cmp.Compare(slices.Index(providers[:], a.Provider), slices.Index(providers[:], b.Provider)))
	})
	return t, nil
}

// rateRow compares events[i] of trials[i]; a count that exceeds its
// trials (a report that counts episodes past its cycles) is an error.
func rateRow(k key, class, unit string, events, trials [2]int) (RateRow, error) {
	row := RateRow{Scenario: k.scenario, Build: k.build, Class: class, Unit: unit}
	for i := range row.Sides {
		s := Side{Trials: trials[i], Events: events[i]}
		if s.Trials > 0 {
			s.Rate = float64(s.Events) / float64(s.Trials)
		}
		s.CI95[0], s.CI95[1] = stats.Wilson95(s.Events, s.Trials)
		row.Sides[i] = s
	}
	if row.Sides[1].Rate > 0 {
		r := row.Sides[0].Rate / row.Sides[1].Rate
		row.Ratio = &r
	}
	p, err := stats.FisherExact(events[1], trials[1], events[0], trials[0], stats.TwoSided)
	if err != nil {
		return RateRow{}, fmt.Errorf("calibration: %s/%s %s: %w", k.scenario, k.build, class, err)
	}
	row.P = p
	switch {
	case events[0] == 0 && events[1] == 0:
		row.Verdict = NoneSeen
	case events[0] < MinEvents || events[1] < MinEvents:
		row.Verdict = TooFew
	case row.Ratio != nil && *row.Ratio <= RateFactor && *row.Ratio >= 1/RateFactor:
		row.Verdict = Agree
	default:
		row.Verdict = Disagree
	}
	return row, nil
}

// timingRow compares two samples (ms) of a timing.
func timingRow(k key, measure string, a, b []float64) TimingRow {
	row := TimingRow{Scenario: k.scenario, Build: k.build, Measure: measure}
	for i, s := range [][]float64{a, b} {
		row.Sides[i] = TimingSide{N: len(s), P50MS: quantile(s, 0.5), P90MS: quantile(s, 0.9)}
	}
	if len(a) == 0 || len(b) == 0 {
		row.Verdict = NoSamples
		return row
	}
	ks := stats.KolmogorovSmirnov2(a, b)
	row.KSDistance, row.KSP = ks.D, ks.P
	row.MedianDiffMS = row.Sides[0].P50MS - row.Sides[1].P50MS
	tolerance := math.Max(MedianShare*row.Sides[1].P50MS, float64(MedianSlack/time.Millisecond))
	if math.Abs(row.MedianDiffMS) <= tolerance && ks.D <= MaxKSDistance {
		row.Verdict = Agree
	} else {
		row.Verdict = Disagree
	}
	return row
}

// quantile is the nearest-rank q-quantile of s (stats.Percentile's method).
func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	ds := make([]time.Duration, len(s))
	for i, v := range s {
		ds[i] = time.Duration(v * float64(time.Millisecond))
	}
	return float64(stats.Percentile(ds, 100*q)) / float64(time.Millisecond)
}
