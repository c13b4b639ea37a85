package stats

import (
	"math"
	"strings"
	"testing"
)

// repeat is n copies of u.
func repeat(n int, u Unit) []Unit {
	out := make([]Unit, n)
	for i := range out {
		out[i] = u
	}
	return out
}

func TestClustered95(t *testing.T) {
	// t(k) is Student's t 97.5% quantile at k degrees of freedom (tables:
	// t(3) = 3.182446, t(9) = 2.262157, t(29) = 2.045230, t(39) = 2.022691).
	// The hand computations are in each case's comment; the Beta quantiles
	// with fractional shapes are from mpmath 1.3 (betainc, bisected to 1e-40).
	tests := []struct {
		name     string
		units    []Unit
		rate     float64
		deff     float64
		eff      float64 // effective trials
		low      float64
		high     float64
		tolLimit float64 // on low and high
	}{
		{
			// p = 0: d = 1, n* = 30·(t(29)/t(9))² = 30·0.817407 = 24.522224;
			// the upper bound is Beta(1, n*) at 97.5%: 1 - 0.025^(1/n*).
			name: "no event in 10 rounds of 3", units: repeat(10, Unit{3, 0}),
			rate: 0, deff: 1, eff: 24.5222244608, low: 0, high: 1 - math.Pow(0.025, 1/24.5222244608), tolLimit: 1e-9,
		},
		{
			// p = 1: the mirror image, Beta(n*, 1) at 2.5% = 0.025^(1/n*).
			name: "every trial an event", units: repeat(10, Unit{3, 3}),
			rate: 1, deff: 1, eff: 24.5222244608, low: math.Pow(0.025, 1/24.5222244608), high: 1, tolLimit: 1e-9,
		},
		{
			// One event in each of 4 rounds of 10: every residual is 0, so
			// v = 0 and d = max(0, 1) = 1; n* = 40·(t(39)/t(3))² = 16.158345.
			name: "events spread evenly: design effect 1", units: repeat(4, Unit{10, 1}),
			rate: 0.1, deff: 1, eff: 16.1583448032, low: 0.00847756535654, high: 0.350549919084, tolLimit: 1e-7,
		},
		{
			// The 4 events in one round of 10, none in 3 others: residuals
			// 3, -1, -1, -1, so v = 4/3 · 12 / 40² = 0.01; the binomial
			// variance is 0.1·0.9/40 = 0.00225; d = 40/9 = 4.444;
			// n* = 40/d · (t(39)/t(3))² = 9 · 0.403959 = 3.635628.
			name: "events in one round: design effect 40/9", units: []Unit{{10, 4}, {10, 0}, {10, 0}, {10, 0}},
			rate: 0.1, deff: 40.0 / 9, eff: 3.63562758073, low: 7.17872540983e-6, high: 0.724613934059, tolLimit: 1e-7,
		},
		{
			// Every unit one trial (independent cycles): v = p(1-p)/(n-1), so
			// d = n/(n-1) = 20/19, and the t factor is 1: n* = 19, x* = 1.9.
			name: "one trial per unit", units: append(repeat(2, Unit{1, 1}), repeat(18, Unit{1, 0})...),
			rate: 0.1, deff: 20.0 / 19, eff: 19, low: 0.0113596250652, high: 0.324620090195, tolLimit: 1e-7,
		},
		{
			// A short last round and a unit with no trials (left out): p =
			// 3/11; residuals 2/11, -9/11, 13/11, -6/11: Σr² = 290/121;
			// v = 4/3 · (290/121)/121; d = v / ((3/11)(8/11)/11) = 1.464646;
			// n* = 11/d · (t(10)/t(3))² = 7.510345 · 0.490188 = 3.681478.
			name: "unequal rounds", units: []Unit{{3, 1}, {3, 0}, {0, 0}, {3, 2}, {2, 0}},
			rate: 3.0 / 11, deff: 1.46464646465, eff: 3.68147800961, low: 0.00697271884443, high: 0.837732093361, tolLimit: 1e-7,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Clustered95(tc.units)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				what      string
				got, want float64
				tol       float64
			}{
				{"rate", got.Rate, tc.rate, 1e-12},
				{"design effect", got.DesignEffect, tc.deff, 1e-9},
				{"effective trials", got.EffectiveTrials, tc.eff, 1e-7},
				{"low", got.Low, tc.low, tc.tolLimit},
				{"high", got.High, tc.high, tc.tolLimit},
			} {
				if math.Abs(c.got-c.want) > c.tol*math.Max(1, math.Abs(c.want)) {
					t.Errorf("%s = %.12g, want %.12g", c.what, c.got, c.want)
				}
			}
		})
	}
}

// The same 5 events in 2,000 trials: spread over 5 of 100 rounds they look
// like independent trials (d = 1); all in one round of 20 they are worth
// about a fifth as many trials (d = 5.01), and the interval widens.
func TestClustered95WidensWithClustering(t *testing.T) {
	spread := append(repeat(5, Unit{20, 1}), repeat(95, Unit{20, 0})...)
	clumped := append([]Unit{{20, 5}}, repeat(99, Unit{20, 0})...)
	a, err := Clustered95(spread)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Clustered95(clumped)
	if err != nil {
		t.Fatal(err)
	}
	if a.Rate != b.Rate || !(b.High-b.Low > 2*(a.High-a.Low)) || !(b.DesignEffect > 5 && b.DesignEffect < 5.02) || a.DesignEffect != 1 {
		t.Errorf("spread %+v, clumped %+v: want the same rate and a much wider clumped interval", a, b)
	}
}

func TestClustered95Refuses(t *testing.T) {
	tests := []struct {
		name  string
		units []Unit
		want  string
	}{
		{"no units", nil, "0 unit(s)"},
		{"one unit", []Unit{{100, 3}}, "1 unit(s)"},
		{"one unit with trials", []Unit{{100, 3}, {0, 0}}, "1 unit(s)"},
		{"more events than trials", []Unit{{3, 4}, {3, 0}}, "unit 0 has 4 events in 3 trials"},
		{"negative trials", []Unit{{3, 0}, {-1, 0}}, "unit 1 has 0 events in -1 trials"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Clustered95(tc.units)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
