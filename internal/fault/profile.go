package fault

import "fmt"

// Profile is the throttling proxy's fault profile: which watch events reach
// kube-controller-manager late, how its requests are slowed, and which of
// them fail.
type Profile struct {
	// Rules delay watch events; the first matching rule applies.
	Rules []Rule `json:"rules,omitempty"`
	// RequestLatency is added before forwarding every request.
	RequestLatency Delay `json:"requestLatency,omitzero"`
	// QPS and Burst throttle the controller's requests (0: unlimited).
	QPS   float64 `json:"qps,omitempty"`
	Burst int     `json:"burst,omitempty"`
	// Seed makes the delay draws repeatable.
	Seed uint64 `json:"seed,omitempty"`
	// QueueLimit bounds the events held per watch (default 10000); a full
	// queue stops reading from the API server.
	QueueLimit int `json:"queueLimit,omitempty"`
	// APIErrors answer matching requests with an error instead of
	// forwarding them; the first matching rule applies.
	APIErrors []APIError `json:"apiErrors,omitempty"`
}

// Rule selects watch events and delays them.
type Rule struct {
	// Resource is the watched resource, e.g. "nodes", "pods".
	Resource string `json:"resource"`
	// EventTypes limits the rule to ADDED, MODIFIED, DELETED, BOOKMARK
	// (empty: all).
	EventTypes []string `json:"eventTypes,omitempty"`
	// Predicate narrows the rule further (nodes only): see the Predicate*
	// constants.
	Predicate string `json:"predicate,omitempty"`
	Delay     Delay  `json:"delay"`
}

// Predicates a rule may name. Both compare a Node's status.volumesAttached
// with the previous event of the same node on the same watch.
const (
	// PredicateVolumesAttachedRemoved: the list lost an entry (the event
	// whose lateness strands a re-attached volume, kubernetes #122413).
	PredicateVolumesAttachedRemoved = "volumesAttachedRemoved"
	// PredicateVolumesAttachedAdded: the list gained an entry (the mirror
	// image: a removal patch computed against it comes out empty).
	PredicateVolumesAttachedAdded = "volumesAttachedAdded"
)

// Validate reports the first bad field by its path (rules[1].delay.fixed).
func (p *Profile) Validate() error {
	for i, r := range p.Rules {
		if r.Resource == "" {
			return fmt.Errorf("rules[%d].resource: required", i)
		}
		if err := checkResource(r.Resource); err != nil {
			return fmt.Errorf("rules[%d].resource: %w", i, err)
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
		if err := r.Delay.Validate(); err != nil {
			return fmt.Errorf("rules[%d].delay.%w", i, err)
		}
		if r.Delay.Bound() == 0 {
			// delay: {} (or a misspelt key) would delay nothing: the
			// faulted scenario would silently be its own control.
			return fmt.Errorf("rules[%d].delay: says no delay; set fixed, uniformMin/uniformMax or exponentialMean above 0", i)
		}
	}
	if err := p.RequestLatency.Validate(); err != nil {
		return fmt.Errorf("requestLatency.%w", err)
	}
	for i, e := range p.APIErrors {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("apiErrors[%d].%w", i, err)
		}
	}
	switch {
	case p.QPS < 0:
		return fmt.Errorf("qps: %v is negative", p.QPS)
	case p.Burst < 0:
		return fmt.Errorf("burst: %d is negative", p.Burst)
	case p.QueueLimit < 0:
		return fmt.Errorf("queueLimit: %d is negative", p.QueueLimit)
	}
	return nil
}
