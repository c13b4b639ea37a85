package kind

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/fault"
)

// The configuration file kind's create reads must decode, strictly (kind
// decodes its config with yaml.UnmarshalStrict), to the configuration
// RenderConfig built.
func TestWriteStateConfigRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec cluster.Spec
	}{
		{"plain", cluster.Spec{Name: "soak", Nodes: 2, OutputDir: t.TempDir()}},
		{"proxy", cluster.Spec{Name: "throttled", Nodes: 1, OutputDir: t.TempDir(), Proxy: &fault.Profile{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := &Cluster{name: "sl-test-1", dir: dir}
			cfgPath := filepath.Join(dir, "kind-config.yaml")
			if err := c.writeState(tc.spec, cfgPath); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			var got v1alpha4.Cluster
			if err := yaml.UnmarshalStrict(raw, &got); err != nil {
				t.Fatalf("kind would refuse its configuration: %v\n%s", err, raw)
			}
			if got.Kind != "Cluster" || got.APIVersion != "kind.x-k8s.io/v1alpha4" || got.Name != "sl-test-1" {
				t.Errorf("kind, apiVersion, name = %q, %q, %q", got.Kind, got.APIVersion, got.Name)
			}
			workers := 0
			for _, n := range got.Nodes {
				if n.Role == v1alpha4.WorkerRole {
					workers++
				}
			}
			if workers != tc.spec.Nodes {
				t.Errorf("%d workers in the configuration, want %d", workers, tc.spec.Nodes)
			}
			if (tc.spec.Proxy != nil) != (c.proxyAdmin != "") {
				t.Errorf("proxy admin %q with proxy %v", c.proxyAdmin, tc.spec.Proxy != nil)
			}
		})
	}
}

// What kind is told through its environment is the child's: the docker
// front goes first in PATH only on hosts that need it.
func TestEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name, front string
		wantPath    string
	}{
		{"privileged works", "", ""},
		{"unprivileged front", "/front", "PATH=/front" + string(os.PathListSeparator) + "/usr/bin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := environment("/usr/bin", tc.front, "/usr/bin/docker")
			if !slices.Contains(env, "KIND_EXPERIMENTAL_DOCKER_NETWORK="+networkName) {
				t.Errorf("no network in %v", env)
			}
			var path string
			for _, kv := range env {
				if strings.HasPrefix(kv, "PATH=") {
					path = kv
				}
			}
			if path != tc.wantPath {
				t.Errorf("PATH entry %q, want %q", path, tc.wantPath)
			}
			if tc.front != "" && !slices.Contains(env, "STRANDLAB_REAL_DOCKER=/usr/bin/docker") {
				t.Errorf("the front is not told the real docker: %v", env)
			}
		})
	}
}

// kind's output reaches the progress writer a line at a time, written in
// any pieces, without the kubectl hints its CLI prints after a create.
func TestProgressLines(t *testing.T) {
	var out strings.Builder
	l := &progressLines{w: &out}
	for _, piece := range []string{"Creating cluster \"sl-x\" ...\n ✓ Ensuring node im", "age 🖼\nSet kubectl context to \"kind-sl-x\"\n",
		"You can now use your cluster with:\n\nkubectl cluster-info --context kind-sl-x\n", "Deleted nodes: [\"sl-x-worker\"]"} {
		if _, err := l.Write([]byte(piece)); err != nil {
			t.Fatal(err)
		}
	}
	l.flush()
	want := ">> kind: Creating cluster \"sl-x\" ...\n>> kind: ✓ Ensuring node image 🖼\n>> kind: Deleted nodes: [\"sl-x-worker\"]\n"
	if out.String() != want {
		t.Errorf("progress:\n%s\nwant:\n%s", out.String(), want)
	}
}
