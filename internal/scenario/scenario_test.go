package scenario

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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

func TestStorageClass(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{valid, "strandlab-hostpath"},
		{strings.Replace(valid, "nodes: 3", "nodes: 3, storageClass: strandlab-hostpath", 1), "strandlab-hostpath"},
		{strings.Replace(valid, "nodes: 3", "nodes: 3, provider: existing, storageClass: fast-ssd.example.com", 1), "fast-ssd.example.com"},
	}
	for _, tc := range tests {
		s, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Cluster.StorageClassName(); got != tc.want {
			t.Errorf("StorageClassName() = %q, want %q", got, tc.want)
		}
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
		{"storage class not a DNS subdomain", strings.Replace(valid, "nodes: 3", "nodes: 3, provider: existing, storageClass: Fast_SSD", 1), "cluster.storageClass: \"Fast_SSD\" is not a valid StorageClass name"},
		{"not a provider name", strings.Replace(valid, "nodes: 3", "nodes: 3, provider: Mini_Kube", 1), "cluster.provider"},
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
		{"static pin of an ordinal beyond the replicas", valid + "scheduling: {pinning: static, static: [{statefulSet: web, ordinal: 3, node: node-1}]}\n", "scheduling.static[0].ordinal: 3, but StatefulSet web has 3 replicas (ordinals 0-2)"},
		{"concurrency above the pods", strings.Replace(valid, "cycles: 20", "cycles: 20, concurrency: 4", 1), "churn.concurrency: 4 is more than the 3 pods churned"},
		{"static pins without static pinning", valid + "scheduling: {pinning: sticky, static: [{statefulSet: web, ordinal: 0, node: node-1}]}\n", "scheduling.static"},
		{"two latency kinds", valid + "scheduling: {pinning: sticky, extenderLatency: {fixed: 1s, exponentialMean: 1s}}\n", "scheduling.extenderLatency"},
		{"latency without the extender", valid + "scheduling: {extenderLatency: {fixed: 1s}}\n", "needs the extender"},
		{"concurrency out of range", strings.Replace(valid, "cycles: 20", "cycles: 20, concurrency: 501", 1), "churn.concurrency"},
		{"negative interval", strings.Replace(valid, "cycles: 20", "cycles: 20, interval: -1s", 1), "churn.interval"},
		{"churn of an unknown statefulset", strings.Replace(valid, "cycles: 20", "cycles: 20, statefulSets: [db]", 1), "churn.statefulSets[0]"},
		{"unknown band field", valid + "expect: {stock: {strandd: {min: 1}}}\n", "expect.stock.strandd: unknown field"},
		{"band max below min", valid + "expect: {stock: {stranded: {min: 2, max: 1}}}\n", "expect.stock.stranded.max"},
		{"bad first-cycle outcome", valid + "expect: {'*': {firstCycle: maybe}}\n", "expect.*.firstCycle"},
		{"stranded rate min negative", valid + "expect: {stock: {strandedRate: {min: -0.1}}}\n", "expect.stock.strandedRate.min: -0.1 out of range [0, 1]"},
		{"stranded rate max above 1", valid + "expect: {fix: {strandedRate: {max: 1.5}}}\n", "expect.fix.strandedRate.max: 1.5 out of range [0, 1]"},
		{"stranded rate max below min", valid + "expect: {stock: {strandedRate: {min: 0.01, max: 0.001}}}\n", "expect.stock.strandedRate.max: 0.001 is below min 0.01"},
		{"stranded rate not a number", valid + "expect: {stock: {strandedRate: {min: often}}}\n", "strandedRate.min"},
		{"unknown stranded rate field", valid + "expect: {stock: {strandedRate: {mean: 0.1}}}\n", "expect.stock.strandedRate.mean: unknown field"},
		{"unknown latency field", valid + "scheduling: {pinning: sticky, extenderLatency: {fixd: 1s}}\n", "scheduling.extenderLatency.fixd: unknown field"},
		{"proxy rule without a resource", valid + "proxy: {rules: [{delay: {fixed: 1s}}]}\n", "proxy.rules[0].resource: required"},
		{"proxy rule with a bad event type", valid + "proxy: {rules: [{resource: nodes, eventTypes: [CHANGED]}]}\n", `proxy.rules[0].eventTypes: "CHANGED" is not`},
		{"proxy predicate on pods", valid + "proxy: {rules: [{resource: pods, predicate: volumesAttachedAdded}]}\n", "proxy.rules[0].predicate: volumesAttachedAdded applies to nodes only"},
		{"proxy delay of two kinds", valid + "proxy: {rules: [{resource: nodes, delay: {fixed: 1s, uniformMax: 2s}}]}\n", "proxy.rules[0].delay.set only one of"},
		{"proxy delay too long", valid + "proxy: {rules: [{resource: nodes, delay: {fixed: 6m}}]}\n", "proxy.rules[0].delay.fixed: 6m0s out of range"},
		{"proxy request latency", valid + "proxy: {requestLatency: {uniformMin: 2s, uniformMax: 1s}}\n", "proxy.requestLatency.uniformMax: 1s is below uniformMin 2s"},
		{"proxy negative qps", valid + "proxy: {qps: -1}\n", "proxy.qps: -1 is negative"},
		{"unknown proxy delay field", valid + "proxy: {rules: [{resource: nodes, delay: {fixd: 1s}}]}\n", "proxy.rules[0].delay.fixd: unknown field"},
		{"two documents", valid + "---\n" + valid, "2 YAML documents: a scenario file holds one"},
		{"a number that is no duration, with its line", strings.Replace(valid, "cycles: 20", "cycles: 20, cycleTimeout: 5", 1), `line 8: churn.cycleTimeout: want a duration such as "30s", got 5`},
		{"a word that is no number, with its line", strings.Replace(valid, "replicas: 3", "replicas: three", 1), `line 7: workload.statefulSets[0].replicas: "three" is not a whole number`},
		{"a validation error with its line", strings.Replace(valid, "cycles: 20", "cycles: -1", 1), "line 8: churn.cycles: -1 out of range"},
		{"an unknown field with its line", strings.Replace(valid, "nodes: 3", "nodes: 3, nodez: 4", 1), "line 4: cluster.nodez: unknown field"},
		{"proxy resource typo", valid + "proxy: {rules: [{resource: nodez, delay: {fixed: 1s}}]}\n", `proxy.rules[0].resource: "nodez" is not a built-in resource; did you mean "nodes"?`},
		{"proxy delay that says nothing", valid + "proxy: {rules: [{resource: nodes, delay: {}}]}\n", "proxy.rules[0].delay: says no delay"},
		{"api error without a resource", valid + "proxy: {apiErrors: [{status: 500, nth: 1}]}\n", "proxy.apiErrors[0].resource: required"},
		{"api error resource typo", valid + "proxy: {apiErrors: [{resource: node, status: 500, nth: 1}]}\n", `proxy.apiErrors[0].resource: "node" is not a built-in resource; did you mean "nodes"?`},
		{"api error subresource typo", valid + "proxy: {apiErrors: [{resource: nodes, subresource: statuses, status: 500, nth: 1}]}\n", `proxy.apiErrors[0].subresource: "statuses" is not one of`},
		{"api error verb in lower case", valid + "proxy: {apiErrors: [{resource: nodes, verbs: [patch], status: 500, nth: 1}]}\n", `proxy.apiErrors[0].verbs: "patch" is not one of`},
		{"api error status not offered", valid + "proxy: {apiErrors: [{resource: nodes, status: 404, nth: 1}]}\n", "proxy.apiErrors[0].status: 404 is not one of [409 429 500 503 504]"},
		{"api error that fails nothing", valid + "proxy: {apiErrors: [{resource: nodes, status: 500}]}\n", "proxy.apiErrors[0].fraction, nth: set one of them"},
		{"api error with fraction and nth", valid + "proxy: {apiErrors: [{resource: nodes, status: 500, fraction: 0.5, nth: 2}]}\n", "proxy.apiErrors[0].fraction, nth: set one of them, not both"},
		{"api error fraction above 1", valid + "proxy: {apiErrors: [{resource: nodes, status: 500, fraction: 1.5}]}\n", "proxy.apiErrors[0].fraction: 1.5 is not in (0, 1]"},
		{"api error hold too long", valid + "proxy: {apiErrors: [{resource: nodes, status: 504, nth: 1, hold: {fixed: 6m}}]}\n", "proxy.apiErrors[0].hold.fixed: 6m0s out of range"},
		{"api error unknown field", valid + "proxy: {apiErrors: [{resource: nodes, status: 500, nth: 1, code: 500}]}\n", "proxy.apiErrors[0].code: unknown field"},
		{"proxy rule without a delay", valid + "proxy: {rules: [{resource: nodes}]}\n", "proxy.rules[0].delay: says no delay"},
		{"csi error without a call", valid + "csiErrors: [{code: INTERNAL, nth: 1}]\n", "csiErrors[0].call: required"},
		{"csi error call without Volume", valid + "csiErrors: [{call: ControllerUnpublish, code: INTERNAL, nth: 1}]\n", `csiErrors[0].call: "ControllerUnpublish" is not one of`},
		{"csi error code in Go's spelling", valid + "csiErrors: [{call: NodeStageVolume, code: Unavailable, nth: 1}]\n", `csiErrors[0].code: "Unavailable" is not one of`},
		{"csi error that changes nothing", valid + "csiErrors: [{call: NodeStageVolume, nth: 1}]\n", "csiErrors[0].code, latency: set a code, a latency or both"},
		{"csi error that selects nothing", valid + "csiErrors: [{call: NodeStageVolume, code: INTERNAL}]\n", "csiErrors[0].fraction, nth: set one of them"},
		{"csi error negative count", valid + "csiErrors: [{call: NodeStageVolume, code: INTERNAL, fraction: 1, count: -1}]\n", "csiErrors[0].count: -1 is negative"},
		{"csi error latency too long", valid + "csiErrors: [{call: NodeStageVolume, latency: {fixed: 6m}, nth: 1}]\n", "csiErrors[0].latency.fixed: 6m0s out of range"},
		{"csi error claim the workload lacks", valid + "csiErrors: [{call: NodeStageVolume, code: INTERNAL, nth: 1, pvcs: [data-0-app-0]}]\n", `csiErrors[0].pvcs[0]: "data-0-app-0" is not a claim of the workload`},
		{"csi error unknown field", valid + "csiErrors: [{call: NodeStageVolume, code: INTERNAL, nth: 1, node: node-1}]\n", "csiErrors[0].node: unknown field"},
		{"name leaving the report directory", strings.Replace(valid, "name: t", "name: ../../../../tmp/x", 1), `name: "../../../../tmp/x" is not a valid scenario name`},
		{"name with a slash", strings.Replace(valid, "name: t", "name: a/b", 1), `name: "a/b" is not a valid scenario name`},
		{"name with a newline", strings.Replace(valid, "name: t", "name: \"a\\nb\"", 1), `is not a valid scenario name`},
		{"name upper case", strings.Replace(valid, "name: t", "name: Soak", 1), `name: "Soak" is not a valid scenario name`},
		{"name too long", strings.Replace(valid, "name: t", "name: "+strings.Repeat("a", 64), 1), `is not a valid scenario name`},
		{"until-verdict alpha not a probability", valid + "untilVerdict: {alpha: 1.5}\n", "untilVerdict.alpha: 1.5 is not in (0, 1)"},
		{"until-verdict negative margin", valid + "untilVerdict: {margin: -0.01}\n", "untilVerdict.margin: -0.01 is not a rate in (0, 1)"},
		{"until-verdict unknown field", valid + "untilVerdict: {alfa: 0.01}\n", "untilVerdict.alfa: unknown field"},
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

// shippedScenarios are the scenario files of the repository: scenarios/
// and the bug family's, scenarios/family/.
func shippedScenarios(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"../../scenarios/*.yaml", "../../scenarios/family/*.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil || len(m) == 0 {
			t.Fatalf("no scenarios match %s: %v", pattern, err)
		}
		files = append(files, m...)
	}
	return files
}

