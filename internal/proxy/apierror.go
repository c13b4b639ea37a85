package proxy

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/strandlab/strandlab/internal/fault"
)

// errorStream keeps the error rules' draws apart from the delays': adding an
// APIError to a scenario must not shift which events its delays hold.
const errorStream = 0x6170696572

// apiErrors decides which requests the proxy answers with an error itself.
type apiErrors struct {
	rules   []fault.APIError
	sampler *fault.Sampler
	mu      sync.Mutex
	matched []int // per rule: matching requests so far
}

func newAPIErrors(rules []fault.APIError, seed uint64) *apiErrors {
	return &apiErrors{rules: rules, sampler: fault.NewSampler(seed, errorStream), matched: make([]int, len(rules))}
}

// decide returns the rule that fails this request, if any: the first rule
// that matches it, when its n-th request or its fraction's draw says so.
func (a *apiErrors) decide(info requestInfo) (fault.APIError, bool) {
	for i, r := range a.rules {
		if !r.Matches(info.verb, info.resource, info.subresource) {
			continue
		}
		if r.Nth > 0 {
			a.mu.Lock()
			a.matched[i]++
			n := a.matched[i]
			a.mu.Unlock()
			return r, n == r.Nth
		}
		return r, a.sampler.Chance(r.Fraction)
	}
	return fault.APIError{}, false
}

// statusReason is the metav1.StatusReason kube-apiserver gives each status.
var statusReason = map[int]string{
	http.StatusConflict:            "Conflict",
	http.StatusTooManyRequests:     "TooManyRequests",
	http.StatusInternalServerError: "InternalError",
	http.StatusServiceUnavailable:  "ServiceUnavailable",
	http.StatusGatewayTimeout:      "Timeout",
}

// writeAPIError answers as kube-apiserver answers a failed request: a
// metav1.Status body, which client-go turns into the matching
// apierrors.StatusError (IsConflict, IsTooManyRequests, ...), and
// Retry-After on a 429, as its max-in-flight and priority-and-fairness
// filters send it.
func writeAPIError(w http.ResponseWriter, r *http.Request, rule fault.APIError, sampler *fault.Sampler) {
	if !sleep(r.Context(), sampler.Draw(rule.Hold)) {
		return
	}
	body, _ := json.Marshal(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "reason": statusReason[rule.Status], "code": rule.Status,
		"message": "strandlab proxy: injected " + statusReason[rule.Status] + " (apiErrors)",
	})
	w.Header().Set("Content-Type", "application/json")
	if rule.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(rule.Status)
	_, _ = w.Write(body)
}
