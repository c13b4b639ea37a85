package node

import (
	"sort"
	"sync"
	"time"
)

// relistSchedule is when the node's PLEG relists start and when each has
// filled the pod cache, generated as time goes on. Upstream's
// GenericPLEG.workerLoopIteration relists, then resets its timer to the
// period: one relist starts a period after the previous one ended, later
// when an on-demand relist of a pod holds the loop, and the cache's
// timestamp is the relist's start, set when it ends (GenericPLEG.Relist).
// With a draw (relists measured on kind, containerruntime.Runtime.Relist)
// each relist's duration is drawn and the next starts a period after it
// ended; without, relists fall every period from the node's start and take
// no time, as on a node of a few pods.
type relistSchedule struct {
	period time.Duration
	// draw returns a relist's duration; ok false: instant relists.
	draw func() (duration time.Duration, ok bool)

	mu sync.Mutex
	// relists generated so far, oldest first: starts[i] began, ends[i]
	// filled the cache. Those long past are dropped.
	starts, ends []time.Time
	// nextStart is when the relist after the last generated one begins.
	nextStart time.Time
}

// relistRetention is how far back a query may look: a pod's previous sync
// ended at most a cycle ago.
const relistRetention = 10 * time.Minute

func newRelistSchedule(start time.Time, period time.Duration, draw func() (time.Duration, bool)) *relistSchedule {
	s := &relistSchedule{period: period, draw: draw, nextStart: start}
	s.generate()
	return s
}

// generate appends the relist that begins at nextStart, its duration
// drawn; the next begins a period after it ended (workerLoopIteration:
// Relist, then globalRelistTimer.Reset(RelistPeriod)).
func (s *relistSchedule) generate() {
	d := time.Duration(0)
	if s.draw != nil {
		if dd, ok := s.draw(); ok {
			d = dd
		}
	}
	start := s.nextStart
	s.starts = append(s.starts, start)
	s.ends = append(s.ends, start.Add(d))
	s.nextStart = start.Add(d + s.period)
}

// after is when the first relist begun after t has filled the pod cache:
// the moment podCache.GetNewerThan(uid, t) returns for a pod no on-demand
// relist was asked for. t before the oldest relist kept gets that one.
func (s *relistSchedule) after(t time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.starts[len(s.starts)-1].After(t) {
		s.generate()
	}
	i := sort.Search(len(s.starts), func(i int) bool { return s.starts[i].After(t) })
	end := s.ends[i]
	s.prune(t)
	return end
}

// prune drops the relists that ended more than relistRetention before t,
// keeping the latest.
func (s *relistSchedule) prune(t time.Time) {
	cutoff := t.Add(-relistRetention)
	k := 0
	for k < len(s.starts)-1 && s.ends[k].Before(cutoff) {
		k++
	}
	if k > len(s.starts)/2 {
		s.starts = append([]time.Time(nil), s.starts[k:]...)
		s.ends = append([]time.Time(nil), s.ends[k:]...)
	}
}
