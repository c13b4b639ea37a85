// Package proxy is strandlab's watch-aware throttling proxy between
// kube-controller-manager and kube-apiserver. It forwards every request with
// the controller's own identity and can hold watch events back — per
// resource, per event type, per predicate (e.g. a Node update that drops an
// entry from status.volumesAttached) — by a seeded delay distribution,
// without reordering, splitting or changing a frame. It can also add request
// latency and throttle to a QPS. Delayed events wait in a bounded queue per
// watch; when it is full the proxy stops reading from the API server
// (backpressure) instead of buffering without limit.
package proxy

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Profile is a fault profile (a scenario's proxy section).
type Profile struct {
	// Rules delay watch events; the first matching rule applies.
	Rules []Rule `json:"rules,omitempty"`
	// RequestLatency is added before forwarding every request.
	RequestLatency Delay `json:"requestLatency,omitempty"`
	// QPS and Burst throttle the controller's requests (0: unlimited).
	QPS   float64 `json:"qps,omitempty"`
	Burst int     `json:"burst,omitempty"`
	// Seed makes the delay draws repeatable.
	Seed uint64 `json:"seed,omitempty"`
	// QueueLimit bounds the events held per watch (default 10000); a full
	// queue stops reading from the API server.
	QueueLimit int `json:"queueLimit,omitempty"`
}

// Rule selects watch events and delays them.
type Rule struct {
	// Resource is the watched resource, e.g. "nodes", "pods".
	Resource string `json:"resource"`
	// EventTypes limits the rule to ADDED, MODIFIED, DELETED, BOOKMARK
	// (empty: all).
	EventTypes []string `json:"eventTypes,omitempty"`
	// Predicate narrows the rule further:
	//   volumesAttachedRemoved: a Node whose status.volumesAttached lost an
	//     entry since the previous event of that node on this watch;
	//   volumesAttachedAdded: ... gained an entry.
	Predicate string `json:"predicate,omitempty"`
	Delay     Delay  `json:"delay"`
}

// Predicates a rule may name.
const (
	PredicateVolumesAttachedRemoved = "volumesAttachedRemoved"
	PredicateVolumesAttachedAdded   = "volumesAttachedAdded"
)

// Delay is a distribution: exactly one of Fixed, Uniform (Min..Max) or
// Exponential (mean).
type Delay struct {
	Fixed       time.Duration `json:"fixed,omitempty"`
	UniformMin  time.Duration `json:"uniformMin,omitempty"`
	UniformMax  time.Duration `json:"uniformMax,omitempty"`
	Exponential time.Duration `json:"exponentialMean,omitempty"`
}

// Validate reports the first bad field.
func (p *Profile) Validate() error {
	for i, r := range p.Rules {
		if r.Resource == "" {
			return fmt.Errorf("rules[%d].resource: required", i)
		}
		for _, t := range r.EventTypes {
			switch t {
			case "ADDED", "MODIFIED", "DELETED", "BOOKMARK":
			default:
				return fmt.Errorf("rules[%d].eventTypes: %q is not ADDED, MODIFIED, DELETED or BOOKMARK", i, t)
			}
		}
		switch r.Predicate {
		case "", PredicateVolumesAttachedRemoved, PredicateVolumesAttachedAdded:
		default:
			return fmt.Errorf("rules[%d].predicate: %q is not %s or %s", i, r.Predicate, PredicateVolumesAttachedRemoved, PredicateVolumesAttachedAdded)
		}
		if r.Predicate != "" && r.Resource != "nodes" {
			return fmt.Errorf("rules[%d].predicate: %s applies to nodes only", i, r.Predicate)
		}
		if err := r.Delay.validate(); err != nil {
			return fmt.Errorf("rules[%d].delay: %w", i, err)
		}
	}
	if err := p.RequestLatency.validate(); err != nil {
		return fmt.Errorf("requestLatency: %w", err)
	}
	if p.QPS < 0 || p.Burst < 0 || p.QueueLimit < 0 {
		return fmt.Errorf("qps, burst and queueLimit must not be negative")
	}
	return nil
}

func (d Delay) validate() error {
	kinds := 0
	for _, v := range []time.Duration{d.Fixed, d.UniformMax, d.Exponential} {
		if v < 0 || d.UniformMin < 0 {
			return fmt.Errorf("durations must not be negative")
		}
		if v > 0 {
			kinds++
		}
	}
	if kinds > 1 {
		return fmt.Errorf("set one of fixed, uniformMin/uniformMax, exponentialMean")
	}
	if d.UniformMax < d.UniformMin {
		return fmt.Errorf("uniformMax %v is below uniformMin %v", d.UniformMax, d.UniformMin)
	}
	return nil
}

// sampler draws delays from one seeded source, shared by all watches so a
// run's sequence of draws depends only on the seed and the event order.
type sampler struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newSampler(seed uint64) *sampler { return &sampler{rng: rand.New(rand.NewPCG(seed, 0x70726f78))} }

func (s *sampler) draw(d Delay) time.Duration {
	switch {
	case d.Fixed > 0:
		return d.Fixed
	case d.UniformMax > 0:
		s.mu.Lock()
		defer s.mu.Unlock()
		return d.UniformMin + time.Duration(s.rng.Int64N(int64(d.UniformMax-d.UniformMin)+1))
	case d.Exponential > 0:
		s.mu.Lock()
		defer s.mu.Unlock()
		return time.Duration(s.rng.ExpFloat64() * float64(d.Exponential))
	}
	return 0
}
