package proxy

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/strandlab/strandlab/internal/fault"
)

// TestResourcesAreBuiltIn holds fault.Resources (the names a fault rule may
// give; fault cannot import client-go) to client-go's scheme: every name is
// a built-in resource, and every kind of the groups the attach/detach path
// watches (core's volume objects, apps, storage) is in the list.
func TestResourcesAreBuiltIn(t *testing.T) {
	builtIn := map[string]bool{"customresourcedefinitions": true} // apiextensions: not in client-go's scheme
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") || gvk.Kind == "WatchEvent" {
			continue
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		builtIn[plural.Resource] = true
		if (gvk.Group == "storage.k8s.io" || gvk.Group == "apps") && gvk.Version == "v1" && !slices.Contains(fault.Resources, plural.Resource) {
			t.Errorf("%s (%s) is missing from fault.Resources", plural.Resource, gvk)
		}
	}
	for _, r := range []string{"nodes", "pods", "persistentvolumes", "persistentvolumeclaims"} {
		if !slices.Contains(fault.Resources, r) {
			t.Errorf("%s is missing from fault.Resources", r)
		}
	}
	for _, r := range fault.Resources {
		if !builtIn[r] {
			t.Errorf("fault.Resources names %q, which is no kind of client-go's scheme", r)
		}
	}
}
