package stats

// The paired sign-flip (permutation) test: a test whose unit is the round
// or the run, not the cycle (docs/statistics.md, "Rounds paired").

import "math/rand/v2"

// signFlipExactMax is the most non-zero differences enumerated exactly
// (2^20 sign assignments); beyond it the test draws signFlipDraws.
const (
	signFlipExactMax = 20
	signFlipDraws    = 200000
)

// SignFlip is the paired permutation test of differences d_i = b_i - a_i
// between two builds run on the same units (rounds of the same seed):
// under "no difference" each unit's two counts are exchangeable, so each
// d_i is as likely to have had the other sign. With S = Σ d_i, fewer is
// P(S' <= S) and more is P(S' >= S) over the 2^m sign assignments of the m
// non-zero differences (Fisher 1935, The Design of Experiments, §21;
// Good 2005, Permutation, Parametric and Bootstrap Tests of Hypotheses,
// §3.1). Up to 20 non-zero differences every assignment is counted; beyond,
// 200,000 assignments are drawn with a fixed seed and each p-value is
// (count + 1) / (draws + 1), which never understates it (Phipson and
// Smyth 2010). Without a non-zero difference both are 1.
func SignFlip(diffs []int) (fewer, more float64) {
	var nz []int
	s := 0
	for _, d := range diffs {
		if d != 0 {
			nz = append(nz, abs(d))
			s += d
		}
	}
	m := len(nz)
	if m == 0 {
		return 1, 1
	}
	le, ge := 0, 0
	count := func(t int) {
		if t <= s {
			le++
		}
		if t >= s {
			ge++
		}
	}
	if m <= signFlipExactMax {
		for mask := 0; mask < 1<<m; mask++ {
			count(flipped(nz, func(i int) bool { return mask&(1<<i) != 0 }))
		}
		total := float64(int(1) << m)
		return float64(le) / total, float64(ge) / total
	}
	rng := rand.New(rand.NewPCG(1935, 21))
	for range signFlipDraws {
		count(flipped(nz, func(int) bool { return rng.Uint64()&1 == 1 }))
	}
	return float64(le+1) / (signFlipDraws + 1), float64(ge+1) / (signFlipDraws + 1)
}

// flipped is the sum of vs with the i-th negated where neg(i).
func flipped(vs []int, neg func(i int) bool) int {
	t := 0
	for i, v := range vs {
		if neg(i) {
			t -= v
		} else {
			t += v
		}
	}
	return t
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
