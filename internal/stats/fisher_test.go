package stats

import (
	"math"
	"math/big"
	"testing"
)

func TestFisherExact(t *testing.T) {
	tests := []struct {
		name                  string
		xA, nA, xB, nB        int
		fewer, more, twoSided float64
	}{
		// Every stranding in A: P(X_B = 0 | 5 in all) = C(5000,5)/C(10000,5)
		// = (5000·4999·4998·4997·4996)/(10000·9999·9998·9997·9996). The
		// conditional distribution is symmetric (equal n), so the other
		// extreme (all 5 in B) is as likely and the two-sided p doubles.
		{"stock 5/5000 vs fix 0/5000", 5, 5000, 0, 5000, 0.03121875156, 1, 0.06243750313},
		// The same with 20: product of (5000-i)/(10000-i), i < 20, ≈ 0.5^20.
		{"stock 20/5000 vs fix 0/5000", 20, 5000, 0, 5000, 9.356908106e-07, 1, 1.871381621e-06},
		// Mirror image: B has them all.
		{"stock 0/5000 vs fix 5/5000", 0, 5000, 5, 5000, 1, 0.03121875156, 0.06243750313},
		// C(10,3)/C(20,3) = 120/1140 = 2/19.
		{"3/10 vs 0/10", 3, 10, 0, 10, 2.0 / 19, 1, 4.0 / 19},
		// 3 events among 7 trials, 4 in B: t(k) = C(4,k)·C(3,3-k) = 1, 12,
		// 18, 4 for k = 0..3, over C(7,3) = 35. Fewer: (1+12)/35; more:
		// 34/35; two-sided: tables no likelier than t(1) = 12: (1+12+4)/35.
		{"2/3 vs 1/4 (by hand)", 2, 3, 1, 4, 13.0 / 35, 34.0 / 35, 17.0 / 35},
		// Reference values from exact rational arithmetic (Python's
		// fractions and math.comb), agreeing with R's fisher.test.
		{"12/50 vs 3/40", 12, 50, 3, 40, 0.03310322312, 0.9930876471, 0.04746814917},
		{"1/20 vs 7/30", 1, 20, 7, 30, 0.9890982348, 0.08674013206, 0.1227113334},
		{"5/5000 vs 1/5000", 5, 5000, 1, 5000, 0.1093046734, 0.9843984328, 0.2186093469},
		// A tiny p-value keeps its relative accuracy.
		{"40/100 vs 0/100", 40, 100, 0, 100, 6.704963314e-15, 1, 1.340992663e-14},
		// No events at all: one possible table, no evidence.
		{"0 vs 0", 0, 5000, 0, 5000, 1, 1, 1},
		// Every cycle in both: one possible table again.
		{"all stranded", 10, 10, 10, 10, 1, 1, 1},
		// A build with no trials carries no evidence: p = 1 (documented).
		{"B has no trials", 5, 5000, 0, 0, 1, 1, 1},
		{"A has no trials", 0, 0, 3, 10, 1, 1, 1},
		{"neither has trials", 0, 0, 0, 0, 1, 1, 1},
		// 1/C(10000,5000) ≈ 1e-3008 underflows float64: reported as 0
		// (documented); the other direction holds the mode and is 1.
		{"5000/5000 vs 0/5000", 5000, 5000, 0, 5000, 0, 1, 0},
		// Symmetric centre: P(X <= 2500) = 1/2 + P(X = 2500)/2.
		{"2500/5000 vs 2500/5000", 2500, 5000, 2500, 5000, 0.507978247217053, 0.507978247217053, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				alt  Alternative
				want float64
			}{{Fewer, tc.fewer}, {More, tc.more}, {TwoSided, tc.twoSided}} {
				got, err := FisherExact(tc.xA, tc.nA, tc.xB, tc.nB, c.alt)
				if err != nil {
					t.Fatal(err)
				}
				if !near(got, c.want, 1e-9) {
					t.Errorf("FisherExact(%d/%d vs %d/%d, %v) = %.10g, want %.10g", tc.xA, tc.nA, tc.xB, tc.nB, c.alt, got, c.want)
				}
			}
		})
	}
}

func TestFisherExactErrors(t *testing.T) {
	for _, c := range [][4]int{{-1, 10, 0, 10}, {0, -1, 0, 10}, {11, 10, 0, 10}, {0, 10, 3, 2}, {0, 10, -2, 10}} {
		if p, err := FisherExact(c[0], c[1], c[2], c[3], Fewer); err == nil {
			t.Errorf("FisherExact(%v) = %v, want an error", c, p)
		}
	}
	if _, err := FisherExact(1, 2, 0, 2, Alternative(7)); err == nil {
		t.Error("unknown alternative: want an error")
	}
}

// TestFisherExactMatchesExactArithmetic compares every table with up to 12
// trials per build (and a few unequal sizes) with the p-values computed in
// exact rational arithmetic from the hypergeometric probabilities.
func TestFisherExactMatchesExactArithmetic(t *testing.T) {
	sizes := [][2]int{{12, 12}, {7, 12}, {12, 5}, {1, 9}, {30, 30}}
	for _, sz := range sizes {
		nA, nB := sz[0], sz[1]
		for xA := 0; xA <= nA; xA++ {
			for xB := 0; xB <= nB; xB++ {
				fewer, more, two := exactFisher(xA, nA, xB, nB)
				for _, c := range []struct {
					alt  Alternative
					want float64
				}{{Fewer, fewer}, {More, more}, {TwoSided, two}} {
					got, err := FisherExact(xA, nA, xB, nB, c.alt)
					if err != nil {
						t.Fatal(err)
					}
					if !near(got, c.want, 1e-12) {
						t.Errorf("FisherExact(%d/%d vs %d/%d, %v) = %.15g, exact %.15g", xA, nA, xB, nB, c.alt, got, c.want)
					}
				}
			}
		}
	}
}

// exactFisher is Fisher's test from big-integer binomial coefficients.
func exactFisher(xA, nA, xB, nB int) (fewer, more, two float64) {
	total := xA + xB
	lo, hi := max(0, total-nA), min(total, nB)
	term := func(k int) *big.Int {
		return new(big.Int).Mul(new(big.Int).Binomial(int64(nB), int64(k)), new(big.Int).Binomial(int64(nA), int64(total-k)))
	}
	den := new(big.Int).Binomial(int64(nA+nB), int64(total))
	obs := term(xB)
	f, m, s := new(big.Int), new(big.Int), new(big.Int)
	for k := lo; k <= hi; k++ {
		tk := term(k)
		if k <= xB {
			f.Add(f, tk)
		}
		if k >= xB {
			m.Add(m, tk)
		}
		if tk.Cmp(obs) <= 0 {
			s.Add(s, tk)
		}
	}
	ratio := func(x *big.Int) float64 { v, _ := new(big.Rat).SetFrac(x, den).Float64(); return v }
	return ratio(f), ratio(m), ratio(s)
}

// near reports whether got is within rel (relative) of want, or both are
// below 1e-300.
func near(got, want, rel float64) bool {
	if math.Abs(want) < 1e-300 {
		return math.Abs(got) < 1e-300
	}
	return math.Abs(got-want) <= rel*math.Abs(want)
}
