// strandlab fix: tests of the fix build's node status updater (package
// statusupdater, run by `strandlab kcm test fix` together with upstream's
// node_status_updater_test.go against the patched file).

package statusupdater

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller"
	"k8s.io/kubernetes/pkg/controller/volume/attachdetach/cache"
	controllervolumetesting "k8s.io/kubernetes/pkg/controller/volume/attachdetach/testing"
	volumetesting "k8s.io/kubernetes/pkg/volume/testing"
)

const fixDevicePath = "fake/device/path"

// fixNode is a node as the server or the informer cache holds it.
type fixNode struct {
	name    string
	volumes []string // status.volumesAttached
}

func (n fixNode) object() *corev1.Node {
	node := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: n.name},
	}
	for _, v := range n.volumes {
		node.Status.VolumesAttached = append(node.Status.VolumesAttached, corev1.AttachedVolume{Name: corev1.UniqueVolumeName(v), DevicePath: fixDevicePath})
	}
	return node
}

// fixEnv builds an updater whose informer cache holds cached and whose
// (fake) API server holds server, with desired[node] attached in the actual
// state of the world and reported as attached. A node in desired with no
// volumes is marked for update with an empty list (its volume is removed
// from the report, as the reconciler does before a detach).
func fixEnv(t *testing.T, logger klog.Logger, server, cached []fixNode, desired map[string][]string) (cache.ActualStateOfWorld, *fake.Clientset, NodeStatusUpdater) {
	t.Helper()
	var objects []runtime.Object
	for _, n := range server {
		objects = append(objects, n.object())
	}
	fakeKubeClient := fake.NewSimpleClientset(objects...)
	informerFactory := informers.NewSharedInformerFactory(fakeKubeClient, controller.NoResyncPeriodFunc())
	nodeInformer := informerFactory.Core().V1().Nodes()
	for _, n := range cached {
		if err := nodeInformer.Informer().GetStore().Add(n.object()); err != nil {
			t.Fatalf(".Informer().GetStore().Add failed. Expected: <no error> Actual: <%v>", err)
		}
	}
	volumePluginMgr, _ := volumetesting.GetTestVolumePluginMgr(t)
	asw := cache.NewActualStateOfWorld(volumePluginMgr)
	for node, volumes := range desired {
		nodeName := types.NodeName(node)
		if len(volumes) == 0 {
			// Attach a volume, then stop reporting it: the node is marked
			// for update with nothing to report.
			name := corev1.UniqueVolumeName("volume-detaching")
			if _, err := asw.AddVolumeNode(logger, name, controllervolumetesting.GetTestVolumeSpec(string(name), name), nodeName, fixDevicePath, true); err != nil {
				t.Fatalf("AddVolumeNode failed. Expected: <no error> Actual: <%v>", err)
			}
			if err := asw.RemoveVolumeFromReportAsAttached(name, nodeName); err != nil {
				t.Fatalf("RemoveVolumeFromReportAsAttached failed. Expected: <no error> Actual: <%v>", err)
			}
			continue
		}
		for _, v := range volumes {
			name := corev1.UniqueVolumeName(v)
			if _, err := asw.AddVolumeNode(logger, name, controllervolumetesting.GetTestVolumeSpec(v, name), nodeName, fixDevicePath, true); err != nil {
				t.Fatalf("AddVolumeNode failed. Expected: <no error> Actual: <%v>", err)
			}
		}
	}
	return asw, fakeKubeClient, NewNodeStatusUpdater(fakeKubeClient, nodeInformer.Lister(), asw)
}

// serverVolumes returns the sorted names in the server's volumesAttached.
func serverVolumes(t *testing.T, c *fake.Clientset, node string) []string {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Nodes().Get failed. Expected: <no error> Actual: <%v>", err)
	}
	var names []string
	for _, v := range n.Status.VolumesAttached {
		names = append(names, string(v.Name))
	}
	sort.Strings(names)
	return names
}

