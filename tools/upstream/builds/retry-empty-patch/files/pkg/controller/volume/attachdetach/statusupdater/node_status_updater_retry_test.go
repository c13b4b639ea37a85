// strandlab retry-empty-patch: tests of the retry-empty-patch build's node
// status updater (package statusupdater, run by `strandlab kcm test
// retry-empty-patch` together with upstream's node_status_updater_test.go
// against the patched file).

package statusupdater

import (
	"context"
	"fmt"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller"
	adcache "k8s.io/kubernetes/pkg/controller/volume/attachdetach/cache"
	controllervolumetesting "k8s.io/kubernetes/pkg/controller/volume/attachdetach/testing"
	volumetesting "k8s.io/kubernetes/pkg/volume/testing"
)

const retryNode = "testnode-1"

func retryNodeObject(volumes []string) *corev1.Node {
	node := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: retryNode},
	}
	for _, v := range volumes {
		node.Status.VolumesAttached = append(node.Status.VolumesAttached, corev1.AttachedVolume{Name: corev1.UniqueVolumeName(v), DevicePath: "fake/device/path"})
	}
	return node
}

// retryEnv builds an updater whose informer cache holds retryNode with
// cached volumes and whose (fake) API server holds it with server volumes;
// desired are attached in the actual state of the world, so the node is
// marked for update.
func retryEnv(t *testing.T, logger klog.Logger, server, cached, desired []string) (adcache.ActualStateOfWorld, *fake.Clientset, cache.Store, NodeStatusUpdater) {
	t.Helper()
	fakeKubeClient := fake.NewSimpleClientset(retryNodeObject(server))
	informerFactory := informers.NewSharedInformerFactory(fakeKubeClient, controller.NoResyncPeriodFunc())
	nodeInformer := informerFactory.Core().V1().Nodes()
	store := nodeInformer.Informer().GetStore()
	if err := store.Add(retryNodeObject(cached)); err != nil {
		t.Fatalf(".Informer().GetStore().Add failed. Expected: <no error> Actual: <%v>", err)
	}
	volumePluginMgr, _ := volumetesting.GetTestVolumePluginMgr(t)
	asw := adcache.NewActualStateOfWorld(volumePluginMgr)
	for _, v := range desired {
		name := corev1.UniqueVolumeName(v)
		if _, err := asw.AddVolumeNode(logger, name, controllervolumetesting.GetTestVolumeSpec(v, name), retryNode, "fake/device/path", true); err != nil {
			t.Fatalf("AddVolumeNode failed. Expected: <no error> Actual: <%v>", err)
		}
	}
	return asw, fakeKubeClient, store, NewNodeStatusUpdater(fakeKubeClient, nodeInformer.Lister(), asw)
}

func retryServerVolumes(t *testing.T, c *fake.Clientset) []string {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), retryNode, metav1.GetOptions{})
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

func retryPatches(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		if p, ok := a.(core.PatchAction); ok {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}

// TestRetryEmptyPatch runs two loops of UpdateNodeStatusForNode; between
// them the informer cache may catch up with the server.
func TestRetryEmptyPatch(t *testing.T) {
	tests := []struct {
		name          string
		server        []string
		cached        []string
		desired       []string
		failPatch     bool
		wantEmpty     bool // the first patch is {}
		wantRemarked  bool // marked for update after the first loop
		wantServer    []string
		catchUp       bool     // the cache gets the server's node before the second loop
		wantServerEnd []string // after the second loop
	}{
		{
			// The bug: stock sends {} and never retries; the node stays
			// without vol-1.
			name:          "stale cache still lists a volume the server no longer has",
			server:        nil,
			cached:        []string{"vol-1"},
			desired:       []string{"vol-1"},
			wantEmpty:     true,
			wantRemarked:  true,
			wantServer:    nil,
			catchUp:       true,
			wantServerEnd: []string{"vol-1"},
		},
		{
			name:          "stale cache, not caught up yet: {} again, still marked",
			server:        nil,
			cached:        []string{"vol-1"},
			desired:       []string{"vol-1"},
			wantEmpty:     true,
			wantRemarked:  true,
			wantServer:    nil,
			catchUp:       false,
			wantServerEnd: nil,
		},
		{
			name:          "fresh cache: the patch is not empty, not re-marked",
			server:        nil,
			cached:        nil,
			desired:       []string{"vol-1"},
			wantServer:    []string{"vol-1"},
			wantServerEnd: []string{"vol-1"},
		},
		{
			name:          "patch fails: re-marked (upstream's behaviour)",
			server:        nil,
			cached:        nil,
			desired:       []string{"vol-1"},
			failPatch:     true,
			wantRemarked:  true,
			wantServer:    nil,
			wantServerEnd: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger := klog.FromContext(context.Background())
			_, fakeKubeClient, store, nsu := retryEnv(t, logger, tc.server, tc.cached, tc.desired)
			if tc.failPatch {
				fakeKubeClient.PrependReactor("patch", "nodes", func(action core.Action) (bool, runtime.Object, error) {
					return true, nil, fmt.Errorf("test generated error")
				})
			}
			fakeKubeClient.ClearActions()

			err := nsu.UpdateNodeStatusForNode(logger, retryNode)
			if (err != nil) != tc.failPatch {
				t.Fatalf("UpdateNodeStatusForNode: error %v, want error: %v", err, tc.failPatch)
			}
			patches := retryPatches(fakeKubeClient)
			if len(patches) != 1 {
				t.Fatalf("patches: got %q, want exactly one", patches)
			}
			if empty := patches[0] == "{}"; empty != tc.wantEmpty {
				t.Errorf("patch %q: empty %v, want %v", patches[0], empty, tc.wantEmpty)
			}
			if got := retryServerVolumes(t, fakeKubeClient); !equalVolumes(got, tc.wantServer) {
				t.Errorf("server volumesAttached after the first loop: got %q, want %q", got, tc.wantServer)
			}
			// The next loop: a node marked again sends a patch again.
			if tc.catchUp {
				if err := store.Update(retryNodeObject(tc.server)); err != nil {
					t.Fatalf("store.Update: %v", err)
				}
			}
			fakeKubeClient.ClearActions()
			_ = nsu.UpdateNodeStatusForNode(logger, retryNode)
			if remarked := len(retryPatches(fakeKubeClient)) == 1; remarked != tc.wantRemarked {
				t.Errorf("retried on the next loop (marked again): got %v, want %v", remarked, tc.wantRemarked)
			}
			if got := retryServerVolumes(t, fakeKubeClient); !equalVolumes(got, tc.wantServerEnd) {
				t.Errorf("server volumesAttached after the second loop: got %q, want %q", got, tc.wantServerEnd)
			}
		})
	}
}

func equalVolumes(a, b []string) bool {
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
