package report

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// counts is a build with k of n cycles stranded (each its own episode) and
// s safety violations: what the tests against the baseline read.
func counts(name string, k, n, s int) Build {
	return Build{Name: name, Cycles: n, Stranded: k, StrandedEpisodes: k, SafetyViolations: s}
}

// TestReportJSONCarriesTheTests checks report.json's versus_baseline and
// safety_versus_baseline as SetTests sets them, Encode writes them and
// Decode reads them back.
func TestReportJSONCarriesTheTests(t *testing.T) {
	r := &Report{Scenario: "s", Complete: true, Builds: []Build{
		counts("stock", 20, 5000, 0), counts("fix", 0, 5000, 1), counts("slow", 5, 5000, 0)}}
	data, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "versus_baseline") {
		t.Error("Encode computed tests SetTests had not set")
	}
	SetTests(r)
	if data, err = Encode(r); err != nil {
		t.Fatal(err)
	}
	var generic struct {
		Builds []map[string]json.RawMessage `json:"builds"`
	}
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"versus_baseline", "safety_versus_baseline"} {
		if _, ok := generic.Builds[0][k]; ok {
			t.Errorf("the baseline has %s", k)
		}
		var v map[string]any
		if err := json.Unmarshal(generic.Builds[1][k], &v); err != nil {
			t.Fatalf("fix's %s: %v in %s", k, err, data)
		}
		for _, f := range []string{"test", "p_value", "verdict"} {
			if _, ok := v[f]; !ok {
				t.Errorf("fix's %s lacks %q: %v", k, f, v)
			}
		}
	}

	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  *Versus
		test string
		p    float64 // hand value
		verd string
	}{
		// C(5000,20)/C(10000,20).
		{"fix strandings", back.Builds[1].VersusBaseline, "fisher-exact one-sided (fewer stranding episodes)", 9.356908105548281e-07,
			"fix strands less than stock, p = 9.4e-7"},
		// 1 vs 0 of 5000: leans towards more, P(the one in fix) = 1/2.
		{"fix safety", back.Builds[1].SafetyVersusBaseline, "fisher-exact one-sided (more safety violations)", 0.5,
			"no evidence either way (p = 0.5)"},
		// 5/5000 vs 20/5000: P(X_B <= 5 | 25 in all), by exact rational
		// arithmetic (Python fractions and math.comb).
		{"slow strandings", back.Builds[2].VersusBaseline, "fisher-exact one-sided (fewer stranding episodes)", 0.0020165577149574357,
			"slow strands less than stock, p = 0.002"},
	}
	for _, tc := range tests {
		if tc.got == nil || tc.got.PValue == nil {
			t.Errorf("%s: %+v", tc.name, tc.got)
			continue
		}
		if tc.got.Test != tc.test || math.Abs(*tc.got.PValue-tc.p) > 1e-6*tc.p || tc.got.Verdict != tc.verd {
			t.Errorf("%s = {%q, %v, %q}, want {%q, %v, %q}", tc.name, tc.got.Test, *tc.got.PValue, tc.got.Verdict, tc.test, tc.p, tc.verd)
		}
	}

	// No baseline, no tests: SetTests clears what an earlier set left.
	r.Builds = r.Builds[1:]
	SetTests(r)
	if data, err = Encode(r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "versus_baseline") {
		t.Errorf("a report without stock has tests: %s", data)
	}
}

func TestPValueText(t *testing.T) {
	tests := []struct {
		p    float64
		want string
	}{
		{0.031218751564063077, "0.031"},
		{0.0031, "0.0031"},
		{0.31, "0.31"},
		{1, "1"},
		{9.356908105548281e-07, "9.4e-7"},
		{6.704963314e-15, "6.7e-15"},
		// Two digits would read "0.01", on the wrong side of α = 0.01.
		{0.0104, "0.0104"},
		{0.010004, "0.010004"},
		{0.00996, "0.01"}, // rejected, and "0.01" <= α too
		{0, "< 1e-300"},
	}
	for _, tc := range tests {
		if got := PValueText(tc.p); got != tc.want {
			t.Errorf("PValueText(%v) = %q, want %q", tc.p, got, tc.want)
		}
	}
	// In a verdict: 5000/5000 vs 0/5000 has p = 1/C(10000,5000), which
	// underflows to 0.
	if got := pEquals(0); got != "p < 1e-300" {
		t.Errorf("pEquals(0) = %q", got)
	}
	if got := pEquals(0.0312); got != "p = 0.031" {
		t.Errorf("pEquals(0.0312) = %q", got)
	}
}

