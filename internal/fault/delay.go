package fault

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// MaxDelay bounds every duration of a Delay: longer holds are no longer a
// lagging informer but a broken one, and would outlast a cycle's timeout.
const MaxDelay = 5 * time.Minute

// Duration is a time.Duration written as a Go duration string ("1.5s") in
// scenario files and in the JSON the harness hands its components.
type Duration struct{ time.Duration }

// D is shorthand for a Duration in Go code and tests.
func D(d time.Duration) Duration { return Duration{d} }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// Delay is a distribution of delays: none (the zero value), or exactly one
// of Fixed, uniform in [UniformMin, UniformMax], or exponential with mean
// ExponentialMean.
type Delay struct {
	Fixed           Duration `json:"fixed,omitzero"`
	UniformMin      Duration `json:"uniformMin,omitzero"`
	UniformMax      Duration `json:"uniformMax,omitzero"`
	ExponentialMean Duration `json:"exponentialMean,omitzero"`
}

// Validate reports the first bad field, by its JSON name.
func (d Delay) Validate() error {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"fixed", d.Fixed.Duration}, {"uniformMin", d.UniformMin.Duration}, {"uniformMax", d.UniformMax.Duration}, {"exponentialMean", d.ExponentialMean.Duration}} {
		if f.v < 0 || f.v > MaxDelay {
			return fmt.Errorf("%s: %v out of range [0, %v]", f.name, f.v, MaxDelay)
		}
	}
	kinds := 0
	if d.Fixed.Duration > 0 {
		kinds++
	}
	if d.UniformMin.Duration > 0 || d.UniformMax.Duration > 0 {
		kinds++
	}
	if d.ExponentialMean.Duration > 0 {
		kinds++
	}
	if kinds > 1 {
		return fmt.Errorf("set only one of fixed, uniformMin/uniformMax, exponentialMean")
	}
	if d.UniformMax.Duration < d.UniformMin.Duration {
		return fmt.Errorf("uniformMax: %v is below uniformMin %v", d.UniformMax.Duration, d.UniformMin.Duration)
	}
	return nil
}

// IsZero reports whether d delays nothing.
func (d Delay) IsZero() bool { return d == Delay{} }

// Bound is a delay that draws from d rarely exceed: the largest fixed or
// uniform value, or 20 means of an exponential (exceeded with probability
// e^-20). Callers size timeouts with it.
func (d Delay) Bound() time.Duration {
	return d.Fixed.Duration + d.UniformMax.Duration + 20*d.ExponentialMean.Duration
}

// Sampler draws delays from one seeded source. It is safe for concurrent
// use; the sequence of draws depends only on the seed, the stream and the
// order of the calls, so a run repeats.
type Sampler struct {
	mu  sync.Mutex
	rng *rand.Rand
}

// NewSampler returns a sampler seeded with seed. stream separates the
// sources of components that share a scenario's seed (the proxy's draws
// must not shift when the extender draws more).
func NewSampler(seed, stream uint64) *Sampler {
	return &Sampler{rng: rand.New(rand.NewPCG(seed, stream))}
}

// Draw returns one delay from d.
func (s *Sampler) Draw(d Delay) time.Duration {
	switch {
	case d.Fixed.Duration > 0:
		return d.Fixed.Duration
	case d.UniformMax.Duration > 0:
		s.mu.Lock()
		defer s.mu.Unlock()
		return d.UniformMin.Duration + time.Duration(s.rng.Int64N(int64(d.UniformMax.Duration-d.UniformMin.Duration)+1))
	case d.ExponentialMean.Duration > 0:
		s.mu.Lock()
		defer s.mu.Unlock()
		return time.Duration(s.rng.ExpFloat64() * float64(d.ExponentialMean.Duration))
	}
	return 0
}
