package fault

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	tests := []struct {
		name     string
		d        Delay
		min, max time.Duration
		invalid  string // substring of the error; "" = valid
	}{
		{name: "none", d: Delay{}},
		{name: "fixed", d: Delay{Fixed: D(time.Second)}, min: time.Second, max: time.Second},
		{name: "uniform", d: Delay{UniformMin: D(100 * time.Millisecond), UniformMax: D(200 * time.Millisecond)}, min: 100 * time.Millisecond, max: 200 * time.Millisecond},
		{name: "uniform from zero", d: Delay{UniformMax: D(time.Millisecond)}, min: 0, max: time.Millisecond},
		{name: "exponential", d: Delay{ExponentialMean: D(time.Second)}, min: 0, max: time.Hour},
		{name: "two kinds", d: Delay{Fixed: D(1), ExponentialMean: D(1)}, invalid: "set only one of"},
		{name: "uniform and fixed", d: Delay{Fixed: D(1), UniformMax: D(2)}, invalid: "set only one of"},
		{name: "max below min", d: Delay{UniformMin: D(2), UniformMax: D(1)}, invalid: "uniformMax: 1ns is below uniformMin 2ns"},
		{name: "negative", d: Delay{Fixed: D(-time.Second)}, invalid: "fixed: -1s out of range"},
		{name: "too long", d: Delay{ExponentialMean: D(MaxDelay + 1)}, invalid: "exponentialMean: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.d.Validate()
			switch {
			case tc.invalid == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tc.invalid != "" && (err == nil || !strings.Contains(err.Error(), tc.invalid)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.invalid)
			case tc.invalid != "":
				return
			}
			a, b, other := NewSampler(3, 1), NewSampler(3, 1), NewSampler(4, 1)
			differs := false
			for i := 0; i < 200; i++ {
				x, y, z := a.Draw(tc.d), b.Draw(tc.d), other.Draw(tc.d)
				if x != y {
					t.Fatalf("same seed, different draws: %v vs %v", x, y)
				}
				differs = differs || x != z
				if x < tc.min || x > tc.max {
					t.Fatalf("draw %v outside [%v, %v]", x, tc.min, tc.max)
				}
			}
			random := tc.d.UniformMax.Duration > 0 || tc.d.ExponentialMean.Duration > 0
			if random && !differs {
				t.Errorf("seeds 3 and 4 drew the same 200 delays")
			}
		})
	}
}

func TestDelayBound(t *testing.T) {
	for _, tc := range []struct {
		d    Delay
		want time.Duration
	}{
		{Delay{}, 0},
		{Delay{Fixed: D(time.Second)}, time.Second},
		{Delay{UniformMin: D(time.Second), UniformMax: D(3 * time.Second)}, 3 * time.Second},
		{Delay{ExponentialMean: D(time.Second)}, 20 * time.Second},
	} {
		if got := tc.d.Bound(); got != tc.want {
			t.Errorf("%+v.Bound() = %v, want %v", tc.d, got, tc.want)
		}
	}
}

