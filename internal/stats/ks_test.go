package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The Kolmogorov distribution's critical values (Smirnov 1948's table, as
// in every statistics text): Q(λ) = α at λ = 1.2239 (α 0.10), 1.3581
// (0.05), 1.6276 (0.01), 1.9495 (0.001).
func TestKolmogorovQCriticalValues(t *testing.T) {
	tests := []struct{ lambda, want float64 }{
		{0, 1}, {0.2, 1}, {1.2239, 0.10}, {1.3581, 0.05}, {1.6276, 0.01}, {1.9495, 0.001},
	}
	for _, tc := range tests {
		if got := KolmogorovQ(tc.lambda); math.Abs(got-tc.want) > 1e-4+0.001*tc.want {
			t.Errorf("KolmogorovQ(%v) = %.6f, want %.4f", tc.lambda, got, tc.want)
		}
	}
}

func TestKolmogorovSmirnov2(t *testing.T) {
	same := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	shifted := []float64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	half := []float64{6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	tests := []struct {
		name       string
		x, y       []float64
		d          float64
		pLow, pHig float64
	}{
		{"identical samples", same, same, 0, 1, 1},
		{"disjoint samples", same, shifted, 1, 0, 1e-4},
		{"half overlapping", same, half, 0.5, 0.05, 0.2},
		{"an empty sample carries no evidence", same, nil, 0, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := KolmogorovSmirnov2(tc.x, tc.y)
			if math.Abs(got.D-tc.d) > 1e-12 || got.P < tc.pLow || got.P > tc.pHig {
				t.Errorf("got D %.4f p %.5f, want D %.4f, p in [%g, %g]", got.D, got.P, tc.d, tc.pLow, tc.pHig)
			}
		})
	}
}

// Under the null (both samples from one distribution) the test rejects at
// 5% in about 5% of comparisons (Stephens's correction keeps it close at
// small n), and at a real shift it mostly does.
func TestKolmogorovSmirnov2ErrorRates(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sample := func(n int, shift float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = rng.ExpFloat64() + shift
		}
		return out
	}
	const trials = 4000
	rejected, detected := 0, 0
	for range trials {
		if KolmogorovSmirnov2(sample(40, 0), sample(60, 0)).P < 0.05 {
			rejected++
		}
		if KolmogorovSmirnov2(sample(40, 0), sample(60, 0.6)).P < 0.05 {
			detected++
		}
	}
	if rate := float64(rejected) / trials; rate < 0.03 || rate > 0.065 {
		t.Errorf("type I error %.3f at alpha 0.05, want about 0.05", rate)
	}
	if power := float64(detected) / trials; power < 0.7 {
		t.Errorf("power %.3f against a shift of 0.6, want most", power)
	}
}
