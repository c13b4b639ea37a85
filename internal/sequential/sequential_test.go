package sequential

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mathext"

	"github.com/strandlab/strandlab/internal/stats"
)

// lessRatioByBeta is the one-sided mixture likelihood ratio for "less"
// when both builds have equal trials, from its definition with gonum's
// regularised incomplete beta function instead of the grid: the prior is
// Beta(1/2, 1/2) on the build's share q of the events, restricted to
// q < 1/2 and doubled, against q = 1/2:
//
//	2 · Integral_0^(1/2) q^(b-1/2) (1-q)^(a-1/2) dq / B(1/2, 1/2) · 2^(a+b).
func lessRatioByBeta(b, a int) float64 {
	x, y := float64(b)+0.5, float64(a)+0.5
	lb, _ := math.Lgamma(x)
	la, _ := math.Lgamma(y)
	lab, _ := math.Lgamma(x + y)
	logB := lb + la - lab
	return 2 * math.Exp(logB+float64(a+b)*math.Ln2) * mathext.RegIncBeta(x, y, 0.5) / math.Pi
}

func TestMixtureMatchesTheBetaIntegral(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rounds []Round // equal trials: pooled, they are one binomial split
	}{
		{"one event in stock", []Round{{0, 10, 1, 10}}},
		{"seed-like: stock strands every cycle", []Round{{0, 3, 3, 3}, {0, 3, 3, 3}, {0, 3, 3, 3}}},
		{"soak-like: 20 to 0", []Round{{0, 5000, 11, 5000}, {0, 5000, 9, 5000}}},
		{"mixed", []Round{{2, 100, 7, 100}, {1, 100, 5, 100}}},
		{"build ahead", []Round{{6, 100, 1, 100}}},
		{"many events", []Round{{150, 10000, 210, 10000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMixture()
			m.grid()
			b, a := 0, 0
			for _, r := range tc.rounds {
				m.add(r, 1)
				b += r.Events
				a += r.BaseEvents
			}
			logLess, logMore := m.gridLogRatios()
			less, more := math.Exp(logLess), math.Exp(logMore)
			wantLess, wantMore := lessRatioByBeta(b, a), lessRatioByBeta(a, b)
			if math.Abs(less/wantLess-1) > 1e-4 || math.Abs(more/wantMore-1) > 1e-4 {
				t.Errorf("%d vs %d: ratios (less, more) = (%.6g, %.6g), the beta integral gives (%.6g, %.6g)", b, a, less, more, wantLess, wantMore)
			}
		})
	}
}

// TestTypeIErrorUnderRepeatedLooks: 10,000 comparisons of two builds with
// the same rate, each looked at after every one of 10 rounds and stopped
// at its first "less" or "more": the share that end so is within Alpha.
// Beside it, a fixed-sample test (Fisher's exact, one-sided each way at
// Alpha/2) applied at every look errs more often than Alpha: the
// simulation is able to see the inflation repeated looks cause.
func TestTypeIErrorUnderRepeatedLooks(t *testing.T) {
	const (
		comparisons = 10000
		looks       = 10
		alpha       = 0.05
	)
	naiveWrong := 0
	outcomes := simulate(t, 122413, comparisons, looks, 60, 0.03, 0.03, Design{Alpha: alpha, Margin: 0.01}, func(rounds []Round) {
		for i := range rounds {
			x, xb, n := pooled(rounds[:i+1])
			pl, _ := stats.FisherExact(x, n, xb, n, stats.Fewer)
			pm, _ := stats.FisherExact(x, n, xb, n, stats.More)
			if pl <= alpha/2 || pm <= alpha/2 {
				naiveWrong++
				return
			}
		}
	})
	got, naiveGot := float64(outcomes[Less]+outcomes[More])/comparisons, float64(naiveWrong)/comparisons
	t.Logf("type I error over %d looks: mixture SPRT %.4f, Fisher at every look %.4f (alpha %.2f)", looks, got, naiveGot, alpha)
	if got > alpha {
		t.Errorf("the sequential test said less or more in %.4f of %d comparisons of equal rates, want at most alpha = %.2f", got, comparisons, alpha)
	}
	if naiveGot <= alpha {
		t.Errorf("Fisher's test at every look erred in only %.4f: the simulation cannot see repeated looks' inflation", naiveGot)
	}
}

