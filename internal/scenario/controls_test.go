package scenario

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// controls pairs every faulted scenario (a proxy with rules) with its
// control: the same experiment without the fault rules (docs/scenarios.md,
// "Controls").
var controls = map[string]string{
	"seed-122413.yaml":   "control.yaml",
	"mirror-safety.yaml": "mirror-safety-control.yaml",
	"node-delay.yaml":    "node-delay-control.yaml",
	"soak.yaml":          "soak-control.yaml",
	"soak-kind.yaml":     "soak-control-kind.yaml",
}

// A control differs from its faulted scenario by proxy.rules alone, so
// that a difference between their results is the faults' doing. Its name
// and its expect band are not compared: one names the experiment, the
// other judges its outcome, and neither changes what runs. Nor is
// untilVerdict: it says when to stop repeating the experiment (each round
// is the scenario's churn on the round's seed, as its control runs it
// once), not what a cycle is.
func TestControlsDifferByTheFaultRulesAlone(t *testing.T) {
	for _, f := range shippedScenarios(t) {
		s, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, paired := controls[filepath.Base(f)]; s.Proxy != nil && len(s.Proxy.Rules) > 0 && !paired {
			t.Errorf("%s has fault rules and no control: add one and pair it in controls", f)
		}
	}
	for faulted, control := range controls {
		t.Run(faulted, func(t *testing.T) {
			f, err := Load(filepath.Join("../../scenarios", faulted))
			if err != nil {
				t.Fatal(err)
			}
			c, err := Load(filepath.Join("../../scenarios", control))
			if err != nil {
				t.Fatal(err)
			}
			if f.Proxy == nil || len(f.Proxy.Rules) == 0 {
				t.Errorf("%s has no fault rules: it needs no control", faulted)
			}
			if c.Proxy != nil && len(c.Proxy.Rules) > 0 {
				t.Errorf("%s has fault rules: %+v", control, c.Proxy.Rules)
			}
			if d := differencesButTheFaults(f, c); len(d) > 0 {
				t.Errorf("%s and its control %s differ in more than proxy.rules:\n  %s", faulted, control, strings.Join(d, "\n  "))
			}
		})
	}
}

// differencesButTheFaults are the fields in which a and b differ, besides
// proxy.rules, name, expect and untilVerdict, by their paths in the
// scenario file.
func differencesButTheFaults(a, b *Scenario) []string {
	clear := func(s Scenario) Scenario {
		s.Name, s.Expect, s.UntilVerdict = "", nil, nil
		if s.Proxy != nil {
			p := *s.Proxy
			p.Rules = nil
			s.Proxy = &p
		}
		return s
	}
	x, y := clear(*a), clear(*b)
	return differences(reflect.ValueOf(x), reflect.ValueOf(y), "")
}

// differences walks two values of one type and names every field that
// differs by its path in the file (churn.concurrency,
// workload.statefulSets[0].replicas), with both values.
func differences(a, b reflect.Value, path string) []string {
	leaf := func() []string {
		if reflect.DeepEqual(a.Interface(), b.Interface()) {
			return nil
		}
		return []string{fmt.Sprintf("%s: %s vs %s", path, show(a), show(b))}
	}
	if a.Type().Implements(reflect.TypeFor[json.Marshaler]()) {
		return leaf() // a value with its own syntax (durations)
	}
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() == b.IsNil() {
				return nil
			}
			return []string{fmt.Sprintf("%s: %s vs %s", path, show(a), show(b))}
		}
		return differences(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		var out []string
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				name = f.Name
			}
			out = append(out, differences(a.Field(i), b.Field(i), join(path, name))...)
		}
		return out
	case reflect.Slice:
		if a.Len() != b.Len() {
			return []string{fmt.Sprintf("%s: %d vs %d items (%s vs %s)", path, a.Len(), b.Len(), show(a), show(b))}
		}
		var out []string
		for i := range a.Len() {
			out = append(out, differences(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	case reflect.Map:
		keys := map[string]reflect.Value{}
		for _, m := range []reflect.Value{a, b} {
			for _, k := range m.MapKeys() {
				keys[fmt.Sprint(k.Interface())] = k
			}
		}
		var out []string
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for n := range keys {
				if !yield(n) {
					return
				}
			}
		}) {
			k := keys[name]
			va, vb := a.MapIndex(k), b.MapIndex(k)
			if !va.IsValid() || !vb.IsValid() {
				out = append(out, fmt.Sprintf("%s: in one file only", join(path, name)))
				continue
			}
			out = append(out, differences(va, vb, join(path, name))...)
		}
		return out
	}
	return leaf()
}

// show is a value as the scenario file would write it.
func show(v reflect.Value) string {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return "absent"
	}
	js, err := json.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprint(v.Interface())
	}
	return string(js)
}

// The comparison names each differing field by its path, and ignores only
// the fault rules, the name and the expect band.
func TestDifferencesButTheFaults(t *testing.T) {
	base := valid + "proxy:\n  rules:\n  - {resource: nodes, delay: {fixed: 3s}}\nexpect:\n  '*': {stranded: {min: 1}}\n"
	tests := []struct {
		name    string
		control string
		want    []string
	}{
		{"only the rules, the name and the band differ", strings.Replace(valid, "name: t", "name: t-control", 1) +
			"proxy: {}\nexpect:\n  '*': {stranded: {max: 0}}\n", nil},
		{"no proxy at all", valid, []string{"proxy: {} vs absent"}},
		{"another seed", strings.Replace(valid, "seed: 7", "seed: 8", 1) + "proxy: {}\n", []string{"seed: 7 vs 8"}},
		{"cycles and concurrency", strings.Replace(valid, "churn: {cycles: 20}", "churn: {cycles: 60, concurrency: 2}", 1) + "proxy: {}\n",
			[]string{"churn.cycles: 20 vs 60", "churn.concurrency: 0 vs 2"}},
		{"a StatefulSet's replicas", strings.Replace(valid, "replicas: 3", "replicas: 6", 1) + "proxy: {}\n",
			[]string{"workload.statefulSets[0].replicas: 3 vs 6"}},
		{"a duration", valid + "proxy: {}\n" + "scheduling: {pinning: sticky, extenderLatency: {fixed: 1s}}\n",
			[]string{`scheduling.pinning: "" vs "sticky"`, `scheduling.extenderLatency.fixed: "0s" vs "1s"`}},
		{"request latency is not a fault rule", valid + "proxy: {requestLatency: {fixed: 10ms}}\n",
			[]string{`proxy.requestLatency.fixed: "0s" vs "10ms"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Parse([]byte(base))
			if err != nil {
				t.Fatal(err)
			}
			b, err := Parse([]byte(tc.control))
			if err != nil {
				t.Fatal(err)
			}
			if got := differencesButTheFaults(a, b); !slices.Equal(got, tc.want) {
				t.Errorf("differences %q, want %q", got, tc.want)
			}
		})
	}
}
