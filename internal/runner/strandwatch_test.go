package runner

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/strandlab/strandlab/internal/detector"
	"github.com/strandlab/strandlab/internal/report"
)

func TestStrandedPodMatchesTheCurrentUID(t *testing.T) {
	tests := []struct {
		name    string
		current types.UID // "" = no pod of that name
		want    bool
	}{
		{"the stranded pod itself", "uid-1", true},
		{"replaced since", "uid-2", false},
		{"gone", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			if tc.current != "" {
				idx.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", UID: tc.current}})
			}
			w := &strandWatch{stranded: map[string]detector.Finding{}, pods: corelisters.NewPodLister(idx)}
			w.record(context.Background(), []detector.Finding{{Kind: detector.Stranded, Pod: "ns/web-0", PodUID: "uid-1", Node: "node-1"}})
			if _, got := w.StrandedPod("ns/web-0"); got != tc.want {
				t.Errorf("StrandedPod found = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPhantomsApartFromSafety(t *testing.T) {
	w := &strandWatch{stranded: map[string]detector.Finding{}, safety: map[string]report.SafetyFinding{}, phantoms: map[string]report.SafetyFinding{}, changes: newTransitions(time.Minute)}
	t0 := time.Now()
	batch := []detector.Finding{
		{Kind: detector.PhantomListing, Node: "node-1", Volume: "v", Since: t0},
		{Kind: detector.ListedNotAttached, Pod: "ns/web-0", PodUID: "u", Node: "node-2", Volume: "v", Since: t0},
	}
	w.record(context.Background(), batch)
	w.record(context.Background(), batch)                                                                                                        // same episodes
	w.record(context.Background(), []detector.Finding{{Kind: detector.PhantomListing, Node: "node-1", Volume: "v", Since: t0.Add(time.Second)}}) // a new episode
	if p, s := w.PhantomListings(), w.SafetyViolations(); len(p) != 2 || len(s) != 1 || s[0].Kind != detector.ListedNotAttached {
		t.Errorf("phantoms %+v, safety %+v", p, s)
	}
}
