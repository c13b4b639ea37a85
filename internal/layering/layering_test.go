package layering

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/strandlab/strandlab/"

// rules: a package (with everything it imports, transitively) must not
// depend on any path that starts with a forbidden prefix.
var rules = []struct {
	pkg       string
	why       string
	forbidden []string
}{
	{"internal/scenario", "scenario files are pure data: parse and validate without an API client, metrics or plots",
		[]string{"k8s.io/client-go", "github.com/prometheus/", "gonum.org/", module + "internal/proxy", module + "internal/extender"}},
	{"internal/timeline", "timelines are pure: merged from records, not fetched",
		[]string{"k8s.io/client-go", "github.com/prometheus/", "gonum.org/", module + "internal/proxy"}},
	{"internal/fault", "the fault vocabulary is a leaf every layer may import",
		[]string{"k8s.io/", "github.com/prometheus/", "gonum.org/", module}},
	{"internal/detector", "the detector is pure: snapshot in, findings out",
		[]string{"k8s.io/client-go", "github.com/prometheus/", "gonum.org/"}},
	{"internal/cluster", "the provider seam carries specs and results, not the components' code",
		[]string{module + "internal/proxy/", module + "internal/extender", module + "internal/cluster/", "github.com/prometheus/", "gonum.org/"}},
	{"internal/cluster/kind", "providers start the proxy as a program and read it through proxyadmin: they do not link the proxy server",
		[]string{module + "internal/proxy/"}},
	{"internal/cluster/local", "providers start the proxy as a program and read it through proxyadmin: they do not link the proxy server",
		[]string{module + "internal/proxy/"}},
	{"internal/cluster/existing", "providers start the proxy as a program and read it through proxyadmin: they do not link the proxy server",
		[]string{module + "internal/proxy/"}},
	{"internal/proxyadmin", "the proxy's admin client is a leaf: the standard library and fault, not the proxy server",
		[]string{"k8s.io/", "sigs.k8s.io/", "github.com/prometheus/", module + "internal/proxy/"}},
	{"internal/shards", "the shard matrix is pure: a count and a seed in, the matrix out",
		[]string{"k8s.io/", "sigs.k8s.io/", "github.com/", "gonum.org/", "google.golang.org/", module}},
	{"internal/csinames", "volume and attachment names are computed, not looked up; the kubelet's code stays in its own module",
		[]string{"k8s.io/client-go", "k8s.io/kubernetes", "github.com/strandlab/strandlab/tools/", module + "internal/"}},
	{"internal/ownership", "ownership reads /proc and its own marker files: no API client, no Docker, no runner or cluster code",
		[]string{"k8s.io/", "sigs.k8s.io/", "gonum.org/", module + "internal/cluster", module + "internal/runner", module + "internal/process"}},
	{"internal/safefile", "reading and writing files safely is a leaf",
		[]string{"k8s.io/", "sigs.k8s.io/", "github.com/", "gonum.org/", module + "internal/report", module + "internal/scenario"}},
	{"internal/usage", "resource figures are arithmetic on samples: no /proc, no API, no metrics library",
		[]string{"k8s.io/", "sigs.k8s.io/", "github.com/", "gonum.org/", "google.golang.org/", module}},
	{"internal/cgroupstat", "control groups are read from the cgroup filesystem: no API client, no Docker, nothing of strandlab's",
		[]string{"k8s.io/", "sigs.k8s.io/", "gonum.org/", module}},
	{"internal/apfcount", "the per-client FlowSchemas are planned and counted from data; the local provider makes the API calls",
		[]string{"k8s.io/client-go", module + "internal/cluster", "github.com/prometheus/procfs"}},
	{"internal/runtimeops", "runtime operation histograms are arithmetic: the kind provider reads and parses the kubelets' metrics",
		[]string{"k8s.io/", "sigs.k8s.io/", "github.com/prometheus/", "gonum.org/", module}},
	{"internal/calibration", "calibration compares reports: no cluster, no API client, no runner",
		[]string{"k8s.io/client-go", module + "internal/churn", module + "internal/cluster", module + "internal/proxy", module + "internal/runner", "github.com/prometheus/"}},
	{"internal/report", "the report is the JSON contract and its tests' statistics: rendering (Markdown, plots) is render's",
		[]string{"k8s.io/client-go", module + "internal/churn", module + "internal/cluster", module + "internal/proxy", module + "internal/runner", "github.com/prometheus/",
			"gonum.org/v1/plot", module + "internal/report/render"}},
	{"internal/report/render", "rendering reads a report: no cluster, no API client, no runner",
		[]string{"k8s.io/client-go", module + "internal/churn", module + "internal/cluster", module + "internal/proxy", module + "internal/runner", "github.com/prometheus/"}},
}

func TestDependencyRules(t *testing.T) {
	for _, r := range rules {
		t.Run(r.pkg, func(t *testing.T) {
			deps := listDeps(t, "./"+r.pkg)
			if len(deps) == 0 {
				t.Fatalf("go list found no dependencies of %s: the rule would check nothing", r.pkg)
			}
			for _, d := range deps {
				if d == module+r.pkg {
					continue
				}
				for _, f := range r.forbidden {
					if strings.HasPrefix(d, f) || d+"/" == f {
						t.Errorf("%s depends on %s (%s)", r.pkg, d, r.why)
					}
				}
			}
		})
	}
}

// listDeps is `go list -deps` of pkg, run from the module root.
func listDeps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath", pkg)
	cmd.Dir = "../.."
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var deps []string
	dec := json.NewDecoder(out)
	for {
		var p struct{ ImportPath string }
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		deps = append(deps, p.ImportPath)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.String())
	}
	return deps
}
