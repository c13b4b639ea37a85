package proxy

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strandlab/strandlab/internal/fault"
)

// nodeFrame is a JSON watch frame of a Node with the given attached volumes.
func nodeFrame(t *testing.T, typ, node string, attached ...string) []byte {
	t.Helper()
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	for _, v := range attached {
		n.Status.VolumesAttached = append(n.Status.VolumesAttached, corev1.AttachedVolume{Name: corev1.UniqueVolumeName(v)})
	}
	obj, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	frame, err := json.Marshal(map[string]any{"type": typ, "object": json.RawMessage(obj)})
	if err != nil {
		t.Fatal(err)
	}
	return frame
}

// TestDelayRules drives one watch stream's rule matching event by event:
// which frames a profile delays, by how much, and what it journals.
func TestDelayRules(t *testing.T) {
	const hold = 3 * time.Second
	delay := fault.Delay{Fixed: fault.D(hold)}
	type step struct {
		typ, node string
		attached  []string
		want      time.Duration
	}
	tests := []struct {
		name     string
		resource string
		rules    []fault.Rule
		steps    []step
	}{
		{name: "removed: only the event that drops a volume", resource: "nodes",
			rules: []fault.Rule{{Resource: "nodes", Predicate: fault.PredicateVolumesAttachedRemoved, Delay: delay}},
			steps: []step{
				{"ADDED", "n1", []string{"a"}, 0},         // first sight: nothing to compare with
				{"MODIFIED", "n1", []string{"a", "b"}, 0}, // added
				{"MODIFIED", "n1", []string{"b"}, hold},   // a removed
				{"MODIFIED", "n1", []string{"b"}, 0},      // unchanged (heartbeat)
				{"MODIFIED", "n2", nil, 0},                // another node, first sight
				{"MODIFIED", "n1", []string{"c"}, hold},   // b replaced by c: removed and added
			}},
		{name: "added: only the event that adds a volume", resource: "nodes",
			rules: []fault.Rule{{Resource: "nodes", Predicate: fault.PredicateVolumesAttachedAdded, Delay: delay}},
			steps: []step{
				{"ADDED", "n1", nil, 0},
				{"MODIFIED", "n1", []string{"a"}, hold},
				{"MODIFIED", "n1", []string{"a"}, 0},
				{"MODIFIED", "n1", nil, 0}, // removed only
				{"MODIFIED", "n1", []string{"b"}, hold},
			}},
		{name: "a deleted node starts afresh", resource: "nodes",
			rules: []fault.Rule{{Resource: "nodes", Predicate: fault.PredicateVolumesAttachedRemoved, Delay: delay}},
			steps: []step{
				{"ADDED", "n1", []string{"a"}, 0},
				{"DELETED", "n1", []string{"a"}, 0},
				{"ADDED", "n1", nil, 0}, // not a removal: the node is new
			}},
		{name: "event types narrow a rule", resource: "nodes",
			rules: []fault.Rule{{Resource: "nodes", EventTypes: []string{"DELETED"}, Delay: delay}},
			steps: []step{
				{"ADDED", "n1", nil, 0},
				{"MODIFIED", "n1", nil, 0},
				{"DELETED", "n1", nil, hold},
			}},
		{name: "first matching rule wins", resource: "nodes",
			rules: []fault.Rule{
				{Resource: "nodes", Predicate: fault.PredicateVolumesAttachedAdded, Delay: fault.Delay{Fixed: fault.D(time.Second)}},
				{Resource: "nodes", Delay: delay}},
			steps: []step{
				{"ADDED", "n1", nil, hold},
				{"MODIFIED", "n1", []string{"a"}, time.Second},
				{"MODIFIED", "n1", []string{"a"}, hold},
			}},
		{name: "rules of another resource do not apply", resource: "pods",
			rules: []fault.Rule{{Resource: "nodes", Delay: delay}},
			steps: []step{{"ADDED", "", nil, 0}, {"MODIFIED", "", nil, 0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &Proxy{profile: fault.Profile{Rules: tc.rules}, sampler: fault.NewSampler(1, samplerStream), metrics: newMetrics()}
			st := &stream{p: p, resource: tc.resource, lastAttached: map[string][]string{}}
			for i, s := range tc.steps {
				frame := []byte(`{"type":"` + s.typ + `","object":{"metadata":{"name":"p"}}}`)
				if tc.resource == "nodes" {
					frame = nodeFrame(t, s.typ, s.node, s.attached...)
				}
				got, entry := st.delayFor(frame)
				if got != s.want {
					t.Fatalf("step %d (%s %s %v): delay %v, want %v", i, s.typ, s.node, s.attached, got, s.want)
				}
				if (entry != nil) != (s.want > 0) {
					t.Fatalf("step %d: journal entry %+v for delay %v", i, entry, got)
				}
				if entry != nil && (entry.Kind != fault.JournalEventDelayed || entry.Verb != s.typ || entry.Name != s.node) {
					t.Fatalf("step %d: journal entry %+v", i, entry)
				}
			}
		})
	}
}
