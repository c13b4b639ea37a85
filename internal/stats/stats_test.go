package stats

import (
	"math"
	"testing"
	"time"
)

func TestWilson95(t *testing.T) {
	tests := []struct {
		name      string
		k, n      int
		low, high float64 // reference values (R: binom::binom.wilson)
	}{
		{"none in 5000", 0, 5000, 0, 0.000768},
		{"all of 10", 10, 10, 0.722467, 1},
		{"half of 100", 50, 100, 0.403832, 0.596168},
		{"1 of 20", 1, 20, 0.008881, 0.236135},
		{"no trials", 0, 0, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			low, high := Wilson95(tc.k, tc.n)
			if math.Abs(low-tc.low) > 1e-5 || math.Abs(high-tc.high) > 1e-5 {
				t.Errorf("Wilson95(%d, %d) = [%.6f, %.6f], want [%.6f, %.6f]", tc.k, tc.n, low, high, tc.low, tc.high)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"median of odd", ms(5, 1, 3), 50, 3 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(seq(1, 100)...), 99, 99 * time.Millisecond},
		{"p100 is the max", ms(7, 9, 8), 100, 9 * time.Millisecond},
		{"p0 is the min", ms(7, 9, 8), 0, 7 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.in, tc.q); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.in, tc.q, got, tc.want)
			}
		})
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}
