package report

// Stranding episodes and rounds: the two ways the report groups stranded
// cycles that are not independent events (docs/design.md, "Stranding
// episode"; docs/statistics.md).

import (
	"cmp"
	"slices"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/stats"
)

// Round is one round of the churn (every target pod deleted once; a
// cycle's Round): the unit the rounds interval treats as independent.
type Round struct {
	Cycles   int `json:"cycles"`
	Stranded int `json:"stranded,omitempty"`
	// Episodes counts the stranding episodes that began in the round; its
	// other stranded cycles continue an episode of the previous round.
	Episodes int `json:"episodes,omitempty"`
	// RunID is the run the round belongs to, in a merged report.
	RunID string `json:"run_id,omitempty"`
}

// continuesEpisode reports whether next, a cycle of the same pod (the same
// StatefulSet ordinal) as prev and the one right after it, continues prev's
// stranding episode rather than beginning one: both stranded, on the same
// node, the same volume, and the volume not listed in the node's
// status.volumesAttached in between (the detector last saw it listed no
// later than when prev's stranding began). The controller never reported
// the volume in between, so the harness cannot tell a new failure from the
// first one persisting onto the replacement pod.
func continuesEpisode(prev, next cycle.Cycle) bool {
	p, n := prev.Stranding, next.Stranding
	return prev.Outcome == cycle.Stranded && next.Outcome == cycle.Stranded && p != nil && n != nil &&
		prev.Pod == next.Pod && p.Node == n.Node && p.Volume == n.Volume && !n.LastListed.After(p.Since)
}

// strandingEpisodes is what BuildFromCycles reports of the cycles'
// strandings and rounds: each stranding (in cycle order) with the cycle
// its episode began in, the number of episodes, and the counts per round.
// A pod's cycles are taken in cycle order, so "the next pod of the same
// ordinal" is the pod's next cycle: a cycle of the pod that did not strand
// in between ends the episode.
func strandingEpisodes(cycles []cycle.Cycle) (strandings []Stranding, episodes int, rounds []Round) {
	strandings = []Stranding{}
	ordered := slices.SortedStableFunc(slices.Values(cycles), func(a, b cycle.Cycle) int { return cmp.Compare(a.Index, b.Index) })
	previous := map[string]cycle.Cycle{} // pod -> its previous cycle
	began := map[string]int{}            // pod -> the cycle its current episode began in
	byRound := map[int]*Round{}
	var order []int
	for _, c := range ordered {
		r := byRound[c.Round]
		if r == nil {
			r = &Round{}
			byRound[c.Round] = r
			order = append(order, c.Round)
		}
		r.Cycles++
		prev, seen := previous[c.Pod]
		previous[c.Pod] = c
		if c.Outcome != cycle.Stranded {
			continue
		}
		r.Stranded++
		if c.Stranding == nil { // no finding to compare: an episode of its own
			episodes++
			r.Episodes++
			continue
		}
		s := strandingOf(c)
		if seen && continuesEpisode(prev, c) {
			s.EpisodeCycle = began[c.Pod]
		} else {
			episodes++
			r.Episodes++
			began[c.Pod] = c.Index
		}
		strandings = append(strandings, s)
	}
	slices.Sort(order)
	for _, i := range order {
		rounds = append(rounds, *byRound[i])
	}
	return strandings, episodes, rounds
}

// Episodes is b's stranding episodes. A report written before episodes
// were counted has stranded cycles but no episodes: each stranded cycle
// then counts as its own episode (at least as many as there were).
func Episodes(b Build) int {
	if b.StrandedEpisodes == 0 && b.Stranded > 0 {
		return b.Stranded
	}
	return b.StrandedEpisodes
}

// EpisodeTrials is the cycles that could begin a stranding episode: all
// but those that continued one (their volume was stranded before the
// cycle began). Fisher's test of stranding episodes counts out of these
// (docs/statistics.md).
func EpisodeTrials(b Build) int {
	return b.Cycles - (b.Stranded - Episodes(b))
}

// EpisodeRate is b's rate of stranding episodes per cycle that could
// begin one: the unit of the tests against the baseline and of the power
// plan (docs/statistics.md). 0 when b ran no cycles.
func EpisodeRate(b Build) float64 {
	n := EpisodeTrials(b)
	if n <= 0 {
		return 0
	}
	return float64(Episodes(b)) / float64(n)
}

// setStrandedRates sets the stranded rate and its intervals from b's
// counts and rounds: Wilson's per cycle, and the clustered ones with
// rounds (and, in a merged report, runs) as the unit.
func setStrandedRates(b *Build) {
	b.StrandedRate = 0
	if b.Cycles > 0 {
		b.StrandedRate = float64(b.Stranded) / float64(b.Cycles)
	}
	lo, hi := stats.Wilson95(b.Stranded, b.Cycles)
	b.StrandedRateCI95 = [2]float64{lo, hi}
	b.StrandedRateCI95Rounds, b.StrandedRateCI95Runs = nil, nil
	if r, ok := RoundsRate(*b); ok {
		b.StrandedRateCI95Rounds = &[2]float64{r.Low, r.High}
	}
	if r, ok := RunsRate(*b); ok {
		b.StrandedRateCI95Runs = &[2]float64{r.Low, r.High}
	}
}

// RoundsRate is b's stranded rate with rounds as the unit. Rounds that a
// stranding episode spans are one unit (the episode makes them dependent):
// a round with a stranded cycle that continues an episode joins the unit
// of the round before it, in the same run. ok is false when the rounds do
// not account for every cycle or there are fewer than two units.
func RoundsRate(b Build) (stats.ClusteredRate, bool) {
	if !roundsComplete(b) {
		return stats.ClusteredRate{}, false
	}
	var units []stats.Unit
	for i, r := range b.Rounds {
		if i > 0 && r.RunID == b.Rounds[i-1].RunID && r.Stranded > r.Episodes {
			units[len(units)-1].Trials += r.Cycles
			units[len(units)-1].Events += r.Stranded
			continue
		}
		units = append(units, stats.Unit{Trials: r.Cycles, Events: r.Stranded})
	}
	c, err := stats.Clustered95(units)
	return c, err == nil
}

// RunsRate is b's stranded rate with each run of a merged report as the
// unit (its rounds summed); ok is false outside merged reports (no round
// names a run) and with fewer than two runs.
func RunsRate(b Build) (stats.ClusteredRate, bool) {
	if !roundsComplete(b) || b.Rounds[0].RunID == "" {
		return stats.ClusteredRate{}, false
	}
	var units []stats.Unit
	for i, r := range b.Rounds {
		if i == 0 || r.RunID != b.Rounds[i-1].RunID {
			units = append(units, stats.Unit{})
		}
		units[len(units)-1].Trials += r.Cycles
		units[len(units)-1].Events += r.Stranded
	}
	c, err := stats.Clustered95(units)
	return c, err == nil
}

// roundsComplete: b has rounds and they hold every cycle and stranding.
func roundsComplete(b Build) bool {
	if len(b.Rounds) == 0 {
		return false
	}
	cycles, stranded := 0, 0
	for _, r := range b.Rounds {
		cycles += r.Cycles
		stranded += r.Stranded
	}
	return cycles == b.Cycles && stranded == b.Stranded
}