// TestEveryOutcomeClassIsTested: phantom listings and cycles not running
// are tested against the baseline like strandings and safety violations
// (26 phantom listings in 40 control cycles where stock lists none).
func TestEveryOutcomeClassIsTested(t *testing.T) {
	stock := counts("stock", 0, 40, 0)
	lister := counts("lister", 0, 40, 0)
	lister.PhantomListings = 26
	stuck := counts("stuck", 0, 40, 0)
	stuck.CyclesNotRunning = 9
	r := &Report{Builds: []Build{stock, lister, stuck}}
	SetTests(r)
	for _, tc := range []struct {
		v    *Versus
		want string
	}{
		{r.Builds[1].PhantomVersusBaseline, "lister has more phantom listings than stock, p = "},
		{r.Builds[1].NotRunningVersusBaseline, "no evidence either way (p = 1)"},
		{r.Builds[2].NotRunningVersusBaseline, "stuck has more cycles not running than stock, p = "},
		{r.Builds[2].PhantomVersusBaseline, "no evidence either way (p = 1)"},
	} {
		if tc.v == nil || !strings.HasPrefix(tc.v.Verdict, tc.want) || tc.v.PValue == nil {
			t.Errorf("test %+v, want a verdict beginning %q", tc.v, tc.want)
		}
	}
	if v := r.Builds[1].PhantomVersusBaseline; v != nil && v.PValue != nil && *v.PValue > 1e-9 {
		t.Errorf("26/40 against 0/40: p = %g, want C(40,26)/C(80,26) < 1e-9", *v.PValue)
	}
	if r.Builds[0].PhantomVersusBaseline != nil || r.Builds[0].NotRunningVersusBaseline != nil {
		t.Error("the baseline is tested against itself")
	}
}

// withRounds is a build of rounds of 10 cycles with the given episodes in
// each (each stranded cycle its own episode).
func withRounds(name string, episodes ...int) Build {
	b := Build{Name: name}
	for _, e := range episodes {
		b.Rounds = append(b.Rounds, Round{Cycles: 10, Stranded: e, Episodes: e})
		b.Cycles += 10
		b.Stranded += e
		b.StrandedEpisodes += e
	}
	return b
}

// TestRoundLevelTests: the paired sign-flip test over rounds and Fisher's
// test on counts divided by the design effect, beside the cycle-level one.
func TestRoundLevelTests(t *testing.T) {
	for _, tc := range []struct {
		name             string
		stock, x         Build
		rounds, adjusted string // verdict prefixes
		roundsTest       string
	}{
		// 8 rounds, one stock episode in each: only the observed signs are
		// as extreme, p = 2^-8 = 0.0039; the episodes are spread, d = 1.
		{"spread", withRounds("stock", 1, 1, 1, 1, 1, 1, 1, 1), withRounds("fix", 0, 0, 0, 0, 0, 0, 0, 0),
			"fix strands less than stock, p = 0.0039", "fix strands less than stock, p = ", "sign-flip over 8 paired rounds (fewer stranding episodes)"},
		// 6 rounds: 2^-6 = 0.016 is not enough at 0.01.
		{"six rounds", withRounds("stock", 1, 1, 1, 1, 1, 1), withRounds("fix", 0, 0, 0, 0, 0, 0),
			"no evidence either way (p = 0.016)", "no evidence either way (p = 0.014)", "sign-flip over 6 paired rounds (fewer stranding episodes)"},
		// All 8 of stock's episodes in one round: one round differs (p =
		// 1/2), and the design effect (8 events in one of 8 rounds) shrinks
		// the counts until Fisher's test finds nothing either.
		{"clustered", withRounds("stock", 8, 0, 0, 0, 0, 0, 0, 0), withRounds("fix", 0, 0, 0, 0, 0, 0, 0, 0),
			"no evidence either way (p = 0.5)", "no evidence either way", "sign-flip over 8 paired rounds (fewer stranding episodes)"},
		{"no rounds", counts("stock", 8, 80, 0), counts("fix", 0, 80, 0),
			"not tested: no per-round counts", "not tested: no per-round counts", "sign-flip over paired rounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Builds: []Build{tc.stock, tc.x}}
			SetTests(r)
			x := r.Builds[1]
			if !strings.HasPrefix(x.RoundsVersusBaseline.Verdict, tc.rounds) || x.RoundsVersusBaseline.Test != tc.roundsTest {
				t.Errorf("rounds: %+v, want %q by %q", x.RoundsVersusBaseline, tc.rounds, tc.roundsTest)
			}
			if !strings.HasPrefix(x.AdjustedVersusBaseline.Verdict, tc.adjusted) {
				t.Errorf("adjusted: %+v, want %q", x.AdjustedVersusBaseline, tc.adjusted)
			}
			if x.VersusBaseline == nil || x.VersusBaseline.PValue == nil {
				t.Errorf("cycle-level: %+v, want the test beside them", x.VersusBaseline)
			}
		})
	}
}
