package stats

// Power and sample size of the one-sided Fisher exact test
// (docs/statistics.md, "Power plan").

import (
	"errors"
	"fmt"
)

// tailCut bounds the binomial mass left out at each end of a build's count
// when power is computed: at most 2·tailCut per build.
const tailCut = 1e-13

// maxCycles is the largest plan PowerPlan searches.
const maxCycles = 1 << 30

// maxExpected bounds the baseline's expected count (cycles × rate) of a
// candidate plan. One power evaluation costs time in proportion to it
// (about 0.15 s at 1e5 on the 2-core development machine, and a plan takes
// up to about 40 evaluations); a difference that needs more is better
// planned with a normal approximation than enumerated.
const maxExpected = 1e5

// FisherPower is the power of the one-sided Fisher exact test of "build B
// has fewer events than build A" at level alpha when both builds run n
// trials with true rates rateA and rateB: the probability, over
// X_A ~ Binomial(n, rateA) and X_B ~ Binomial(n, rateB) independent, that
// FisherExact(X_A, n, X_B, n, Fewer) <= alpha. Counts whose binomial
// probability lies in the outer 1e-13 of either tail are left out, so the
// result is exact to about 1e-12.
func FisherPower(n int, rateA, rateB, alpha float64) (float64, error) {
	if n < 0 {
		return 0, fmt.Errorf("stats: power for %d trials", n)
	}
	if !(rateA >= 0 && rateA <= 1 && rateB >= 0 && rateB <= 1) {
		return 0, fmt.Errorf("stats: rates must be in [0, 1], got %v and %v", rateA, rateB)
	}
	if !(alpha > 0 && alpha < 1) {
		return 0, fmt.Errorf("stats: alpha must be in (0, 1), got %v", alpha)
	}
	return fisherPower(n, rateA, rateB, alpha), nil
}

func fisherPower(n int, rateA, rateB, alpha float64) float64 {
	loA, pA := binomialPMF(n, rateA)
	loB, pB := binomialPMF(n, rateB)
	// cdfB[i] = P(loB <= X_B <= loB+i).
	cdfB := make([]float64, len(pB))
	s := 0.0
	for i, p := range pB {
		s += p
		cdfB[i] = s
	}
	// The test rejects on a down-set: if (x_A, x_B) rejects, so do
	// (x_A+1, x_B) and (x_A, x_B-1) (Fisher's test is Barnard convex;
	// TestFisherPowerMatchesEnumeration checks the sum against every pair).
	// So for each x_A the rejected x_B are those up to a critical c(x_A)
	// that never decreases as x_A grows: one sweep finds them all.
	power := 0.0
	c := loB - 1 // largest rejected x_B so far (loB-1: none)
	for i, p := range pA {
		xA := loA + i
		for c+1 < loB+len(pB) && hypergeomTest(n, n, xA+c+1, c+1, Fewer) <= alpha {
			c++
		}
		if c >= loB {
			power += p * cdfB[c-loB]
		}
	}
	return min(power, 1)
}

// binomialPMF returns P(X = lo+i) for X ~ Binomial(n, r), i = 0, 1, ...,
// leaving out the tails at either end whose mass is below tailCut. The terms
// come from ratios of successive probabilities, starting from 1 at the mode,
// and are normalised at the end: no factorials or log-gamma, whose rounding
// grows with n.
func binomialPMF(n int, r float64) (lo int, pmf []float64) {
	switch {
	case n == 0 || r == 0:
		return 0, []float64{1}
	case r == 1:
		return n, []float64{1}
	}
	mode := min(int(float64(n+1)*r), n)
	odds := r / (1 - r)
	up := func(k int) float64 { return float64(n-k) / float64(k+1) * odds }   // P(k+1)/P(k)
	down := func(k int) float64 { return float64(k) / float64(n-k+1) / odds } // P(k-1)/P(k)
	// The pmf is log-concave: past the mode the ratios fall, so the rest of
	// a tail after a term t with next ratio q < 1 is at most t·q/(1-q). The
	// terms are relative to the mode's, so the sum so far (at least 1)
	// stands for the total, which is larger.
	sum := 1.0
	below := tailTerms(mode, mode, -1, down, &sum) // P(mode-1), P(mode-2), ... relative to P(mode)
	lo = mode - len(below)
	pmf = make([]float64, 0, len(below)+1)
	for i := len(below) - 1; i >= 0; i-- {
		pmf = append(pmf, below[i])
	}
	pmf = append(pmf, 1)
	pmf = append(pmf, tailTerms(mode, n-mode, +1, up, &sum)...)
	for i := range pmf {
		pmf[i] /= sum
	}
	return lo, pmf
}

