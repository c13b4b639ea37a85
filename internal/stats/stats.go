// Package stats holds the statistics strandlab reports: binomial rates with
// confidence intervals, a rate's interval with dependent trials grouped in
// independent units (rounds, runs), latency percentiles, Fisher's exact
// test of one build against another and the power plan for it
// (docs/statistics.md).
package stats

import (
	"math"
	"slices"
	"time"
)

// z95 is the standard normal quantile for a two-sided 95% interval.
const z95 = 1.959963984540054

// Wilson95 returns the 95% Wilson score interval for k successes in n trials.
// Unlike the normal approximation it stays inside [0, 1] and is informative
// at k = 0, which is exactly the case "fix strands 0 of 5000" needs.
func Wilson95(k, n int) (low, high float64) {
	if n <= 0 {
		return 0, 1
	}
	p := float64(k) / float64(n)
	nn := float64(n)
	z2 := z95 * z95
	center := (p + z2/(2*nn)) / (1 + z2/nn)
	half := z95 * math.Sqrt(p*(1-p)/nn+z2/(4*nn*nn)) / (1 + z2/nn)
	return math.Max(0, center-half), math.Min(1, center+half)
}

// Percentile returns the q-th percentile (0..100) of ds by the nearest-rank
// method; 0 for an empty slice.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(q / 100 * float64(len(s))))
	rank = max(1, min(rank, len(s)))
	return s[rank-1]
}
