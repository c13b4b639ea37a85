package calibration

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/cycle"
	"github.com/strandlab/strandlab/internal/report"
)

var providers = [2]string{"local", "kind"}

// cycles is a log of n Running cycles; the first stranded ones are
// Stranded; each has the timings f gives it.
func cycles(n, stranded int, f func(i int) cycle.Cycle) []cycle.Cycle {
	out := make([]cycle.Cycle, n)
	for i := range out {
		c := cycle.Cycle{Outcome: cycle.Running}
		if f != nil {
			c = f(i)
		}
		c.Index = i
		if i < stranded {
			c.Outcome = cycle.Stranded
		}
		out[i] = c
	}
	return out
}

func run(provider string, seed int64, builds ...report.Build) Run {
	return Run{Provider: provider, Path: provider + ".json", Report: &report.Report{Scenario: "soak", Provider: provider, Seed: seed, Complete: true, Builds: builds}}
}

func build(name string, log []cycle.Cycle, episodes, safety int) report.Build {
	return report.Build{Name: name, Cycles: len(log), StrandedEpisodes: episodes, SafetyViolations: safety, CycleLog: log}
}

func TestRatesAgreeOnlyAsAnEffectSize(t *testing.T) {
	tests := []struct {
		name             string
		local, kind      int // stranding episodes in 1000 cycles
		verdict          string
		ratio            float64
		pBelow, pAtLeast float64
	}{
		{"within a factor of 1.5, both with 20 or more", 30, 25, Agree, 1.2, 1, 0.3},
		{"three times the reference's rate", 60, 20, Disagree, 3, 1e-4, 0},
		{"a side with fewer than 20 events is not compared", 40, 10, TooFew, 4, 0.001, 0},
		{"none on either side", 0, 0, NoneSeen, math.NaN(), 1.01, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := Compare(providers, []Run{
				run("local", 1, build("stock", cycles(1000, 0, nil), tc.local, 0)),
				run("kind", 1, build("stock", cycles(1000, 0, nil), tc.kind, 0)),
			})
			if err != nil {
				t.Fatal(err)
			}
			var row *RateRow
			for i := range tab.Rates {
				if tab.Rates[i].Class == StrandingEpisodes {
					row = &tab.Rates[i]
				}
			}
			if row == nil {
				t.Fatalf("no %s row in %+v", StrandingEpisodes, tab.Rates)
			}
			if row.Verdict != tc.verdict {
				t.Errorf("verdict %q, want %q", row.Verdict, tc.verdict)
			}
			if math.IsNaN(tc.ratio) != (row.Ratio == nil) || (row.Ratio != nil && math.Abs(*row.Ratio-tc.ratio) > 1e-9) {
				t.Errorf("ratio %v, want %v", row.Ratio, tc.ratio)
			}
			if row.P >= tc.pBelow || row.P < tc.pAtLeast {
				t.Errorf("p %.3g, want in [%g, %g)", row.P, tc.pAtLeast, tc.pBelow)
			}
			if row.Sides[0].Events != tc.local || row.Sides[1].Trials != 1000 || row.Unit != "cycles" {
				t.Errorf("sides %+v, unit %s", row.Sides, row.Unit)
			}
		})
	}
}

