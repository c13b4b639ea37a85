package extender

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Latency is the filter's added delay: fixed, uniform in [Min, Max], or
// exponential with mean Mean, drawn from a PCG seeded with Seed so a run
// repeats.
type Latency struct {
	Fixed       time.Duration `json:"fixed,omitempty"`
	UniformMin  time.Duration `json:"uniformMin,omitempty"`
	UniformMax  time.Duration `json:"uniformMax,omitempty"`
	Exponential time.Duration `json:"exponentialMean,omitempty"`
	Seed        uint64        `json:"seed,omitempty"`
}

// Validate reports the first bad field.
func (l Latency) Validate() error {
	set := 0
	if l.Fixed != 0 {
		set++
	}
	if l.UniformMin != 0 || l.UniformMax != 0 {
		set++
	}
	if l.Exponential != 0 {
		set++
	}
	switch {
	case set > 1:
		return fmt.Errorf("latency: set one of fixed, uniformMin/uniformMax, exponentialMean")
	case l.Fixed < 0 || l.Exponential < 0 || l.UniformMin < 0:
		return fmt.Errorf("latency: durations must not be negative")
	case l.UniformMax < l.UniformMin:
		return fmt.Errorf("latency.uniformMax: %v is below uniformMin %v", l.UniformMax, l.UniformMin)
	}
	return nil
}

// sampler draws latencies; safe for concurrent filters.
type sampler struct {
	l   Latency
	mu  sync.Mutex
	rng *rand.Rand
}

func newSampler(l Latency) *sampler {
	return &sampler{l: l, rng: rand.New(rand.NewPCG(l.Seed, 0x6578746e))}
}

func (s *sampler) next() time.Duration {
	switch {
	case s.l.Fixed > 0:
		return s.l.Fixed
	case s.l.UniformMax > 0:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.l.UniformMin + time.Duration(s.rng.Int64N(int64(s.l.UniformMax-s.l.UniformMin)+1))
	case s.l.Exponential > 0:
		s.mu.Lock()
		defer s.mu.Unlock()
		return time.Duration(s.rng.ExpFloat64() * float64(s.l.Exponential))
	}
	return 0
}
