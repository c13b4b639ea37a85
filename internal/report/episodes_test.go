package report_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/detector"
	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/report/render"
	"github.com/strandlab/strandlab/internal/stats"
)

// churned is the cycles of a round-robin churn of pods web-0..web-(pods-1),
// one round per pass; every cycle Running unless stranded names it.
type churned struct {
	pods     int
	cycles   int
	stranded map[int]strandedAt
}

// strandedAt is a stranded cycle's finding: on node, of volume, and the
// volume last listed on the node lastListed after t0 (negative: never).
type strandedAt struct {
	node, volume string
	lastListed   time.Duration
}

func (c churned) result() cycle.Result {
	var res cycle.Result
	for i := range c.cycles {
		pod := fmt.Sprintf("web-%d", i%c.pods)
		cy := cycle.Cycle{Index: i, Round: i / c.pods, Pod: pod, Outcome: cycle.Running, OldNode: "n1", NewNode: "n1",
			DeletedAt: t0.Add(time.Duration(i) * time.Minute)}
		if s, ok := c.stranded[i]; ok {
			f := detector.Finding{Kind: detector.Stranded, Pod: "ns/" + pod, Node: s.node, Volume: s.volume,
				Since: cy.DeletedAt.Add(2 * time.Second)}
			if s.lastListed >= 0 {
				f.LastListed = t0.Add(s.lastListed)
			}
			cy.Outcome, cy.Stranding, cy.DetectedAt = cycle.Stranded, &f, cy.DeletedAt.Add(15*time.Second)
		}
		res.Cycles = append(res.Cycles, cy)
	}
	return res
}