// Every shipped scenario must load.
func TestShippedScenariosAreValid(t *testing.T) {
	for _, f := range shippedScenarios(t) {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// A leading '---' and comments around one document are one document.
func TestParseOneDocumentWithSeparators(t *testing.T) {
	for _, y := range []string{"---\n" + valid, "# header\n---\n" + valid + "---\n# trailer\n"} {
		if _, err := Parse([]byte(y)); err != nil {
			t.Errorf("%q: %v", y, err)
		}
	}
}

// Load reads regular files of bounded size only: a device, a FIFO (which
// would block the open) or a directory is refused before it is read.
func TestLoadRefusesWhatIsNoScenarioFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, append([]byte(valid), bytes.Repeat([]byte("# padding\n"), MaxFileSize/10+1)...), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ path, want string }{
		{"/dev/zero", "not a regular file"},
		{fifo, "not a regular file"},
		{dir, "not a regular file"},
		{big, "more than a scenario's 1048576"},
		{filepath.Join(dir, "missing.yaml"), "no such file"},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := Load(tc.path); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Load(%s) = %v, want %q", tc.path, err, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Load(%s) did not return within 10 s", tc.path)
			}
		})
	}
}

// A file name that is no scenario name needs name: in the file.
func TestLoadRefusesAFileNameThatIsNoName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "My Soak.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(valid, "name: t\n", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "set name: in the file") {
		t.Errorf("error %v, want the file name refused", err)
	}
}