// requests returns the requests sent to the fake server, as "verb
// resource[/subresource]", with the patches sent.
func requests(c *fake.Clientset) (verbs []string, patches []string) {
	for _, a := range c.Actions() {
		r := a.GetResource().Resource
		if a.GetSubresource() != "" {
			r += "/" + a.GetSubresource()
		}
		verbs = append(verbs, a.GetVerb()+" "+r)
		if p, ok := a.(core.PatchAction); ok {
			patches = append(patches, string(p.GetPatch()))
		}
	}
	return verbs, patches
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFixUpdateNodeStatusForNode(t *testing.T) {
	const node = "testnode-1"
	notFound := apierrors.NewNotFound(corev1.Resource("nodes"), node)
	// respond makes the server answer a PATCH with this node (and not
	// apply it), or fail it with err.
	respond := func(volumes []string, err error) core.ReactionFunc {
		return func(action core.Action) (bool, runtime.Object, error) {
			if err != nil {
				return true, nil, err
			}
			return true, fixNode{node, volumes}.object(), nil
		}
	}
	tests := []struct {
		name         string
		server       []fixNode
		cached       []fixNode
		desired      []string
		reactor      core.ReactionFunc
		wantErr      bool
		wantRemarked bool
		wantServer   []string
		wantRequests []string
		wantPatch    string // "" when not checked
	}{
		{
			// The bug: stock diffs desired [vol-1] against the cache, which
			// still shows vol-1, and sends {}.
			name:         "stale cache still lists a volume the server no longer has",
			server:       []fixNode{{node, nil}},
			cached:       []fixNode{{node, []string{"vol-1"}}},
			desired:      []string{"vol-1"},
			wantServer:   []string{"vol-1"},
			wantRequests: []string{"patch nodes/status"},
			wantPatch:    `{"status":{"volumesAttached":[{"name":"vol-1","devicePath":"fake/device/path"}]}}`,
		},
		{
			// The mirror: the cache lags behind the add of vol-2; stock would
			// send {} and leave vol-2 listed while it is being detached.
			name:         "stale cache misses a volume the server still lists",
			server:       []fixNode{{node, []string{"vol-1", "vol-2"}}},
			cached:       []fixNode{{node, []string{"vol-1"}}},
			desired:      []string{"vol-1"},
			wantServer:   []string{"vol-1"},
			wantRequests: []string{"patch nodes/status"},
		},
		{
			name:         "nothing left to report sends null",
			server:       []fixNode{{node, []string{"volume-detaching"}}},
			cached:       []fixNode{{node, []string{"volume-detaching"}}},
			desired:      []string{},
			wantServer:   nil,
			wantRequests: []string{"patch nodes/status"},
			wantPatch:    `{"status":{"volumesAttached":null}}`,
		},
		{
			name:         "cache and server agree: the full list is sent all the same",
			server:       []fixNode{{node, []string{"vol-1"}}},
			cached:       []fixNode{{node, []string{"vol-1"}}},
			desired:      []string{"vol-1", "vol-2"},
			wantServer:   []string{"vol-1", "vol-2"},
			wantRequests: []string{"patch nodes/status"},
		},
		{
			name:         "patch fails: re-marked",
			server:       []fixNode{{node, nil}},
			cached:       []fixNode{{node, nil}},
			desired:      []string{"vol-1"},
			reactor:      respond(nil, fmt.Errorf("test generated error")),
			wantErr:      true,
			wantRemarked: true,
			wantServer:   nil,
			wantRequests: []string{"patch nodes/status"},
		},
		{
			name:         "node gone from the server: not re-marked (what upstream's NotFound branch intends)",
			server:       []fixNode{{node, nil}},
			cached:       []fixNode{{node, nil}},
			desired:      []string{"vol-1"},
			reactor:      respond(nil, notFound),
			wantServer:   nil,
			wantRequests: []string{"patch nodes/status"},
		},
		{
			name:         "node not in the informer cache: no request, not re-marked (upstream's behaviour)",
			server:       []fixNode{{node, nil}},
			desired:      []string{"vol-1"},
			wantServer:   nil,
			wantRequests: nil,
		},
		{
			// The server's answer is the truth: a volume still listed is not
			// confirmed as removed, so the reconciler must not detach it.
			name:         "response still lists a volume that is not desired: error and re-marked",
			server:       []fixNode{{node, []string{"vol-1", "vol-2"}}},
			cached:       []fixNode{{node, []string{"vol-1", "vol-2"}}},
			desired:      []string{"vol-1"},
			reactor:      respond([]string{"vol-1", "vol-2"}, nil),
			wantErr:      true,
			wantRemarked: true,
			wantServer:   []string{"vol-1", "vol-2"},
			wantRequests: []string{"patch nodes/status"},
		},
		{
			name:         "response lacks a desired volume: re-marked",
			server:       []fixNode{{node, nil}},
			cached:       []fixNode{{node, nil}},
			desired:      []string{"vol-1"},
			reactor:      respond(nil, nil),
			wantRemarked: true,
			wantServer:   nil,
			wantRequests: []string{"patch nodes/status"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger := klog.FromContext(context.Background())
			asw, fakeKubeClient, nsu := fixEnv(t, logger, tc.server, tc.cached, map[string][]string{node: tc.desired})
			if tc.reactor != nil {
				fakeKubeClient.PrependReactor("patch", "nodes", tc.reactor)
			}
			fakeKubeClient.ClearActions()

			err := nsu.UpdateNodeStatusForNode(logger, node)
			if (err != nil) != tc.wantErr {
				t.Fatalf("UpdateNodeStatusForNode: error %v, want error: %v", err, tc.wantErr)
			}
			verbs, patches := requests(fakeKubeClient)
			if !equalStrings(verbs, tc.wantRequests) {
				t.Errorf("requests: got %q, want %q", verbs, tc.wantRequests)
			}
			if tc.wantPatch != "" && (len(patches) != 1 || patches[0] != tc.wantPatch) {
				t.Errorf("patch: got %q, want %q", patches, tc.wantPatch)
			}
			for _, p := range patches {
				var m map[string]interface{}
				if err := json.Unmarshal([]byte(p), &m); err != nil || len(m) == 0 {
					t.Errorf("patch %q is empty or not JSON", p)
				}
			}
			if got := serverVolumes(t, fakeKubeClient, node); !equalStrings(got, tc.wantServer) {
				t.Errorf("server volumesAttached: got %q, want %q", got, tc.wantServer)
			}
			remarked, _ := asw.GetVolumesToReportAttachedForNode(logger, node)
			if remarked != tc.wantRemarked {
				t.Errorf("node marked for update afterwards: got %v, want %v", remarked, tc.wantRemarked)
			}
		})
	}
}

// TestFixOnePatchPerMarkedNode checks that the fix sends exactly one PATCH
// per marked node per loop and no other request (no GET), as stock does.
func TestFixOnePatchPerMarkedNode(t *testing.T) {
	server := []fixNode{{"testnode-1", nil}, {"testnode-2", nil}, {"testnode-3", nil}}
	tests := []struct {
		name    string
		desired map[string][]string
		remark  []string // marked again before the second loop
		want    [2]int   // patches in the first and the second loop
	}{
		{"one node, one volume", map[string][]string{"testnode-1": {"vol-1"}}, nil, [2]int{1, 0}},
		{"two nodes, three volumes", map[string][]string{"testnode-1": {"vol-1", "vol-2"}, "testnode-2": {"vol-3"}}, nil, [2]int{2, 0}},
		{"a node marked again", map[string][]string{"testnode-1": {"vol-1"}, "testnode-2": {"vol-3"}}, []string{"testnode-2"}, [2]int{2, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger := klog.FromContext(context.Background())
			asw, fakeKubeClient, nsu := fixEnv(t, logger, server, server, tc.desired)
			for loop := 0; loop < 2; loop++ {
				fakeKubeClient.ClearActions()
				if err := nsu.UpdateNodeStatuses(logger); err != nil {
					t.Fatalf("loop %d: UpdateNodeStatuses failed. Expected: <no error> Actual: <%v>", loop, err)
				}
				verbs, _ := requests(fakeKubeClient)
				if len(verbs) != tc.want[loop] {
					t.Errorf("loop %d: %d requests %q, want %d", loop, len(verbs), verbs, tc.want[loop])
				}
				for _, v := range verbs {
					if v != "patch nodes/status" {
						t.Errorf("loop %d: unexpected request %q", loop, v)
					}
				}
				for _, n := range tc.remark {
					asw.SetNodeStatusUpdateNeeded(logger, types.NodeName(n))
				}
			}
			for node, volumes := range tc.desired {
				want := append([]string(nil), volumes...)
				sort.Strings(want)
				if got := serverVolumes(t, fakeKubeClient, node); !equalStrings(got, want) {
					t.Errorf("%s: server volumesAttached %q, want %q", node, got, want)
				}
			}
		})
	}
}