// The episode rule (docs/design.md, "Stranding episode"): a stranded cycle
// continues the episode of its pod's previous cycle when that one stranded
// too, on the same node, the same volume, and the volume was not listed
// on the node in between.
func TestStrandingEpisodes(t *testing.T) {
	never := time.Duration(-1)
	v0 := func(node string, listed time.Duration) strandedAt { return strandedAt{node, "vol-0", listed} }
	tests := []struct {
		name     string
		c        churned
		episodes int
		// episodeCycle: each stranding's EpisodeCycle, in cycle order.
		episodeCycle []int
		// rounds: cycles/stranded/episodes per round.
		rounds []report.Round
	}{
		{
			name:     "same volume, ordinal and node, consecutive, never listed: one episode",
			c:        churned{pods: 1, cycles: 3, stranded: map[int]strandedAt{0: v0("n1", never), 1: v0("n1", never)}},
			episodes: 1, episodeCycle: []int{0, 0},
			rounds: []report.Round{{Cycles: 1, Stranded: 1, Episodes: 1}, {Cycles: 1, Stranded: 1}, {Cycles: 1}},
		},
		{
			// Cycle 0's stranding began at 0m2s; the volume was last listed
			// at 0m1s, before it: not in between.
			name:     "listed before the first stranding only: one episode",
			c:        churned{pods: 1, cycles: 2, stranded: map[int]strandedAt{0: v0("n1", time.Second), 1: v0("n1", time.Second)}},
			episodes: 1, episodeCycle: []int{0, 0},
			rounds: []report.Round{{Cycles: 1, Stranded: 1, Episodes: 1}, {Cycles: 1, Stranded: 1}},
		},
		{
			// Listed at 0m30s, after cycle 0's stranding began (0m2s).
			name:     "listed in between: two episodes",
			c:        churned{pods: 1, cycles: 2, stranded: map[int]strandedAt{0: v0("n1", never), 1: v0("n1", 30*time.Second)}},
			episodes: 2, episodeCycle: []int{0, 1},
			rounds: []report.Round{{Cycles: 1, Stranded: 1, Episodes: 1}, {Cycles: 1, Stranded: 1, Episodes: 1}},
		},
		{
			name:     "different node: two episodes",
			c:        churned{pods: 1, cycles: 2, stranded: map[int]strandedAt{0: v0("n1", never), 1: v0("n2", never)}},
			episodes: 2, episodeCycle: []int{0, 1},
			rounds: []report.Round{{Cycles: 1, Stranded: 1, Episodes: 1}, {Cycles: 1, Stranded: 1, Episodes: 1}},
		},
		{
			name: "different volume: two episodes",
			c: churned{pods: 1, cycles: 2, stranded: map[int]strandedAt{0: v0("n1", never),
				1: {node: "n1", volume: "vol-1", lastListed: never}}},
			episodes: 2, episodeCycle: []int{0, 1},
			rounds: []report.Round{{Cycles: 1, Stranded: 1, Episodes: 1}, {Cycles: 1, Stranded: 1, Episodes: 1}},
		},
		{
			name:     "different ordinals, consecutive cycles: two episodes",
			c:        churned{pods: 2, cycles: 2, stranded: map[int]strandedAt{0: v0("n1", never), 1: v0("n1", never)}},
			episodes: 2, episodeCycle: []int{0, 1},
			rounds: []report.Round{{Cycles: 2, Stranded: 2, Episodes: 2}},
		},
		{
			// web-0 strands in cycles 0 and 3 (rounds 0 and 1), web-1's and
			// web-2's cycles in between do not matter.
			name:     "the pod's next cycle, other pods in between: one episode",
			c:        churned{pods: 3, cycles: 6, stranded: map[int]strandedAt{0: v0("n1", never), 3: v0("n1", never)}},
			episodes: 1, episodeCycle: []int{0, 0},
			rounds: []report.Round{{Cycles: 3, Stranded: 1, Episodes: 1}, {Cycles: 3, Stranded: 1}},
		},
		{
			name:     "a cycle of the pod that ran in between: two episodes",
			c:        churned{pods: 1, cycles: 3, stranded: map[int]strandedAt{0: v0("n1", never), 2: v0("n1", never)}},
			episodes: 2, episodeCycle: []int{0, 2},
			rounds: []report.Round{{Cycles: 1, Stranded: 1, Episodes: 1}, {Cycles: 1}, {Cycles: 1, Stranded: 1, Episodes: 1}},
		},
		{
			name: "three in a row: one episode",
			c: churned{pods: 1, cycles: 3, stranded: map[int]strandedAt{0: v0("n1", never), 1: v0("n1", never),
				2: v0("n1", never)}},
			episodes: 1, episodeCycle: []int{0, 0, 0},
			rounds: []report.Round{{Cycles: 1, Stranded: 1, Episodes: 1}, {Cycles: 1, Stranded: 1}, {Cycles: 1, Stranded: 1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := report.BuildFromCycles("stock", provenance.ControllerBuild{}, tc.c.result(), nil)
			if b.Stranded != len(tc.c.stranded) || b.StrandedEpisodes != tc.episodes {
				t.Errorf("stranded %d in %d episodes, want %d in %d", b.Stranded, b.StrandedEpisodes, len(tc.c.stranded), tc.episodes)
			}
			var got []int
			for _, s := range b.Strandings {
				got = append(got, s.EpisodeCycle)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.episodeCycle) {
				t.Errorf("episode cycles %v, want %v", got, tc.episodeCycle)
			}
			if fmt.Sprint(b.Rounds) != fmt.Sprint(tc.rounds) {
				t.Errorf("rounds %+v, want %+v", b.Rounds, tc.rounds)
			}
		})
	}
}

// The rounds interval treats rounds as the units, and rounds an episode
// spans as one unit.
func TestRoundsInterval(t *testing.T) {
	never := time.Duration(-1)
	tests := []struct {
		name  string
		c     churned
		units []stats.Unit // nil: no interval
	}{
		{
			name:  "one round: no interval",
			c:     churned{pods: 3, cycles: 3, stranded: map[int]strandedAt{1: {"n1", "v", never}}},
			units: nil,
		},
		{
			// 4 rounds of 3 (the last one short: 2).
			name:  "rounds are the units",
			c:     churned{pods: 3, cycles: 11, stranded: map[int]strandedAt{1: {"n1", "v", never}, 7: {"n2", "w", never}}},
			units: []stats.Unit{{Trials: 3, Events: 1}, {Trials: 3}, {Trials: 3, Events: 1}, {Trials: 2}},
		},
		{
			// web-1 strands in rounds 0, 1 and 2 in one episode: one unit of
			// 9 cycles; web-2's stranding in round 3 is a new episode.
			name: "rounds an episode spans are one unit",
			c: churned{pods: 3, cycles: 15, stranded: map[int]strandedAt{1: {"n1", "v", never}, 4: {"n1", "v", never},
				7: {"n1", "v", never}, 11: {"n2", "w", never}}},
			units: []stats.Unit{{Trials: 9, Events: 3}, {Trials: 3, Events: 1}, {Trials: 3}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := report.BuildFromCycles("stock", provenance.ControllerBuild{}, tc.c.result(), nil)
			if tc.units == nil {
				if b.StrandedRateCI95Rounds != nil {
					t.Errorf("rounds interval %v, want none", *b.StrandedRateCI95Rounds)
				}
				return
			}
			want, err := stats.Clustered95(tc.units)
			if err != nil {
				t.Fatal(err)
			}
			if b.StrandedRateCI95Rounds == nil || math.Abs(b.StrandedRateCI95Rounds[0]-want.Low) > 1e-12 ||
				math.Abs(b.StrandedRateCI95Rounds[1]-want.High) > 1e-12 {
				t.Errorf("rounds interval %v, want [%v, %v] (units %+v)", b.StrandedRateCI95Rounds, want.Low, want.High, tc.units)
			}
			if b.StrandedRateCI95Runs != nil {
				t.Errorf("a run's report has a runs interval %v", *b.StrandedRateCI95Runs)
			}
		})
	}
}

// report.json carries the episodes, the rounds and the rounds interval;
// report.md and compare.md show them.
func TestEpisodesAndRoundsInTheReport(t *testing.T) {
	never := time.Duration(-1)
	c := churned{pods: 3, cycles: 12, stranded: map[int]strandedAt{1: {"n1", "v", never}, 4: {"n1", "v", never}}}
	stock := report.BuildFromCycles("stock", provenance.ControllerBuild{}, c.result(), nil)
	fix := report.BuildFromCycles("fix", provenance.ControllerBuild{}, churned{pods: 3, cycles: 12}.result(), nil)
	r := &report.Report{RunID: "r", Scenario: "s", Complete: true, Builds: []report.Build{stock, fix}}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back report.Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	got := back.Builds[0]
	if got.StrandedEpisodes != 1 || len(got.Rounds) != 4 || got.StrandedRateCI95Rounds == nil || *got.StrandedRateCI95Rounds != *stock.StrandedRateCI95Rounds ||
		got.Strandings[1].EpisodeCycle != 1 {
		t.Errorf("report.json round trip: %s", js)
	}
	for _, key := range []string{`"stranded_episodes":1`, `"stranded_rate_ci95_rounds":[`, `"rounds":[{"cycles":3,"stranded":1,"episodes":1},{"cycles":3,"stranded":1},{"cycles":3},{"cycles":3}]`, `"episode_cycle":1`, `"round":3`} {
		if !strings.Contains(string(js), key) {
			t.Errorf("report.json lacks %s: %s", key, js)
		}
	}
	if strings.Contains(string(js), "stranded_rate_ci95_runs") {
		t.Errorf("a run's report.json has a runs interval: %s", js)
	}
	// Rounds 0 and 1 are one unit (the episode spans them): units 6/2, 3/0, 3/0.
	units, _ := stats.Clustered95([]stats.Unit{{Trials: 6, Events: 2}, {Trials: 3}, {Trials: 3}})
	lo, hi := stats.Wilson95(2, 12)
	report.SetTests(r)
	md, cmpMD := render.Markdown(r), render.CompareMarkdown(r)
	checkContains(t, md, []string{
		"| build | cycles | not running | stranded | episodes | rate (95% CI) | 95% CI, rounds as unit |",
		fmt.Sprintf("| stock | 12 | 0 | 2 | 1 | 0.1667 [%.4f, %.4f] | [%.4f, %.4f] |", lo, hi, units.Low, units.High),
		"## Stranding: build stock, cycle 4\n\npod ns/web-1 on n1, volume `v`, detected after 15000 ms; continues the stranding episode of cycle 1 (the volume was not listed on the node in between)\n",
	}, []string{"cycle 1\n\npod ns/web-1 on n1, volume `v`, detected after 15000 ms; continues"})
	checkContains(t, cmpMD, []string{
		"| stranding episodes | 1 | 0 |",
		fmt.Sprintf("| 95%% CI, rounds as unit | [%.4f, %.4f], 3 units, design effect %.2f |", units.Low, units.High, units.DesignEffect),
		// 0 episodes of 12 cycles vs 1 of the 11 that could begin one.
		"| fix | stranding episodes | 0/12 vs 1/11 | fisher-exact one-sided (fewer stranding episodes) |",
		fmt.Sprintf("- `stock`: 2 stranded in 12 cycles, 1 episode(s) (rate 0.1667, 95%% CI %.4f–%.4f; rounds as unit %.4f–%.4f)", lo, hi, units.Low, units.High),
	}, []string{"runs as unit"})
}

// Fisher's test counts stranding episodes out of the cycles that could
// begin one. Stock: 20 stranded cycles in 5 episodes in 5,000 cycles, so
// 5 of 4,985; fix 0 of 5,000. P(all 5 in stock | 5) = C(4985,5)/C(9985,5)
// = Π_{i<5} (4985-i)/(9985-i) = 0.0309: not the 9.4e-7 of 20 of 5,000.
func TestStrandingTestCountsEpisodes(t *testing.T) {
	stock := report.Build{Name: "stock", Cycles: 5000, Stranded: 20, StrandedEpisodes: 5}
	fix := report.Build{Name: "fix", Cycles: 5000}
	r := &report.Report{Builds: []report.Build{stock, fix}}
	report.SetTests(r)
	v := r.Builds[1].VersusBaseline
	want := 1.0
	for i := range 5 {
		want *= float64(4985-i) / float64(9985-i)
	}
	if v.PValue == nil || math.Abs(*v.PValue-want) > 1e-12 || math.Abs(want-0.0309) > 5e-4 || v.Test != "fisher-exact one-sided (fewer stranding episodes)" ||
		v.Verdict != "no evidence either way (p = 0.031)" {
		t.Errorf("versus = %+v (p %v), want p = %v, no evidence", v, *v.PValue, want)
	}
}