func TestFirstCycleStrandedCountsRunsAcrossSeeds(t *testing.T) {
	var runs []Run
	for seed := int64(1); seed <= 10; seed++ {
		kindStranded := 1
		if seed == 4 {
			kindStranded = 0
		}
		runs = append(runs,
			run("local", seed, build("stock", cycles(1, 1, nil), 1, 0), build("fix", cycles(1, 0, nil), 0, 0)),
			run("kind", seed, build("stock", cycles(1, kindStranded, nil), kindStranded, 0), build("fix", cycles(1, 0, nil), 0, 0)))
	}
	tab, err := Compare(providers, runs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int{"fix": {0, 0}, "stock": {10, 9}}
	for _, r := range tab.Rates {
		if r.Class != FirstCycleStranded {
			continue
		}
		w := want[r.Build]
		if r.Unit != "runs" || r.Sides[0].Trials != 10 || r.Sides[1].Trials != 10 || r.Sides[0].Events != w[0] || r.Sides[1].Events != w[1] {
			t.Errorf("%s: %+v, want %v of 10 runs", r.Build, r.Sides, w)
		}
	}
	if len(tab.Sources) != 2 || tab.Sources[0].Provider != "local" || tab.Sources[1].Runs != 10 || seedsText(tab.Sources[1].Seeds) != "1–10" ||
		tab.Sources[0].Cycles["stock"] != 10 {
		t.Errorf("sources %+v", tab.Sources)
	}
}

func TestTimingsAgreeOnMediansAndDistance(t *testing.T) {
	ms := time.Millisecond
	// kind's real kubelet: 4.2–5.8 s from delete to detach.
	kindLog := cycles(40, 0, func(i int) cycle.Cycle {
		return cycle.Cycle{Outcome: cycle.Running, DeleteToRunning: time.Duration(9000+10*i) * ms,
			DeleteToDetach: time.Duration(4200+40*i) * ms, ListedToDetach: time.Duration(5000+40*i) * ms}
	})
	tests := []struct {
		name     string
		shift    time.Duration // added to local's delete → detach
		noDetach bool
		verdict  string
	}{
		{"the same distribution", 0, false, Agree},
		{"a shift within the slack: distance 0.125", 200 * ms, false, Agree},
		{"medians within 15%, distance 0.25", 400 * ms, false, Disagree},
		{"kubelet-sim 3.6 s early", -3600 * ms, false, Disagree},
		{"no detach on one side", 0, true, NoSamples},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			localLog := cycles(40, 0, func(i int) cycle.Cycle {
				c := kindLog[i]
				c.DeleteToDetach += tc.shift
				if tc.noDetach {
					c.DeleteToDetach, c.ListedToDetach = 0, 0
				}
				return c
			})
			tab, err := Compare(providers, []Run{run("local", 1, build("stock", localLog, 0, 0)), run("kind", 1, build("stock", kindLog, 0, 0))})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]TimingRow{}
			for _, r := range tab.Timings {
				got[r.Measure] = r
			}
			if r := got[DeleteToRunning]; r.Verdict != Agree || r.KSDistance != 0 || r.Sides[0].N != 40 {
				t.Errorf("delete → Running: %+v, want identical samples agreeing", r)
			}
			r := got[DeleteToDetach]
			if r.Verdict != tc.verdict {
				t.Errorf("delete → detach: verdict %q, want %q (%+v)", r.Verdict, tc.verdict, r)
			}
			if tc.shift != 0 && math.Abs(r.MedianDiffMS-float64(tc.shift/ms)) > 1e-9 {
				t.Errorf("median difference %.0f ms, want %v", r.MedianDiffMS, tc.shift)
			}
		})
	}
}

