package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const valid = `
name: t
seed: 7
cluster: {nodes: 3}
workload:
  statefulSets:
  - {name: web, replicas: 3}
churn: {cycles: 20}
`

func TestParseAppliesDefaults(t *testing.T) {
	s, err := Parse([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	if s.Cluster.Provider != "local" || s.Churn.CycleTimeout.Duration != 2*time.Minute || len(s.Builds) != 1 || s.Builds[0] != "stock" {
		t.Errorf("defaults: provider %q timeout %v builds %v", s.Cluster.Provider, s.Churn.CycleTimeout, s.Builds)
	}
	if s.Seed != 7 || s.Churn.Cycles != 20 || s.Workload.StatefulSets[0].Replicas != 3 {
		t.Errorf("values: %+v", s)
	}
}

func TestBandFor(t *testing.T) {
	s, err := Parse([]byte(valid + "builds: [stock, fix]\nexpect:\n  stock: {stranded: {min: 1}, firstCycle: stranded}\n  '*': {stranded: {max: 0}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := s.BandFor("stock"); !ok || *b.Stranded.Min != 1 || b.FirstCycle != "stranded" {
		t.Errorf("stock band %+v %v", b, ok)
	}
	if b, ok := s.BandFor("fix"); !ok || *b.Stranded.Max != 0 || b.Stranded.Min != nil {
		t.Errorf("fix band (from *) %+v %v", b, ok)
	}
}

func TestParseRejectsBadInputNamingTheField(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"empty", "", "empty scenario"},
		{"unknown top-level field", valid + "extra: 1\n", "extra: unknown field"},
		{"unknown nested field", strings.Replace(valid, "nodes: 3", "nodes: 3, nodez: 4", 1), "cluster.nodez: unknown field"},
		{"nodes out of range", strings.Replace(valid, "nodes: 3", "nodes: 0", 1), "cluster.nodes"},
		{"report frequency out of range", strings.Replace(valid, "nodes: 3", "nodes: 3, nodeStatusReportFrequency: 10ms", 1), "cluster.nodeStatusReportFrequency"},
		{"failedMountOnTimeout on kind", strings.Replace(valid, "nodes: 3", "nodes: 3, provider: kind, failedMountOnTimeout: true", 1), "cluster.failedMountOnTimeout"},
		{"bad provider", strings.Replace(valid, "nodes: 3", "nodes: 3, provider: minikube", 1), "cluster.provider"},
		{"no statefulsets", "cluster: {nodes: 1}\nchurn: {cycles: 1}\n", "workload.statefulSets"},
		{"bad statefulset name", strings.Replace(valid, "name: web", "name: Web_1", 1), "workload.statefulSets[0].name"},
		{"duplicate statefulset", strings.Replace(valid, "- {name: web, replicas: 3}", "- {name: web, replicas: 3}\n  - {name: web, replicas: 1}", 1), "workload.statefulSets[1].name"},
		{"replicas out of range", strings.Replace(valid, "replicas: 3", "replicas: 0", 1), "workload.statefulSets[0].replicas"},
		{"negative cycles", strings.Replace(valid, "cycles: 20", "cycles: -1", 1), "churn.cycles"},
		{"bad duration", strings.Replace(valid, "cycles: 20", "cycles: 20, cycleTimeout: soon", 1), "soon"},
		{"duration out of range", strings.Replace(valid, "cycles: 20", "cycles: 20, cycleTimeout: 10ms", 1), "churn.cycleTimeout"},
		{"wrong type", strings.Replace(valid, "seed: 7", "seed: seven", 1), "seed"},
		{"bad build name", valid + "builds: [\"Stock!\"]\n", "builds[0]"},
		{"unknown pinning", valid + "scheduling: {pinning: glue}\n", "scheduling.pinning"},
		{"static pin of an unknown statefulset", valid + "scheduling: {pinning: static, static: [{statefulSet: db, ordinal: 0, node: node-1}]}\n", "scheduling.static[0].statefulSet"},
		{"static pins without static pinning", valid + "scheduling: {pinning: sticky, static: [{statefulSet: web, ordinal: 0, node: node-1}]}\n", "scheduling.static"},
		{"two latency kinds", valid + "scheduling: {pinning: sticky, extenderLatency: {fixed: 1s, exponentialMean: 1s}}\n", "scheduling.extenderLatency"},
		{"latency without the extender", valid + "scheduling: {extenderLatency: {fixed: 1s}}\n", "needs the extender"},
		{"concurrency out of range", strings.Replace(valid, "cycles: 20", "cycles: 20, concurrency: 501", 1), "churn.concurrency"},
		{"negative interval", strings.Replace(valid, "cycles: 20", "cycles: 20, interval: -1s", 1), "churn.interval"},
		{"churn of an unknown statefulset", strings.Replace(valid, "cycles: 20", "cycles: 20, statefulSets: [db]", 1), "churn.statefulSets[0]"},
		{"unknown band field", valid + "expect: {stock: {strandd: {min: 1}}}\n", "expect.stock.strandd: unknown field"},
		{"band max below min", valid + "expect: {stock: {stranded: {min: 2, max: 1}}}\n", "expect.stock.stranded.max"},
		{"bad first-cycle outcome", valid + "expect: {'*': {firstCycle: maybe}}\n", "expect.*.firstCycle"},
		{"unknown latency field", valid + "scheduling: {pinning: sticky, extenderLatency: {fixd: 1s}}\n", "scheduling.extenderLatency.fixd: unknown field"},
		{"proxy rule without a resource", valid + "proxy: {rules: [{delay: {fixed: 1s}}]}\n", "proxy.rules[0].resource: required"},
		{"proxy rule with a bad event type", valid + "proxy: {rules: [{resource: nodes, eventTypes: [CHANGED]}]}\n", `proxy.rules[0].eventTypes: "CHANGED" is not`},
		{"proxy predicate on pods", valid + "proxy: {rules: [{resource: pods, predicate: volumesAttachedAdded}]}\n", "proxy.rules[0].predicate: volumesAttachedAdded applies to nodes only"},
		{"proxy delay of two kinds", valid + "proxy: {rules: [{resource: nodes, delay: {fixed: 1s, uniformMax: 2s}}]}\n", "proxy.rules[0].delay.set only one of"},
		{"proxy delay too long", valid + "proxy: {rules: [{resource: nodes, delay: {fixed: 6m}}]}\n", "proxy.rules[0].delay.fixed: 6m0s out of range"},
		{"proxy request latency", valid + "proxy: {requestLatency: {uniformMin: 2s, uniformMax: 1s}}\n", "proxy.requestLatency.uniformMax: 1s is below uniformMin 2s"},
		{"proxy negative qps", valid + "proxy: {qps: -1}\n", "proxy.qps: -1 is negative"},
		{"unknown proxy delay field", valid + "proxy: {rules: [{resource: nodes, delay: {fixd: 1s}}]}\n", "proxy.rules[0].delay.fixd: unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// Every shipped scenario must load.
func TestShippedScenariosAreValid(t *testing.T) {
	files, err := filepath.Glob("../../scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(path, []byte("cluster: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v does not name the file", err)
	}
}

func TestBandCheck(t *testing.T) {
	one, zero := 1, 0
	band := Band{Stranded: Range{Min: &one}, SafetyViolations: Range{Max: &zero}, FirstCycle: "stranded"}
	tests := []struct {
		name  string
		o     Outcome
		unmet int
	}{
		{"met", Outcome{Stranded: 3, FirstCycle: "stranded"}, 0},
		{"nothing stranded", Outcome{FirstCycle: "running"}, 2},
		{"safety violation", Outcome{Stranded: 1, SafetyViolations: 2, FirstCycle: "stranded"}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := band.Check(tc.o); len(got) != tc.unmet {
				t.Errorf("Check(%+v) = %q, want %d unmet", tc.o, got, tc.unmet)
			}
		})
	}
}
