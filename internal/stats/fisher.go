package stats

// Fisher's exact test for two binomial counts (docs/statistics.md).
//
// The hypergeometric distribution is computed here rather than taken from
// gonum: gonum.org/v1/gonum/stat/distuv (which clustered.go uses for its t
// and Beta quantiles) has Binomial and Poisson but no hypergeometric
// distribution. The probabilities are computed from
// ratios of successive terms, anchored at the mode: no factorials, no
// log-gamma differences of numbers near N·log N that cancel, so the tail sum
// keeps its relative accuracy for any N a run can reach.

import (
	"fmt"
)

// Alternative is the alternative hypothesis of a test of build B against
// build A (the baseline).
type Alternative int

const (
	// Fewer: B's rate is below A's (p_B < p_A). The p-value is
	// P(X_B <= x_B) given the total x_A + x_B.
	Fewer Alternative = iota
	// More: B's rate is above A's (p_B > p_A). The p-value is
	// P(X_B >= x_B) given the total.
	More
	// TwoSided: the rates differ. The p-value is the probability of the
	// tables no more likely than the one observed (as R's fisher.test).
	TwoSided
)

func (a Alternative) String() string {
	switch a {
	case Fewer:
		return "fewer"
	case More:
		return "more"
	case TwoSided:
		return "two-sided"
	}
	return fmt.Sprintf("Alternative(%d)", int(a))
}

// negligible is the relative size below which hypergeometric terms are
// left out of a sum (the neglected rest is bounded by a geometric series).
const negligible = 1e-17

// FisherExact is Fisher's exact test of x_A events in n_A trials (build A,
// the baseline) against x_B in n_B (build B): conditional on the total
// x_A + x_B, the count of build B is hypergeometric (population n_A + n_B,
// x_A + x_B marked, n_B drawn) under the hypothesis that both builds have
// the same rate, and the p-value is the probability of a count at least as
// extreme in the direction of alt.
//
// A build with no trials (n = 0) carries no evidence: the conditional
// distribution has a single point and the p-value is 1. So are 0 of n vs
// 0 of m, and all of n vs all of m. Negative counts or x > n are an error.
// A p-value below the smallest float64 (about 1e-308) is returned as 0.
func FisherExact(xA, nA, xB, nB int, alt Alternative) (float64, error) {
	if nA < 0 || nB < 0 || xA < 0 || xB < 0 || xA > nA || xB > nB {
		return 0, fmt.Errorf("stats: Fisher's exact test needs 0 <= x <= n, got %d of %d vs %d of %d", xA, nA, xB, nB)
	}
	switch alt {
	case Fewer, More, TwoSided:
	default:
		return 0, fmt.Errorf("stats: unknown alternative %v", alt)
	}
	return hypergeomTest(nA, nB, xA+xB, xB, alt), nil
}

// hypergeomTest is the p-value of observing k for X ~ Hypergeometric(draws
// nB from nA+nB with total marked): the number of marked items among the nB
// drawn. Arguments are valid (FisherExact checks them).
func hypergeomTest(nA, nB, total, k int, alt Alternative) float64 {
	lo, hi := max(0, total-nA), min(total, nB)
	if lo == hi {
		return 1
	}
	// Terms t(j) ∝ C(nB, j)·C(nA, total-j), relative to t(mode) = 1. The
	// distribution is log-concave, so the terms fall monotonically away
	// from the mode and the ratios of successive terms fall too.
	mode := int(float64(total+1) * float64(nB+1) / float64(nA+nB+2))
	mode = min(max(mode, lo), hi)
	up := func(j int) float64 { // t(j+1)/t(j)
		return float64(nB-j) * float64(total-j) / (float64(j+1) * float64(nA-total+j+1))
	}
	down := func(j int) float64 { // t(j-1)/t(j)
		return float64(j) * float64(nA-total+j) / (float64(nB-j+1) * float64(total-j+1))
	}
	// The observed term, reached from the mode.
	tk := 1.0
	for j := mode; j < k; j++ {
		tk *= up(j)
	}
	for j := mode; j > k; j-- {
		tk *= down(j)
	}

	// sum adds the terms from j = from (term t) outward in direction dir
	// (+1 or -1) while keep(j, t) holds, stopping once the rest of the
	// tail is negligible against ref plus the sum so far.
	sum := func(from int, t float64, dir int, ref float64, keep func(j int, t float64) bool) float64 {
		s := 0.0
		for j := from; j >= lo && j <= hi; j += dir {
			if keep(j, t) {
				s += t
			}
			var r float64
			if dir > 0 {
				r = up(j)
			} else {
				r = down(j)
			}
			// Past the mode r < 1 and falls further, so what is left
			// is at most t·r/(1-r).
			if (dir > 0 && j >= mode || dir < 0 && j <= mode) && r < 1 && t*r/(1-r) < negligible*(ref+s) {
				break
			}
			t *= r
			if t == 0 {
				break
			}
		}
		return s
	}
	// both sums the terms on both sides of the mode.
	both := func(ref float64, keep func(j int, t float64) bool) float64 {
		s := sum(mode, 1, -1, ref, keep)
		if mode < hi {
			s += sum(mode+1, up(mode), 1, ref, keep)
		}
		return s
	}
	all := func(int, float64) bool { return true }
	norm := both(1, all) // the whole distribution relative to the mode: >= 1

	var p float64
	switch alt {
	// A tail that holds the mode is summed from the mode, so that it does
	// not depend on an observed term that may have underflowed to 0.
	case Fewer:
		if k >= mode {
			p = both(1, func(j int, _ float64) bool { return j <= k }) / norm
		} else {
			p = sum(k, tk, -1, tk, all) / norm
		}
	case More:
		if k <= mode {
			p = both(1, func(j int, _ float64) bool { return j >= k }) / norm
		} else {
			p = sum(k, tk, 1, tk, all) / norm
		}
	case TwoSided:
		// Tables no more likely than the observed one, with R's relative
		// tolerance for ties computed in floating point; the sums run until
		// what is left is negligible against the observed term, so a tiny
		// p-value keeps its relative accuracy.
		limit := tk * (1 + 1e-7)
		p = both(tk, func(_ int, t float64) bool { return t <= limit }) / norm
	}
	return min(p, 1)
}