func TestProfileValidate(t *testing.T) {
	ok := Rule{Resource: "nodes", Delay: Delay{Fixed: D(time.Second)}}
	tests := []struct {
		name    string
		p       Profile
		invalid string
	}{
		{name: "empty", p: Profile{}},
		{name: "full", p: Profile{Rules: []Rule{ok, {Resource: "nodes", EventTypes: []string{"MODIFIED"}, Predicate: PredicateVolumesAttachedAdded, Delay: Delay{ExponentialMean: D(time.Second)}}, {Resource: "pods", EventTypes: []string{"ADDED", "DELETED", "BOOKMARK"}, Delay: Delay{UniformMax: D(time.Second)}}},
			RequestLatency: Delay{UniformMax: D(time.Millisecond)}, QPS: 5, Burst: 10, QueueLimit: 100}},
		{name: "no resource", p: Profile{Rules: []Rule{ok, {Delay: ok.Delay}}}, invalid: "rules[1].resource: required"},
		{name: "resource typo", p: Profile{Rules: []Rule{ok, {Resource: "nodez", Delay: ok.Delay}}}, invalid: `rules[1].resource: "nodez" is not a built-in resource; did you mean "nodes"?`},
		{name: "resource singular", p: Profile{Rules: []Rule{{Resource: "volumeattachment", Delay: ok.Delay}}}, invalid: `did you mean "volumeattachments"?`},
		{name: "resource upper case", p: Profile{Rules: []Rule{{Resource: "Pods", Delay: ok.Delay}}}, invalid: `did you mean "pods"?`},
		{name: "resource unknown", p: Profile{Rules: []Rule{{Resource: "widgets", Delay: ok.Delay}}}, invalid: `rules[0].resource: "widgets" is not a built-in resource (a plural`},
		{name: "no delay", p: Profile{Rules: []Rule{ok, {Resource: "nodes"}}}, invalid: "rules[1].delay: says no delay"},
		{name: "bad event type", p: Profile{Rules: []Rule{{Resource: "nodes", EventTypes: []string{"UPDATED"}}}}, invalid: `rules[0].eventTypes: "UPDATED" is not`},
		{name: "bad predicate", p: Profile{Rules: []Rule{{Resource: "nodes", Predicate: "volumesDetached"}}}, invalid: `rules[0].predicate: "volumesDetached" is not volumesAttachedRemoved or volumesAttachedAdded`},
		{name: "predicate on pods", p: Profile{Rules: []Rule{{Resource: "pods", Predicate: PredicateVolumesAttachedRemoved}}}, invalid: "rules[0].predicate: volumesAttachedRemoved applies to nodes only"},
		{name: "bad rule delay", p: Profile{Rules: []Rule{ok, ok, {Resource: "nodes", Delay: Delay{Fixed: D(1), UniformMax: D(2)}}}}, invalid: "rules[2].delay.set only one of"},
		{name: "bad request latency", p: Profile{RequestLatency: Delay{UniformMin: D(2), UniformMax: D(1)}}, invalid: "requestLatency.uniformMax:"},
		{name: "negative qps", p: Profile{QPS: -1}, invalid: "qps: -1 is negative"},
		{name: "negative burst", p: Profile{Burst: -1}, invalid: "burst: -1 is negative"},
		{name: "negative queue limit", p: Profile{QueueLimit: -1}, invalid: "queueLimit: -1 is negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.invalid == "" && err != nil || tc.invalid != "" && (err == nil || !strings.Contains(err.Error(), tc.invalid)) {
				t.Fatalf("Validate = %v, want %q", err, tc.invalid)
			}
		})
	}
}

// The profile travels as JSON from the harness to the proxy process: it
// must come back identical, with durations readable in the file.
func TestProfileJSON(t *testing.T) {
	in := Profile{Rules: []Rule{{Resource: "nodes", EventTypes: []string{"MODIFIED"}, Predicate: PredicateVolumesAttachedRemoved,
		Delay: Delay{Fixed: D(1500 * time.Millisecond)}}}, RequestLatency: Delay{ExponentialMean: D(20 * time.Millisecond)}, Seed: 7}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"fixed":"1.5s"`) || strings.Contains(string(data), "uniformMin") {
		t.Errorf("JSON %s: want durations as strings and unset ones left out", data)
	}
	var out Profile
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if out.Rules[0].Delay != in.Rules[0].Delay || out.RequestLatency != in.RequestLatency || out.Seed != 7 {
		t.Errorf("round trip: got %+v, want %+v", out, in)
	}
	if err := json.Unmarshal([]byte(`{"fixed": 5}`), &Delay{}); err == nil || !strings.Contains(err.Error(), `want a duration such as "30s"`) {
		t.Errorf("a number as a duration: err = %v", err)
	}
}

func TestAPIErrorValid(t *testing.T) {
	for _, e := range []APIError{
		{Resource: "nodes", Subresource: "status", Verbs: []string{"PATCH"}, Status: 500, Nth: 1},
		{Resource: "volumeattachments", Verbs: []string{"DELETE", "UPDATE"}, Status: 409, Fraction: 0.1},
		{Resource: "nodes", Status: 504, Fraction: 1, Hold: Delay{Fixed: D(time.Minute)}},
		{Resource: "pods", Status: 429, Nth: 3},
	} {
		if err := e.Validate(); err != nil {
			t.Errorf("%+v: %v", e, err)
		}
		p := Profile{APIErrors: []APIError{e}}
		if err := p.Validate(); err != nil {
			t.Errorf("profile with %+v: %v", e, err)
		}
	}
	bad := Profile{APIErrors: []APIError{{Resource: "nodes", Status: 500, Nth: 1}, {Resource: "nodes", Status: 200, Nth: 1}}}
	if err := bad.Validate(); err == nil || !strings.HasPrefix(err.Error(), "apiErrors[1].status:") {
		t.Errorf("second rule's status 200: %v, want apiErrors[1].status", err)
	}
}