// TestNoDifferenceErrorWhenTheyDiffer: builds whose rates differ by more
// than the margin are called "no difference" in at most Alpha of the
// comparisons, looked at after every round.
func TestNoDifferenceErrorWhenTheyDiffer(t *testing.T) {
	const (
		comparisons = 2000
		alpha       = 0.05
		margin      = 0.01
	)
	outcomes := simulate(t, 87374, comparisons, 20, 400, 0.02+1.05*margin, 0.02, Design{Alpha: alpha, Margin: margin}, nil)
	got := float64(outcomes[NoDifference]) / comparisons
	t.Logf("no difference called for rates %.3f apart (margin %.3f): %.4f", 1.05*margin, margin, got)
	if got > alpha {
		t.Errorf("no difference called in %.4f of comparisons whose rates differ by more than the margin, want at most %.2f", got, alpha)
	}
}

// simulate runs comparisons of a build at rate against a baseline at
// baseRate, looks rounds of trials each, with a seeded generator, and
// counts their outcomes; seen, when set, is shown each comparison's rounds.
func simulate(t *testing.T, seed uint64, comparisons, looks, trials int, rate, baseRate float64, d Design, seen func([]Round)) map[Outcome]int {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	outcomes := map[Outcome]int{}
	for range comparisons {
		rounds := make([]Round, looks)
		for i := range rounds {
			rounds[i] = Round{binomial(rng, trials, rate), trials, binomial(rng, trials, baseRate), trials}
		}
		if seen != nil {
			seen(rounds)
		}
		v, err := Evaluate(rounds, d)
		if err != nil {
			t.Fatal(err)
		}
		outcomes[v.Outcome]++
	}
	return outcomes
}

// TestRateBoundsHoldAtEveryLook: the confidence sequence covers the true
// rate at every one of 50 looks at once in at least 1 - alpha of 2,000
// streams.
func TestRateBoundsHoldAtEveryLook(t *testing.T) {
	const (
		streams = 2000
		looks   = 50
		step    = 100
		rate    = 0.01
		alpha   = 0.05
	)
	rng := rand.New(rand.NewPCG(130516, 3))
	missed := 0
	for range streams {
		x, n := 0, 0
		for range looks {
			x += binomial(rng, step, rate)
			n += step
			if lo, hi := RateBounds(x, n, alpha, 0.005, 1); rate < lo || rate > hi {
				missed++
				break
			}
		}
	}
	if got := float64(missed) / streams; got > alpha {
		t.Errorf("the sequence missed the rate at some look in %.4f of streams, want at most %.2f", got, alpha)
	}
}

func TestRateBoundsWithoutEvents(t *testing.T) {
	// With no event, M(r) = b/(b+n) e^(rn): the upper bound is
	// (log(1/alpha) + log((b+n)/b)) / n, the lower one 0.
	for _, n := range []int{10, 1000, 100000} {
		alpha, scale := 0.001, 0.005
		b := 1 / scale
		want := (math.Log(1/alpha) + math.Log((b+float64(n))/b)) / float64(n)
		lo, hi := RateBounds(0, n, alpha, scale, 1)
		if lo != 0 || math.Abs(hi/min(want, 1)-1) > 1e-9 {
			t.Errorf("RateBounds(0, %d) = [%g, %g], want [0, %g]", n, lo, hi, want)
		}
	}
	if lo, hi := RateBounds(0, 0, 0.01, 0.01, 1); lo != 0 || hi != 1 {
		t.Errorf("no trials: [%g, %g], want [0, 1]", lo, hi)
	}
	// Tempering by a design effect widens the bounds.
	_, narrow := RateBounds(5, 1000, 0.01, 0.01, 1)
	_, wide := RateBounds(5, 1000, 0.01, 0.01, 3)
	if !(wide > narrow) {
		t.Errorf("design effect 3 gave upper bound %g, not above %g", wide, narrow)
	}
}

