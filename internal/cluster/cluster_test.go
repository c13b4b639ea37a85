package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/clustertest"
)

func TestRegistryLookup(t *testing.T) {
	r := cluster.NewRegistry(clustertest.Provider{ProviderName: "local"}, clustertest.Provider{ProviderName: "kind", Missing: errors.New("docker: daemon not reachable")})
	tests := []struct {
		name, want string // want: substring of the error; "" = found
	}{
		{"local", ""},
		{"kind", `provider "kind" is not available here: docker: daemon not reachable`},
		{"existing", `provider "existing": unknown (known: local, kind)`},
	}
	for _, tc := range tests {
		p, err := r.Lookup(context.Background(), tc.name)
		switch {
		case tc.want == "" && (err != nil || p == nil || p.Name() != tc.name):
			t.Errorf("Lookup(%q) = %v, %v; want the provider", tc.name, p, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Lookup(%q) error = %v, want %q", tc.name, err, tc.want)
		}
	}
	if got := strings.Join(r.Names(), ","); got != "local,kind" {
		t.Errorf("Names() = %s", got)
	}
}