// An expect key must name a build: a typo would leave the build unchecked.
func TestCheckExpectKeys(t *testing.T) {
	tests := []struct {
		name, yaml string
		known      []string
		want       string // "" = accepted
	}{
		{"every build", valid + "expect: {'*': {stranded: {max: 0}}}\n", []string{"stock"}, ""},
		{"a scenario build", valid + "builds: [stock, mine]\nexpect: {mine: {stranded: {max: 0}}}\n", []string{"stock"}, ""},
		{"a repository build", valid + "expect: {fix: {stranded: {max: 0}}}\n", []string{"stock", "fix"}, ""},
		{"a typo", valid + "builds: [stock, fix]\nexpect: {fixx: {stranded: {max: 0}}}\n", []string{"stock", "fix"}, `expect.fixx: no controller build is called "fixx" (builds: fix, stock, or '*' for all)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			err = s.CheckExpectKeys(tc.known)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("CheckExpectKeys = %v, want %q", err, tc.want)
			}
		})
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

func TestStrandedRateBandParses(t *testing.T) {
	tests := []struct {
		name     string
		band     string
		min, max *float64
	}{
		{"both bounds", "{min: 0.0002, max: 0.01}", ptr(0.0002), ptr(0.01)},
		{"min only", "{min: 0.0002}", ptr(0.0002), nil},
		{"max only", "{max: 0}", nil, ptr(0.0)},
		{"the whole range", "{min: 0, max: 1}", ptr(0.0), ptr(1.0)},
		{"a point", "{min: 0.5, max: 0.5}", ptr(0.5), ptr(0.5)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(valid + "expect: {stock: {strandedRate: " + tc.band + "}}\n"))
			if err != nil {
				t.Fatal(err)
			}
			r := s.Expect["stock"].StrandedRate
			if !equalPtr(r.Min, tc.min) || !equalPtr(r.Max, tc.max) {
				t.Errorf("strandedRate %v, want min %v max %v", r, tc.min, tc.max)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func equalPtr(a, b *float64) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// The nightly's check (docs/ci.md): fix must not strand nor violate safety,
// stock's rate must stay inside its band.
func TestBandCheckStrandedRate(t *testing.T) {
	zero := 0
	stock := Band{StrandedRate: RateRange{Min: ptr(0.0002), Max: ptr(0.01)}}
	fix := Band{Stranded: Range{Max: &zero}, SafetyViolations: Range{Max: &zero}}
	tests := []struct {
		name string
		band Band
		o    Outcome
		want []string // the unmet lines, in order
	}{
		{"stock inside the band", stock, Outcome{Cycles: 20000, Stranded: 20}, nil},
		{"stock on the lower bound", stock, Outcome{Cycles: 20000, Stranded: 4}, nil},
		{"stock on the upper bound", stock, Outcome{Cycles: 20000, Stranded: 200}, nil},
		{"stock below the band: the reproduction is lost", stock, Outcome{Cycles: 20000, Stranded: 3},
			[]string{"strandedRate = 0.00015 (3/20000), expected at least 0.0002"}},
		{"stock never strands", stock, Outcome{Cycles: 20000},
			[]string{"strandedRate = 0 (0/20000), expected at least 0.0002"}},
		{"stock above the band", stock, Outcome{Cycles: 20000, Stranded: 201},
			[]string{"strandedRate = 0.01005 (201/20000), expected at most 0.01"}},
		{"no cycles: no rate", stock, Outcome{}, []string{"strandedRate: no cycles run, no rate to check"}},
		{"fix clean", fix, Outcome{Cycles: 20000}, nil},
		{"fix strands", fix, Outcome{Cycles: 20000, Stranded: 1}, []string{"stranded = 1, expected at most 0"}},
		{"fix has a safety violation", fix, Outcome{Cycles: 20000, SafetyViolations: 2}, []string{"safetyViolations = 2, expected at most 0"}},
		{"fix strands and violates safety", fix, Outcome{Cycles: 20000, Stranded: 1, SafetyViolations: 1},
			[]string{"stranded = 1, expected at most 0", "safetyViolations = 1, expected at most 0"}},
		{"no rate band: no cycles is fine", fix, Outcome{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.band.Check(tc.o)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("Check(%+v) = %q, want %q", tc.o, got, tc.want)
			}
		})
	}
}

func TestBandPooled(t *testing.T) {
	one := 1
	tests := []struct {
		name        string
		band        Band
		wantDropped []string
	}{
		{"firstCycle is about one run", Band{Stranded: Range{Min: &one}, FirstCycle: "stranded"}, []string{"firstCycle"}},
		{"counts and rates pool", Band{Stranded: Range{Min: &one}, StrandedRate: RateRange{Min: ptr(0.001)}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pooled, dropped := tc.band.Pooled()
			if strings.Join(dropped, ",") != strings.Join(tc.wantDropped, ",") {
				t.Errorf("dropped %q, want %q", dropped, tc.wantDropped)
			}
			if pooled.FirstCycle != "" || pooled.Stranded != tc.band.Stranded || pooled.StrandedRate != tc.band.StrandedRate {
				t.Errorf("pooled %+v from %+v", pooled, tc.band)
			}
		})
	}
}

func TestDefaultName(t *testing.T) {
	for path, want := range map[string]string{
		"scenarios/soak.yaml":    "soak",
		"/x/seed-122413.yml":     "seed-122413",
		"scenarios/no-extension": "no-extension",
		"../a.b/control.yaml":    "control",
	} {
		if got := DefaultName(path); got != want {
			t.Errorf("DefaultName(%q) = %q, want %q", path, got, want)
		}
	}
}

// A CSI fault for a claim the workload has is accepted, and the claims are
// named as the StatefulSet controller names them.
func TestCSIErrorsClaims(t *testing.T) {
	doc := strings.Replace(valid, "{name: web, replicas: 3}", "{name: web, replicas: 2, volumesPerPod: 2}", 1) +
		"csiErrors: [{call: ControllerUnpublishVolume, code: DEADLINE_EXCEEDED, fraction: 0.5, count: 3, nodes: [node-1], pvcs: [data-1-web-1]}]\n"
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"data-0-web-0", "data-1-web-0", "data-0-web-1", "data-1-web-1"}
	if got := s.PVCNames(); !slices.Equal(got, want) {
		t.Errorf("PVCNames() = %v, want %v", got, want)
	}
	if len(s.CSIErrors) != 1 || s.CSIErrors[0].Count != 3 {
		t.Errorf("csiErrors parsed as %+v", s.CSIErrors)
	}
}