func TestEvaluate(t *testing.T) {
	repeat := func(n int, r Round) []Round {
		out := make([]Round, n)
		for i := range out {
			out[i] = r
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		rounds    []Round
		d         Design
		want      Outcome
		decidedAt int
	}{
		// seed-122413: 3 cycles a round, every stock cycle a new episode,
		// fix none. 2/Lambda_less(0 of 3t) <= 0.001 first at t = 5 (k = 15).
		{"seed: stock strands every cycle", repeat(8, Round{0, 3, 3, 3}), Design{Alpha: 0.001, Margin: 0.01}, Less, 5},
		{"a regression", repeat(8, Round{3, 3, 0, 3}), Design{Alpha: 0.001, Margin: 0.01}, More, 5},
		{"too few rounds", repeat(2, Round{0, 3, 3, 3}), Design{Alpha: 0.001, Margin: 0.01}, Continue, 0},
		// Neither strands: the bounds shrink as 1/n; with alpha 0.001 (0.0005
		// a build) and a margin of 0.005, 2,000 cycles a build do it.
		{"neither strands", repeat(10, Round{0, 250, 0, 250}), Design{Alpha: 0.001, Margin: 0.005}, NoDifference, 8},
		{"a design effect delays it", repeat(10, Round{0, 3, 3, 3}), Design{Alpha: 0.001, Margin: 0.01, DesignEffect: 2}, Less, 9},
		{"rounds with a build missing say nothing", append(repeat(4, Round{0, 0, 3, 3}), repeat(5, Round{0, 3, 3, 3})...), Design{Alpha: 0.001, Margin: 0.01}, Less, 9},
		{"unequal trials: the build's share is weighed by them", repeat(12, Round{1, 30, 1, 3}), Design{Alpha: 0.001, Margin: 0.05}, Less, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Evaluate(tc.rounds, tc.d)
			if err != nil {
				t.Fatal(err)
			}
			if v.Outcome != tc.want || v.DecidedAt != tc.decidedAt {
				t.Errorf("outcome %s at look %d (p = %.3g, difference in [%.4f, %.4f]), want %s at look %d", v.Outcome, v.DecidedAt, v.PValue, v.DiffLow, v.DiffHigh, tc.want, tc.decidedAt)
			}
			if v.Looks != len(tc.rounds) || len(v.PValues) != len(tc.rounds) {
				t.Errorf("looks %d, p-values %d, want %d", v.Looks, len(v.PValues), len(tc.rounds))
			}
			for i := 1; i < len(v.PValues); i++ {
				if v.PValues[i] > v.PValues[i-1] {
					t.Errorf("p-value rose from %g to %g at look %d: an always-valid p-value never does", v.PValues[i-1], v.PValues[i], i+1)
				}
			}
		})
	}
}

func TestSeedLikeLookMatchesTheBetaIntegral(t *testing.T) {
	// The case above, from the closed form: 12 stock episodes, none for
	// the build, are not enough at 0.001; 15 are.
	for _, k := range []int{12, 15} {
		v, err := Evaluate([]Round{{0, k, k, k}}, Design{Alpha: 0.001, Margin: 0.01})
		if err != nil {
			t.Fatal(err)
		}
		want := min(1, 2/lessRatioByBeta(0, k))
		if math.Abs(v.PValue/want-1) > 1e-4 {
			t.Errorf("0 vs %d: p = %.6g, want %.6g", k, v.PValue, want)
		}
	}
}

func TestDesignErrors(t *testing.T) {
	for _, tc := range []struct {
		d    Design
		want string
	}{
		{Design{Alpha: 0, Margin: 0.01}, "alpha"},
		{Design{Alpha: 1, Margin: 0.01}, "alpha"},
		{Design{Alpha: 0.01, Margin: 0}, "margin"},
		{Design{Alpha: 0.01, Margin: math.NaN()}, "margin"},
		{Design{Alpha: 0.01, Margin: 0.01, DesignEffect: 0.5}, "design effect"},
		{Design{Alpha: 0.01, Margin: 0.01, DesignEffect: math.Inf(1)}, "design effect"},
	} {
		if _, err := Evaluate(nil, tc.d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %q", tc.d, err, tc.want)
		}
	}
	if _, err := Evaluate([]Round{{4, 3, 0, 3}}, Design{Alpha: 0.01, Margin: 0.01}); err == nil || !strings.Contains(err.Error(), "round 1") {
		t.Errorf("4 events in 3 trials: error %v, want one naming round 1", err)
	}
}

func binomial(rng *rand.Rand, n int, p float64) int {
	k := 0
	for range n {
		if rng.Float64() < p {
			k++
		}
	}
	return k
}

func pooled(rounds []Round) (x, base, n int) {
	for _, r := range rounds {
		x += r.Events
		base += r.BaseEvents
		n += r.Trials
	}
	return x, base, n
}
