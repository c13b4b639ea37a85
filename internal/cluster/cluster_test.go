package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type fakeProvider struct {
	name    string
	missing error
}

func (f fakeProvider) Name() string                    { return f.name }
func (f fakeProvider) Available(context.Context) error { return f.missing }
func (f fakeProvider) Start(context.Context, Spec) (Cluster, error) {
	return nil, errors.New("not here")
}

func TestRegistryLookup(t *testing.T) {
	r := NewRegistry(fakeProvider{name: "local"}, fakeProvider{name: "kind", missing: errors.New("docker: daemon not reachable")})
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
