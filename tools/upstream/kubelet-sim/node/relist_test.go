package node

import (
	"testing"
	"time"
)

// TestRelistSchedule: with relist durations measured, one starts a period
// after the previous one ended, and a wait for the first relist begun after
// t ends when that relist ends.
func TestRelistSchedule(t *testing.T) {
	start := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	at := func(d time.Duration) time.Time { return start.Add(d) }
	// Drawn durations, in order, with a period of 1 s: relists start at 0,
	// 1.1 s, 2.9 s and 6.9 s, and end at 0.1, 1.9, 5.9 and 6.9 s.
	script := []time.Duration{100 * ms, 800 * ms, 3000 * ms, 0}
	tests := []struct {
		name    string
		after   time.Duration
		wantEnd time.Duration
	}{
		{"before the node started: the first relist", -time.Second, 100 * ms},
		{"at the first start: the second relist", 0, 1900 * ms},
		{"between two starts", 1 * time.Second, 1900 * ms},
		{"during a long relist: the one after it", 4 * time.Second, 6900 * ms},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			i := 0
			s := newRelistSchedule(start, time.Second, func() (time.Duration, bool) {
				d := script[i%len(script)]
				i++
				return d, true
			})
			if got := s.after(at(tc.after)); !got.Equal(at(tc.wantEnd)) {
				t.Errorf("after(start%+v) = start%+v, want start%+v", tc.after, got.Sub(start), tc.wantEnd)
			}
		})
	}
}

// Without measured relists the schedule is the fixed period, as before
// relists were drawn, and a long quiet spell is crossed.
func TestRelistScheduleFixedPeriod(t *testing.T) {
	start := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)
	s := newRelistSchedule(start, time.Second, func() (time.Duration, bool) { return 0, false })
	for _, tc := range []struct{ after, want time.Duration }{
		{2500 * time.Millisecond, 3 * time.Second},
		{time.Hour + 200*time.Millisecond, time.Hour + time.Second},
		{time.Hour + 400*time.Millisecond, time.Hour + time.Second},
	} {
		if got := s.after(start.Add(tc.after)); !got.Equal(start.Add(tc.want)) {
			t.Errorf("after(start+%v) = start+%v, want start+%v", tc.after, got.Sub(start), tc.want)
		}
	}
	if n := len(s.starts); n > 1000 {
		t.Errorf("%d relists kept after an hour, want those of the last %v", n, relistRetention)
	}
}
