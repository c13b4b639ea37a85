package stats

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// KS is a two-sample Kolmogorov–Smirnov comparison of two samples of a
// timing (a provider's against another's, docs/kind.md "Calibration").
type KS struct {
	// D is the largest distance between the two empirical CDFs.
	D float64
	// P is the asymptotic p-value of "both samples come from one
	// continuous distribution" (KolmogorovQ); 1 when a sample is empty.
	P float64
}

// KolmogorovSmirnov2 compares samples x and y. D is gonum's
// (stat.KolmogorovSmirnov); the p-value is the asymptotic distribution of
// √Nₑ·D with Stephens's small-sample correction, Nₑ = nm/(n+m):
// P = Q_KS((√Nₑ + 0.12 + 0.11/√Nₑ)·D) (Stephens, "Use of the
// Kolmogorov–Smirnov, Cramér–von Mises and related statistics without
// extensive tables", JRSS B 32, 1970; Press et al., Numerical Recipes, 3rd
// ed., §14.3.3). Ties between the samples make it conservative.
func KolmogorovSmirnov2(x, y []float64) KS {
	if len(x) == 0 || len(y) == 0 {
		return KS{D: 0, P: 1}
	}
	xs, ys := slices.Sorted(slices.Values(x)), slices.Sorted(slices.Values(y))
	d := stat.KolmogorovSmirnov(xs, nil, ys, nil)
	n, m := float64(len(x)), float64(len(y))
	ne := math.Sqrt(n * m / (n + m))
	return KS{D: d, P: KolmogorovQ((ne + 0.12 + 0.11/ne) * d)}
}

// KolmogorovQ is the Kolmogorov distribution's upper tail,
// Q(λ) = 2 Σ_{j≥1} (-1)^{j-1} exp(-2 j² λ²), with Q(λ) = 1 for λ ≤ 0 and
// the series summed until its terms are negligible. Below λ = 0.3 it is 1
// to 15 digits and the alternating series converges too slowly, so 1 is
// returned.
func KolmogorovQ(lambda float64) float64 {
	if lambda < 0.3 {
		return 1
	}
	sum, sign := 0.0, 1.0
	for j := 1; j <= 100; j++ {
		term := sign * math.Exp(-2*float64(j*j)*lambda*lambda)
		sum += term
		if math.Abs(term) <= 1e-16*math.Abs(sum) {
			break
		}
		sign = -sign
	}
	return math.Min(1, math.Max(0, 2*sum))
}
