package fault

import (
	"fmt"
	"slices"
)

// APIError answers the controller's matching requests itself, with an error
// status, instead of forwarding them: the failed status PATCH of the
// attach/detach bugs that aborted the status loop or dropped a volume from
// the report, an API server that sheds load (429) or times out (504).
type APIError struct {
	// Resource is the requested resource, e.g. "nodes", "volumeattachments".
	Resource string `json:"resource"`
	// Subresource narrows it, e.g. "status" (empty: the resource itself).
	Subresource string `json:"subresource,omitempty"`
	// Verbs limits the rule to GET, LIST, WATCH, CREATE, UPDATE, PATCH,
	// DELETE, DELETECOLLECTION (empty: all).
	Verbs []string `json:"verbs,omitempty"`
	// Status is the answer: 409 (Conflict), 429 (TooManyRequests, with
	// Retry-After: 1), 500 (InternalError), 503 (ServiceUnavailable) or 504
	// (Timeout, as kube-apiserver's timeout filter answers a request that
	// outlives --request-timeout; with Hold, a slow one).
	Status int `json:"status"`
	// Fraction of the matching requests answered with the error, drawn with
	// the scenario's seed; or Nth: only the n-th matching request (from 1).
	// Exactly one of the two.
	Fraction float64 `json:"fraction,omitempty"`
	Nth      int     `json:"nth,omitempty"`
	// Hold delays the error's answer (none: at once).
	Hold Delay `json:"hold,omitzero"`
}

// APIErrorStatuses are the statuses an APIError may answer with.
var APIErrorStatuses = []int{409, 429, 500, 503, 504}

// Verbs are the request verbs the proxy tells apart (a small subset of
// k8s.io/apiserver's RequestInfoFactory).
var Verbs = []string{"GET", "LIST", "WATCH", "CREATE", "UPDATE", "PATCH", "DELETE", "DELETECOLLECTION"}

// subresources an APIError may name: the ones the attach/detach controller
// and its neighbours write. A misspelt one would match nothing and turn a
// faulted scenario into its own control.
var subresources = []string{"status", "binding", "eviction", "scale", "ephemeralcontainers", "resize"}

// Validate reports the first bad field by its JSON name.
func (e APIError) Validate() error {
	if e.Resource == "" {
		return fmt.Errorf("resource: required")
	}
	if err := checkResource(e.Resource); err != nil {
		return fmt.Errorf("resource: %w", err)
	}
	if e.Subresource != "" && !slices.Contains(subresources, e.Subresource) {
		return fmt.Errorf("subresource: %q is not one of %v", e.Subresource, subresources)
	}
	for _, v := range e.Verbs {
		if !slices.Contains(Verbs, v) {
			return fmt.Errorf("verbs: %q is not one of %v", v, Verbs)
		}
	}
	if !slices.Contains(APIErrorStatuses, e.Status) {
		return fmt.Errorf("status: %d is not one of %v", e.Status, APIErrorStatuses)
	}
	if err := validateSelection(e.Fraction, e.Nth, "requests"); err != nil {
		return err
	}
	if err := e.Hold.Validate(); err != nil {
		return fmt.Errorf("hold.%w", err)
	}
	return nil
}

// validateSelection checks how a rule chooses among the matching items
// (requests, calls): a fraction in (0, 1] or the n-th, exactly one.
func validateSelection(fraction float64, nth int, items string) error {
	switch {
	case fraction < 0 || fraction > 1:
		return fmt.Errorf("fraction: %v is not in (0, 1]", fraction)
	case nth < 0:
		return fmt.Errorf("nth: %d is negative", nth)
	case fraction > 0 && nth > 0:
		return fmt.Errorf("fraction, nth: set one of them, not both")
	case fraction == 0 && nth == 0:
		// Neither would select nothing: the faulted scenario would silently
		// be its own control.
		return fmt.Errorf("fraction, nth: set one of them (fraction of the matching %s, or the n-th)", items)
	}
	return nil
}

// Matches tells whether a request (its verb, resource and subresource, as
// the proxy names them) is one the rule answers.
func (e APIError) Matches(verb, resource, subresource string) bool {
	return resource == e.Resource && subresource == e.Subresource && (len(e.Verbs) == 0 || slices.Contains(e.Verbs, verb))
}

// Chance reports true with probability p: one seeded draw.
func (s *Sampler) Chance(p float64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Float64() < p
}