// TestDetachingCyclesCounted: the share of cycles with a detach is a rate
// row, over the logged cycles, so a difference in which cycles detach shows.
func TestDetachingCyclesCounted(t *testing.T) {
	detachEvery := func(k int) func(int) cycle.Cycle {
		return func(i int) cycle.Cycle {
			c := cycle.Cycle{Outcome: cycle.Running}
			if i%k == 0 {
				c.DeleteToDetach = time.Second
			}
			return c
		}
	}
	tab, err := Compare(providers, []Run{run("local", 1, build("stock", cycles(100, 0, detachEvery(2)), 0, 0)),
		run("kind", 1, build("stock", cycles(100, 0, detachEvery(4)), 0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(tab.Rates, func(r RateRow) bool { return r.Class == DetachingCycles })
	if i < 0 {
		t.Fatalf("no %s row in %+v", DetachingCycles, tab.Rates)
	}
	r := tab.Rates[i]
	if r.Sides[0].Events != 50 || r.Sides[0].Trials != 100 || r.Sides[1].Events != 25 || r.Verdict != Disagree {
		t.Errorf("%s: %+v, want 50 / 100 against 25 / 100, disagreeing", DetachingCycles, r)
	}
}

// TestStagesSplitDeleteToRunning: delete → replacement and bound → Running
// come from the cycle's anchors, delete → released from its own field;
// a cycle that lacks an anchor gives no sample of that stage.
func TestStagesSplitDeleteToRunning(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		c    cycle.Cycle
		want map[string]float64 // measure → the one sample; absent: none
	}{
		{"every anchor",
			cycle.Cycle{Outcome: cycle.Running, DeletedAt: t0, DeleteToRunning: 9000 * ms, ReplacementSeenAt: t0.Add(2500 * ms),
				ReplacementBoundAt: t0.Add(2600 * ms), DeleteToReleased: 3100 * ms, DeleteToTerminal: 900 * ms, DeleteToGone: 2300 * ms},
			map[string]float64{DeleteToRunning: 9000, DeleteToReplacement: 2500, BoundToRunning: 6400, DeleteToReleased: 3100, DeleteToTerminal: 900, DeleteToGone: 2300,
				TerminalToReleased: 2200}},
		{"detached: delete → detach split at the release, the old pod's end counted among the detaching cycles",
			cycle.Cycle{Outcome: cycle.Running, DeletedAt: t0, DeleteToRunning: 9000 * ms, DeleteToReleased: 3100 * ms, DeleteToTerminal: 900 * ms, DeleteToDetach: 3500 * ms},
			map[string]float64{DeleteToRunning: 9000, DeleteToReleased: 3100, DeleteToTerminal: 900, TerminalToReleased: 2200,
				DeleteToDetach: 3500, ReleasedToDetach: 400, DeleteToTerminalDetaching: 900}},
		{"never released: the replacement came back first",
			cycle.Cycle{Outcome: cycle.Running, DeletedAt: t0, DeleteToRunning: 4000 * ms, ReplacementSeenAt: t0.Add(1500 * ms), ReplacementBoundAt: t0.Add(1600 * ms)},
			map[string]float64{DeleteToRunning: 4000, DeleteToReplacement: 1500, BoundToRunning: 2400}},
		{"timed out unbound: only the replacement's creation",
			cycle.Cycle{Outcome: cycle.TimedOut, DeletedAt: t0, ReplacementSeenAt: t0.Add(1500 * ms)},
			map[string]float64{DeleteToReplacement: 1500}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := []cycle.Cycle{tc.c}
			tab, err := Compare(providers, []Run{run("local", 1, build("stock", log, 0, 0)), run("kind", 1, build("stock", log, 0, 0))})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range tab.Timings {
				want, ok := tc.want[r.Measure]
				switch {
				case !ok && r.Sides[0].N != 0:
					t.Errorf("%s: %d samples, want none", r.Measure, r.Sides[0].N)
				case ok && (r.Sides[0].N != 1 || r.Sides[0].P50MS != want):
					t.Errorf("%s: %+v, want one sample of %.0f ms", r.Measure, r.Sides[0], want)
				}
			}
		})
	}
}

func TestCompareRefusesWhatItCannotCompare(t *testing.T) {
	stock := build("stock", cycles(3, 0, nil), 0, 0)
	tests := []struct {
		name      string
		providers [2]string
		runs      []Run
		want      string
	}{
		{"one provider twice", [2]string{"kind", "kind"}, []Run{run("kind", 1, stock)}, `got "kind" twice`},
		{"a run on a third provider", providers, []Run{run("local", 1, stock), run("kind", 1, stock), run("existing", 1, stock)}, `ran on "existing"`},
		{"no run on the reference", providers, []Run{run("local", 1, stock)}, "no run on kind"},
		{"more episodes than cycles", providers, []Run{run("local", 1, build("stock", cycles(3, 0, nil), 5, 0)), run("kind", 1, stock)}, "stock stranding episodes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compare(tc.providers, tc.runs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestMarkdownStatesCriteriaRowsAndSources(t *testing.T) {
	tab, err := Compare(providers, []Run{
		run("local", 1, build("stock", cycles(1000, 0, nil), 30, 0)),
		run("kind", 2, build("stock", cycles(1000, 0, nil), 25, 0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	md := Markdown(tab, "strandlab calibrate --scenario scenarios/soak.yaml")
	for _, want := range []string{
		"# Calibration: local against kind", "kind is the reference", "at least 20", "factor of 1.5",
		"| soak | stock | stranding episodes | 30 / 1000 cycles (0.03 [", "| 1.20 |", "| agree |",
		"| soak | stock | delete → detach | – | – | – | – | – | no samples |",
		"| soak | kind | 1 | 2 | stock 1000 | 0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("calibration.md lacks %q:\n%s", want, md)
		}
	}
}
