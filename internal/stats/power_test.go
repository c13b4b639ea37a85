package stats

import (
	"strings"
	"testing"
)

func TestPowerPlan(t *testing.T) {
	tests := []struct {
		name           string
		rateA, rateB   float64
		want           int
		powerAt        float64 // FisherPower at want cycles
		powerAtOneLess float64 // and at want-1
	}{
		// With r_B = 0 the fix strands never, x_B = 0, and the p-value of
		// x_A strandings is P(all x_A fall in A | x_A in all) =
		// C(n, x_A)/C(2n, x_A) = Π_{i<x_A} (n-i)/(2n-i), just under 0.5^x_A
		// at thousands of cycles: 0.5^6 = 0.0156 > 0.01 >= 0.5^7 = 0.0078,
		// so the test rejects iff x_A >= 7. Power 0.8 needs
		// P(Binomial(n, 0.001) >= 7) >= 0.8; with the Poisson
		// approximation P(Poisson(λ) >= 7) = 0.8 at λ ≈ 9.07, so n ≈ 9,070.
		// Exactly (critical count from exact rationals, binomial tail in
		// Python): P = 0.7999247 at 9,073 and 0.8000136 at 9,074.
		{"r_A = 0.001, r_B = 0", 0.001, 0, 9074, 0.8000135677, 0.7999247015},
		// Same critical count; λ ≈ 9.06 at r_A = 0.01: 906 cycles.
		{"r_A = 0.01, r_B = 0", 0.01, 0, 906, 0.8000018191, 0.7991077192},
		{"r_A = 0.05, r_B = 0", 0.05, 0, 180, 0.8002033401, 0.7956114920},
		// Every baseline cycle strands: x_A = n and p = 1/C(2n, n);
		// C(8,4) = 70 (p = 0.014) fails, C(10,5) = 252 (p = 0.004) passes,
		// with certainty: 5 cycles, power 1; 4 cycles, power 0.
		{"r_A = 1, r_B = 0", 1, 0, 5, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := PowerPlan(tc.rateA, tc.rateB, 0.01, 0.8)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.want {
				t.Errorf("PowerPlan(%v, %v, 0.01, 0.8) = %d, want %d", tc.rateA, tc.rateB, n, tc.want)
			}
			for _, c := range []struct {
				n    int
				want float64
			}{{tc.want, tc.powerAt}, {tc.want - 1, tc.powerAtOneLess}} {
				got, err := FisherPower(c.n, tc.rateA, tc.rateB, 0.01)
				if err != nil {
					t.Fatal(err)
				}
				if d := got - c.want; d > 1e-9 || d < -1e-9 {
					t.Errorf("FisherPower(%d, %v, %v) = %.10f, want %.10f", c.n, tc.rateA, tc.rateB, got, c.want)
				}
			}
		})
	}
}

// TestPowerPlanWithResidualRate checks plans for builds that still strand:
// enough power at the plan, too little one cycle earlier, both by brute
// force over every pair of counts.
func TestPowerPlanWithResidualRate(t *testing.T) {
	for _, r := range [][2]float64{{0.2, 0.05}, {0.05, 0.01}} {
		n, err := PowerPlan(r[0], r[1], 0.01, 0.8)
		if err != nil {
			t.Fatal(err)
		}
		if p := bruteForcePower(t, n, r[0], r[1], 0.01); p < 0.8 {
			t.Errorf("PowerPlan(%v, %v) = %d, but the power there is %.6f", r[0], r[1], n, p)
		}
		if p := bruteForcePower(t, n-1, r[0], r[1], 0.01); p >= 0.8 {
			t.Errorf("PowerPlan(%v, %v) = %d, but %d cycles already have power %.6f", r[0], r[1], n, n-1, p)
		}
	}
}

