package stats

import (
	"math"
	"testing"
)

func TestSignFlip(t *testing.T) {
	for _, tc := range []struct {
		name        string
		diffs       []int
		fewer, more float64
	}{
		// All m differences negative: only the observed assignment is as
		// extreme, p = 2^-m.
		{"five rounds, stock strands each, the build none", []int{-1, -1, -1, -1, -1}, 1.0 / 32, 1},
		{"zeros are not units", []int{0, -1, 0, -1, 0}, 1.0 / 4, 1},
		{"nothing differs", []int{0, 0, 0}, 1, 1},
		{"no units", nil, 1, 1},
		// -2, -1, +1: S = -2; assignments of (2, 1, 1) with sum <= -2:
		// (-2,-1,+1) (-2,+1,-1) (-2,-1,-1): 3 of 8; sum >= -2: 7 of 8.
		{"mixed", []int{-2, -1, 1}, 3.0 / 8, 7.0 / 8},
		{"the other way", []int{2, 1, -1}, 7.0 / 8, 3.0 / 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fewer, more := SignFlip(tc.diffs)
			if math.Abs(fewer-tc.fewer) > 1e-12 || math.Abs(more-tc.more) > 1e-12 {
				t.Errorf("(fewer, more) = (%g, %g), want (%g, %g)", fewer, more, tc.fewer, tc.more)
			}
		})
	}
}

// TestSignFlipDrawn: past 20 non-zero differences the p-value is drawn;
// 24 of 25 negative and one positive, all of size 1: exactly, the sum is
// -23 and P(S' <= -23) = (1 + 25) / 2^25 = 7.7e-7; the draws, 200,000 of
// them, can only say (0 + 1) / 200,001 at best, and must not say less.
// A balanced case lands near 1/2 either way.
func TestSignFlipDrawn(t *testing.T) {
	diffs := make([]int, 25)
	for i := range diffs {
		diffs[i] = -1
	}
	diffs[0] = 1
	fewer, _ := SignFlip(diffs)
	if want := 1.0 / 200001; math.Abs(fewer-want) > 1e-12 {
		t.Errorf("fewer = %g, want %g (no draw as extreme)", fewer, want)
	}
	balanced := make([]int, 30)
	for i := range balanced {
		balanced[i] = 1 - 2*(i%2)
	}
	f, m := SignFlip(balanced)
	// S = 0: P(S' <= 0) = P(S' >= 0) = (1 + P(S' = 0)) / 2, with
	// P(S' = 0) = C(30, 15) / 2^30 = 0.1445.
	want := (1 + 155117520.0/1073741824) / 2
	if math.Abs(f-want) > 0.005 || math.Abs(m-want) > 0.005 {
		t.Errorf("balanced: (%g, %g), want both near %.4f", f, m, want)
	}
}
