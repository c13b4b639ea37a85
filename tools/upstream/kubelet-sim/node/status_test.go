package node

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// statusVolumes is a volume manager with a fixed list of volumes in use,
// reconciled or not, that records what the node marks as reported.
type statusVolumes struct {
	NoVolumes
	synced bool
	inUse  []corev1.UniqueVolumeName

	mu     sync.Mutex
	marked [][]corev1.UniqueVolumeName
}

func (v *statusVolumes) VolumesInUse() []corev1.UniqueVolumeName { return v.inUse }
func (v *statusVolumes) ReconcilerStatesHasBeenSynced() bool     { return v.synced }
func (v *statusVolumes) MarkVolumesAsReportedInUse(r []corev1.UniqueVolumeName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.marked = append(v.marked, r)
}

// TestNodeStatusUpdate checks one status update against the kubelet's
// (kubelet.tryUpdateNodeStatus, v1.37.2): where the node is read from, when
// a patch is sent, the random delay drawn after a change, volumesInUse set
// only once the reconciler has synced, and what is marked as reported.
func TestNodeStatusUpdate(t *testing.T) {
	const report = 5 * time.Minute
	vol := corev1.UniqueVolumeName("kubernetes.io/csi/d^h")
	tests := []struct {
		name       string
		try        int
		inUse      []corev1.UniqueVolumeName // stored volumesInUse
		synced     bool
		lastReport time.Duration // ago; 0: never reported
		delay      time.Duration // delayAfterChange before the update

		wantGet    bool // a live GET was made
		wantPatch  bool
		wantInUse  []corev1.UniqueVolumeName // stored after the update
		wantDelay  string                    // "zero", "random" or "kept"
		wantMarked []corev1.UniqueVolumeName
	}{
		{name: "first try reads the lister and reports a new volume", synced: true, lastReport: time.Minute, delay: report,
			wantPatch: true, wantInUse: []corev1.UniqueVolumeName{vol}, wantDelay: "random", wantMarked: []corev1.UniqueVolumeName{vol}},
		{name: "a retry reads the API server", try: 1, synced: true, lastReport: time.Minute, delay: report,
			wantGet: true, wantPatch: true, wantInUse: []corev1.UniqueVolumeName{vol}, wantDelay: "random", wantMarked: []corev1.UniqueVolumeName{vol}},
		{name: "unchanged within the report period: no patch, the listed volumes are marked", synced: true, inUse: []corev1.UniqueVolumeName{vol},
			lastReport: time.Minute, delay: time.Minute, wantInUse: []corev1.UniqueVolumeName{vol}, wantDelay: "kept", wantMarked: []corev1.UniqueVolumeName{vol}},
		{name: "unchanged past the report period plus the delay: patch, delay reset", synced: true, inUse: []corev1.UniqueVolumeName{vol},
			lastReport: report + time.Minute + time.Second, delay: time.Minute,
			wantPatch: true, wantInUse: []corev1.UniqueVolumeName{vol}, wantDelay: "zero", wantMarked: []corev1.UniqueVolumeName{vol}},
		{name: "unchanged, past the report period but not past the delay: no patch", synced: true, inUse: []corev1.UniqueVolumeName{vol},
			lastReport: report + time.Second, delay: time.Minute, wantInUse: []corev1.UniqueVolumeName{vol}, wantDelay: "kept", wantMarked: []corev1.UniqueVolumeName{vol}},
		{name: "reconciler not synced: volumesInUse left as stored", synced: false, lastReport: time.Minute,
			wantInUse: nil, wantDelay: "kept", wantMarked: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vols := &statusVolumes{synced: tc.synced, inUse: []corev1.UniqueVolumeName{vol}}
			client := fake.NewClientset()
			n, err := NewNode(Config{NodeName: "node-1", Client: client, KubeletVersion: "v1.37.2", Volumes: vols, NodeStatusReportFrequency: report})
			if err != nil {
				t.Fatal(err)
			}
			// The stored node carries what this node's status would set, so
			// that only volumesInUse can change.
			stored := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
			if err := n.setNodeStatus(context.Background(), stored); err != nil {
				t.Fatal(err)
			}
			stored.Status.VolumesInUse = tc.inUse
			if _, err := client.CoreV1().Nodes().Create(context.Background(), stored, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			if err := indexer.Add(stored); err != nil {
				t.Fatal(err)
			}
			n.nodes = corelisters.NewNodeLister(indexer)
			if tc.lastReport > 0 {
				n.lastReport = time.Now().Add(-tc.lastReport)
			}
			n.delayAfterChange = tc.delay
			client.ClearActions()

			if err := n.tryUpdateNodeStatus(context.Background(), tc.try, false); err != nil {
				t.Fatal(err)
			}
			var gets, patches int
			for _, a := range client.Actions() {
				if a.GetResource().Resource != "nodes" {
					continue
				}
				switch a.GetVerb() {
				case "get":
					gets++
				case "patch":
					patches++
				}
			}
			if got := gets > 0; got != tc.wantGet {
				t.Errorf("live GETs = %d, want any: %v", gets, tc.wantGet)
			}
			if got := patches > 0; got != tc.wantPatch {
				t.Errorf("patches = %d, want any: %v", patches, tc.wantPatch)
			}
			after, err := client.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(after.Status.VolumesInUse, tc.wantInUse) {
				t.Errorf("stored volumesInUse = %v, want %v", after.Status.VolumesInUse, tc.wantInUse)
			}
			switch d := n.delayAfterChange; tc.wantDelay {
			case "zero":
				if d != 0 {
					t.Errorf("delay after the report = %v, want 0", d)
				}
			case "kept":
				if d != tc.delay {
					t.Errorf("delay = %v, want it kept at %v", d, tc.delay)
				}
			case "random":
				// A uniform draw is never exactly 0 in practice.
				if d == 0 || d < -report/2 || d >= report/2 {
					t.Errorf("delay after a change = %v, want a draw within [-%v, %v)", d, report/2, report/2)
				}
			}
			vols.mu.Lock()
			defer vols.mu.Unlock()
			var lastMarked []corev1.UniqueVolumeName
			if len(vols.marked) > 0 {
				lastMarked = vols.marked[len(vols.marked)-1]
			}
			if tc.wantMarked != nil && !slices.Equal(lastMarked, tc.wantMarked) {
				t.Errorf("marked as reported %v, want %v", vols.marked, tc.wantMarked)
			}
		})
	}
}