// tailTerms walks at most steps terms from the mode in direction dir (-1
// or +1), ratio(k) taking P(k) to its neighbour, and returns them relative
// to P(mode), adding each to *sum; it stops where the rest of the tail is
// below tailCut of the sum so far.
func tailTerms(mode, steps, dir int, ratio func(k int) float64, sum *float64) []float64 {
	var terms []float64
	t := 1.0
	for i, k := 0, mode; i < steps; i, k = i+1, k+dir {
		q := ratio(k)
		if q < 1 && t*q/(1-q) < tailCut**sum {
			break
		}
		t *= q
		*sum += t
		terms = append(terms, t)
	}
	return terms
}

// PowerPlan returns the cycles per build (the same for both builds) that
// the one-sided Fisher exact test at level alpha needs to show, with the
// given power, that a build whose true stranding rate is buildRate strands
// less often than a baseline whose rate is baselineRate (buildRate = 0 for a
// fix that removes the bug). The power is computed exactly (FisherPower)
// and the plan found by doubling the cycles until the power is reached,
// then bisecting.
//
// The power of an exact test is not monotone in the cycles: it saw-tooths
// as the critical count steps. With buildRate = 0 the steps stop early
// (the critical count settles at a few cycles) and the plan is the smallest
// sufficient one; with buildRate > 0 the bisection returns a number of
// cycles with enough power whose predecessor has too little, and a few
// cycles more may dip slightly below the target.
func PowerPlan(baselineRate, buildRate, alpha, power float64) (cyclesPerBuild int, err error) {
	switch {
	case !(baselineRate > 0 && baselineRate <= 1):
		return 0, fmt.Errorf("stats: baseline rate must be in (0, 1], got %v", baselineRate)
	case !(buildRate >= 0 && buildRate < baselineRate):
		return 0, fmt.Errorf("stats: build rate must be in [0, baseline rate %v), got %v", baselineRate, buildRate)
	case !(alpha > 0 && alpha < 1):
		return 0, fmt.Errorf("stats: alpha must be in (0, 1), got %v", alpha)
	case !(power > 0 && power < 1):
		return 0, fmt.Errorf("stats: power must be in (0, 1), got %v", power)
	}
	enough := func(n int) (bool, error) {
		if float64(n)*baselineRate > maxExpected {
			return false, errTooLarge
		}
		return fisherPower(n, baselineRate, buildRate, alpha) >= power, nil
	}
	// Doubling: lo has too little power (0 cycles have none), hi enough.
	lo, hi := 0, 1
	for {
		ok, err := enough(hi)
		if err != nil {
			return 0, fmt.Errorf("stats: power plan for %v -> %v at alpha %v, power %v: more than %d cycles per build: %w",
				baselineRate, buildRate, alpha, power, lo, err)
		}
		if ok {
			break
		}
		if hi >= maxCycles {
			return 0, fmt.Errorf("stats: power plan for %v -> %v at alpha %v, power %v: more than %d cycles per build",
				baselineRate, buildRate, alpha, power, maxCycles)
		}
		lo, hi = hi, 2*hi
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok, _ := enough(mid); ok { // mid < hi, within the bound
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

var errTooLarge = errors.New("the baseline's expected count exceeds the exact enumeration's bound (1e5); use a normal approximation")