// TestFisherPowerMatchesEnumeration checks FisherPower's sweep (which relies
// on the rejection region being a down-set) against every pair of counts,
// and against two values computed in exact rational arithmetic (Python's
// fractions: every pair, exact binomial and hypergeometric probabilities).
func TestFisherPowerMatchesEnumeration(t *testing.T) {
	exact := map[[3]float64]float64{
		{40, 0.2, 0.05}: 0.264722015571042,
		{60, 0.3, 0.1}:  0.6099908342984247,
	}
	for _, c := range [][3]float64{{40, 0.2, 0.05}, {60, 0.3, 0.1}, {25, 0.5, 0.1}, {30, 0.9, 0.6}, {50, 0.1, 0}, {12, 1, 0.5}, {20, 0.3, 0.29}} {
		n := int(c[0])
		got, err := FisherPower(n, c[1], c[2], 0.01)
		if err != nil {
			t.Fatal(err)
		}
		want := bruteForcePower(t, n, c[1], c[2], 0.01)
		if d := got - want; d > 1e-11 || d < -1e-11 {
			t.Errorf("FisherPower(%d, %v, %v) = %.12f, enumeration %.12f", n, c[1], c[2], got, want)
		}
		if e, ok := exact[c]; ok {
			if d := got - e; d > 1e-11 || d < -1e-11 {
				t.Errorf("FisherPower(%d, %v, %v) = %.12f, exact %.12f", n, c[1], c[2], got, e)
			}
		}
	}
}

// bruteForcePower sums P(x_A)·P(x_B) over every pair whose one-sided p-value
// is at most alpha, with the binomial probabilities from exact arithmetic.
func bruteForcePower(t *testing.T, n int, rA, rB, alpha float64) float64 {
	t.Helper()
	pA, pB := binomialAll(n, rA), binomialAll(n, rB)
	s := 0.0
	for xA := 0; xA <= n; xA++ {
		for xB := 0; xB <= n; xB++ {
			p, err := FisherExact(xA, n, xB, n, Fewer)
			if err != nil {
				t.Fatal(err)
			}
			if p <= alpha {
				s += pA[xA] * pB[xB]
			}
		}
	}
	return s
}

// binomialAll is P(X = k), k = 0..n, by the multiplicative recurrence from
// P(X = 0) (fine for the small n of these tests).
func binomialAll(n int, r float64) []float64 {
	out := make([]float64, n+1)
	switch r {
	case 0:
		out[0] = 1
		return out
	case 1:
		out[n] = 1
		return out
	}
	out[0] = 1
	for k := 0; k < n; k++ {
		out[k+1] = out[k] * float64(n-k) / float64(k+1) * r / (1 - r)
	}
	s := 0.0
	for _, v := range out {
		s += v
	}
	for k := range out {
		out[k] /= s
	}
	return out
}

func TestPowerPlanErrors(t *testing.T) {
	tests := []struct {
		name                 string
		rA, rB, alpha, power float64
		want                 string
	}{
		{"no reduction", 0.01, 0.01, 0.01, 0.8, "build rate"},
		{"increase", 0.01, 0.02, 0.01, 0.8, "build rate"},
		{"zero baseline", 0, 0, 0.01, 0.8, "baseline rate"},
		{"rate above 1", 1.5, 0, 0.01, 0.8, "baseline rate"},
		{"alpha 0", 0.01, 0, 0, 0.8, "alpha"},
		{"power 1", 0.01, 0, 0.01, 1, "power must be"},
		{"beyond the cycle bound", 1e-12, 0, 0.01, 0.8, "more than 1073741824 cycles"},
		{"beyond the enumeration bound", 0.5, 0.495, 0.01, 0.8, "normal approximation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := PowerPlan(tc.rA, tc.rB, tc.alpha, tc.power)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("PowerPlan(%v, %v, %v, %v) = %d, %v; want an error with %q", tc.rA, tc.rB, tc.alpha, tc.power, n, err, tc.want)
			}
		})
	}
	if _, err := FisherPower(-1, 0.1, 0, 0.01); err == nil {
		t.Error("FisherPower with -1 trials: want an error")
	}
}
