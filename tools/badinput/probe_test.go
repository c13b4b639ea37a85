// Package badinput probes strandlab and strandscan with bad input, as a new
// user would hand it to them: broken scenario files, flags, reports,
// kubeconfigs and API servers that refuse, never answer or answer that a
// namespace does not exist. No cluster is started (make unit runs it). Each
// case must end within a deadline, with a non-zero exit status and an error
// that names what is wrong; the test prints the counts by outcome.
package badinput

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// caseTimeout: every bad input must be refused well within it.
const caseTimeout = 30 * time.Second

var bin struct{ strandlab, strandscan string }

// repoRoot is the checkout the binaries run in.
var repoRoot, _ = filepath.Abs("../..")

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "badinput-")
	if err != nil {
		panic(err)
	}
	bin.strandlab, bin.strandscan = filepath.Join(dir, "strandlab"), filepath.Join(dir, "strandscan")
	for _, b := range []struct{ out, pkg string }{{bin.strandlab, "./tools/strandlab"}, {bin.strandscan, "./tools/strandscan"}} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", b.pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// probe is one bad input and what its refusal must say.
type probe struct {
	name string
	bin  string   // strandlab or strandscan's path
	args []string // {dir} is replaced by a fresh temporary directory
	want string   // the error names this
	code int      // the exit status expected (0: any non-zero)
}

type outcome string

const (
	refused  outcome = "refused, naming the problem"
	vague    outcome = "refused, without naming it"
	accepted outcome = "accepted"
	hung     outcome = "hung"
	crashed  outcome = "crashed"
)

func TestBadInputIsRefusedClearly(t *testing.T) {
	files := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	root := repoRoot
	valid := "cluster: {nodes: 3}\nworkload:\n  statefulSets:\n  - {name: web, replicas: 3}\nchurn: {cycles: 1}\n"
	fifo := filepath.Join(files, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	report := func(name string, mutate func(map[string]any)) string {
		r := map[string]any{"schema_version": 1, "run_id": "20261203-120000-" + name, "scenario": "x", "provider": "local",
			"kubernetes_version": "v1.37.2", "complete": true,
			"builds": []any{map[string]any{"name": "stock", "cycles": 10}, map[string]any{"name": "fix", "cycles": 10}}}
		mutate(r)
		data, _ := json.Marshal(r)
		dir := filepath.Join(files, name)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "report.json"), data, 0o644)
		return dir
	}
	good := report("good", func(map[string]any) {})
	good2 := report("good2", func(r map[string]any) { r["run_id"] = "20261203-120001-x" })

	// API servers on 127.0.0.1: one that refuses connections, one that
	// accepts and never answers, one that says every object is missing.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := l.Addr().String()
	l.Close()
	silent := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer silent.Close()
	notFound := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"not found"}`)
	}))
	defer notFound.Close()
	kubeconfig := func(name, server string) string {
		return write(name, fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]\n"+
			"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n", server))
	}
	refusedKC := kubeconfig("refused.kubeconfig", "https://"+refusedAddr)
	silentKC := kubeconfig("silent.kubeconfig", silent.URL)
	notFoundKC := kubeconfig("notfound.kubeconfig", notFound.URL)

	sl, ss := bin.strandlab, bin.strandscan
	probes := []probe{
		// scenario files
		{"validate: missing file", sl, []string{"validate", filepath.Join(files, "none.yaml")}, "no such file", 1},
		{"validate: a directory", sl, []string{"validate", files}, "not a regular file", 1},
		{"validate: /dev/zero", sl, []string{"validate", "/dev/zero"}, "not a regular file", 1},
		{"validate: a FIFO", sl, []string{"validate", fifo}, "not a regular file", 1},
		{"validate: empty", sl, []string{"validate", write("empty.yaml", "")}, "empty scenario", 1},
		{"validate: binary", sl, []string{"validate", write("bin.yaml", "\x00\x01\x02\xff")}, "bin.yaml", 1},
		{"validate: too large", sl, []string{"validate", write("big.yaml", valid+strings.Repeat("# x\n", 300000))}, "more than a scenario's", 1},
		{"validate: two documents", sl, []string{"validate", write("two.yaml", valid+"---\n"+valid)}, "2 YAML documents", 1},
		{"validate: a list", sl, []string{"validate", write("list.yaml", "- a\n- b\n")}, "list.yaml", 1},
		{"validate: YAML syntax", sl, []string{"validate", write("syntax.yaml", "cluster: [\n")}, "syntax.yaml", 1},
		{"validate: unknown field", sl, []string{"validate", write("nodez.yaml", strings.Replace(valid, "nodes: 3", "nodez: 3", 1))}, "cluster.nodez: unknown field", 1},
		{"validate: name leaving the directory", sl, []string{"validate", write("escape.yaml", "name: ../../../../tmp/x\n"+valid)}, `name: "../../../../tmp/x" is not a valid scenario name`, 1},
		{"validate: name with a newline", sl, []string{"validate", write("newline.yaml", "name: \"a\\nb\"\n"+valid)}, "is not a valid scenario name", 1},
		{"validate: file name that is no name", sl, []string{"validate", write("My Soak.yaml", valid)}, "set name: in the file", 1},
		{"validate: fault rule resource typo", sl, []string{"validate", write("nodez-rule.yaml", valid+"proxy: {rules: [{resource: nodez, delay: {fixed: 1s}}]}\n")}, `did you mean "nodes"`, 1},
		{"validate: empty delay", sl, []string{"validate", write("nodelay.yaml", valid+"proxy: {rules: [{resource: nodes, delay: {}}]}\n")}, "says no delay", 1},
		{"validate: expect key typo", sl, []string{"validate", write("fixx.yaml", valid+"builds: [stock, fix]\nexpect: {fixx: {stranded: {max: 0}}}\n")}, `expect.fixx: no controller build is called "fixx"`, 1},
		{"validate: duration", sl, []string{"validate", write("dur.yaml", strings.Replace(valid, "cycles: 1", "cycles: 1, cycleTimeout: 5", 1))}, "churn.cycleTimeout: want a duration", 1},
		{"validate: number", sl, []string{"validate", write("num.yaml", strings.Replace(valid, "replicas: 3", "replicas: three", 1))}, "replicas: \"three\" is not a whole number", 1},
		{"validate: nodes out of range", sl, []string{"validate", write("nodes.yaml", strings.Replace(valid, "nodes: 3", "nodes: 0", 1))}, "cluster.nodes: 0 out of range", 1},
		{"validate: concurrency above pods", sl, []string{"validate", write("conc.yaml", strings.Replace(valid, "cycles: 1", "cycles: 1, concurrency: 9", 1))}, "churn.concurrency: 9 is more than the 3 pods", 1},
		{"validate: pin to a missing node", sl, []string{"validate", write("pin.yaml", valid+"scheduling: {pinning: static, static: [{statefulSet: web, ordinal: 0, node: node-9}]}\n")}, `"node-9" is not a node`, 1},
		{"validate: unknown provider", sl, []string{"validate", write("prov.yaml", strings.Replace(valid, "nodes: 3", "nodes: 3, provider: minikube", 1))}, "cluster.provider", 1},
		// run's flags and pre-flight (no cluster starts)
		{"run: unknown build", sl, []string{"run", "--output", "{dir}", "--scenario", write("ok.yaml", valid), "--builds", "nope"}, `"nope"`, 1},
		{"run: unknown provider", sl, []string{"run", "--output", "{dir}", "--scenario", write("ok2.yaml", valid), "--provider", "minikube"}, "cluster.provider", 1},
		{"run: cycles out of range", sl, []string{"run", "--output", "{dir}", "--scenario", write("ok3.yaml", valid), "--cycles", "2000000"}, "churn.cycles", 1},
		{"run: seed not a number", sl, []string{"run", "--output", "{dir}", "--seed", "abc"}, "--seed", 1},
		{"run: run id suffix leaving the directory", sl, []string{"run", "--output", "{dir}", "--scenario", write("ok4.yaml", valid), "--run-id-suffix", "../x"}, "--run-id-suffix", 1},
		{"run: unknown flag", sl, []string{"run", "--cycels", "3"}, "unknown flag: --cycels", 1},
		{"run: existing without consent", sl, []string{"run", "--output", "{dir}", "--scenario", write("ok5.yaml", valid), "--provider", "existing", "--kubeconfig", silentKC}, "--cluster-owner-consent", 1},
		{"run: existing, a server that never answers", sl, []string{"run", "--output", "{dir}", "--scenario", write("ok6.yaml", valid), "--provider", "existing", "--kubeconfig", silentKC, "--cluster-owner-consent"}, "does not answer /version", 1},
		// reports
		{"merge: one report", sl, []string{"merge", "--output", "{dir}", good}, "at least two are needed", 1},
		{"merge: missing report", sl, []string{"merge", "--output", "{dir}", good, filepath.Join(files, "none")}, "none", 1},
		{"merge: renamed field", sl, []string{"merge", "--output", "{dir}", good, report("renamed", func(r map[string]any) { r["strandings_total"] = 3 })}, `unknown field "strandings_total"`, 1},
		{"merge: newer schema", sl, []string{"merge", "--output", "{dir}", good, report("newer", func(r map[string]any) { r["schema_version"] = 9 })}, "written by a newer strandlab", 1},
		{"merge: different build sets", sl, []string{"merge", "--output", "{dir}", good, report("onebuild", func(r map[string]any) {
			r["run_id"] = "20261203-120002-x"
			r["builds"] = []any{map[string]any{"name": "stock", "cycles": 6}}
		})}, "builds differs", 1},
		{"merge: negative count", sl, []string{"merge", "--output", "{dir}", good, report("negative", func(r map[string]any) {
			r["run_id"] = "20261203-120003-x"
			r["builds"] = []any{map[string]any{"name": "stock", "cycles": 10, "stranded": -1}, map[string]any{"name": "fix", "cycles": 10}}
		})}, "builds[stock].stranded: -1 is negative", 1},
		{"merge: scenario name leaving the directory", sl, []string{"merge", "--output", "{dir}", good, report("escape", func(r map[string]any) {
			r["run_id"] = "20261203-120004-x"
			r["scenario"] = "../../x"
		})}, "is not a valid scenario name", 1},
		{"merge: --check without --scenario", sl, []string{"merge", "--check", good, good2}, "--check: needs --scenario", 1},
		{"plan: alpha out of range", sl, []string{"plan", filepath.Join(root, "scenarios/soak.yaml"), "--baseline-rate", "0.001", "--alpha", "2"}, "--alpha", 1},
		{"plan: power out of range", sl, []string{"plan", filepath.Join(root, "scenarios/soak.yaml"), "--baseline-rate", "0.001", "--power", "0"}, "--power", 1},
		{"plan: negative rate", sl, []string{"plan", filepath.Join(root, "scenarios/soak.yaml"), "--baseline-rate", "-1"}, "--baseline-rate", 1},
		{"shards: zero", sl, []string{"shards", "--shards", "0"}, "--shards", 1},
		{"shards: too many", sl, []string{"shards", "--shards", "100000"}, "--shards", 1},
		// down
		{"down: missing directory", sl, []string{"down", filepath.Join(files, "none")}, "not a state directory strandlab created", 1},
		{"down: a directory strandlab did not create", sl, []string{"down", files}, "not a state directory strandlab created", 1},
		{"down: missing kubeconfig", sl, []string{"down", "--kubeconfig", filepath.Join(files, "none.kubeconfig")}, "none.kubeconfig", 1},
		{"down: refused connection", sl, []string{"down", "--kubeconfig", refusedKC}, refusedAddr, 1},
		{"down: a server that never answers", sl, []string{"down", "--kubeconfig", silentKC}, "does not answer /version", 1},
		// strandscan
		{"strandscan: output format", ss, []string{"-o", "yaml", "--kubeconfig", refusedKC}, "invalid --output", 2},
		{"strandscan: negative threshold", ss, []string{"--threshold", "-1s", "--kubeconfig", refusedKC}, "invalid --threshold", 2},
		{"strandscan: timeout below threshold", ss, []string{"--threshold", "2m", "--timeout", "1m", "--kubeconfig", refusedKC}, "invalid --timeout", 2},
		{"strandscan: missing kubeconfig", ss, []string{"--kubeconfig", filepath.Join(files, "none.kubeconfig")}, "none.kubeconfig", 2},
		{"strandscan: refused connection", ss, []string{"--kubeconfig", refusedKC}, "cannot reach the API server", 2},
		{"strandscan: a server that never answers", ss, []string{"--kubeconfig", silentKC, "--threshold", "1s", "--timeout", "10s"}, "did not finish within --timeout 10s", 2},
		{"strandscan: a namespace that does not exist", ss, []string{"--kubeconfig", notFoundKC, "-n", "nss"}, `namespace "nss" does not exist`, 2},
		{"strandscan: unknown flag", ss, []string{"--namespaces", "x"}, "unknown flag", 2},
	}
	counts := map[outcome]int{}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			o, code, text := runProbe(t, p)
			counts[o]++
			if o != refused || p.code != 0 && code != p.code {
				t.Errorf("%s (exit %d, want %d and %q):\n%s", o, code, p.code, p.want, text)
			}
		})
	}
	t.Logf("%d bad inputs: %d %s, %d %s, %d %s, %d %s, %d %s", len(probes),
		counts[refused], refused, counts[vague], vague, counts[accepted], accepted, counts[hung], hung, counts[crashed], crashed)
}

// runProbe runs one probe in a fresh directory and classifies what it did.
func runProbe(t *testing.T, p probe) (outcome, int, string) {
	dir := t.TempDir()
	args := make([]string, len(p.args))
	for i, a := range p.args {
		args[i] = strings.ReplaceAll(a, "{dir}", filepath.Join(dir, "out"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, args...)
	// In the repository, as a user runs it; what is written goes to {dir}.
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := out.String()
	code := cmd.ProcessState.ExitCode()
	switch {
	case ctx.Err() != nil:
		return hung, code, text
	case strings.Contains(text, "panic:") || strings.Contains(text, "goroutine "):
		return crashed, code, text
	case err == nil:
		return accepted, code, text
	case !strings.Contains(text, p.want):
		return vague, code, text
	}
	// Refused: nothing may be left in the output directory.
	if entries, _ := os.ReadDir(filepath.Join(dir, "out")); len(entries) > 0 {
		t.Errorf("a refused input left %d entries in --output", len(entries))
	}
	return refused, code, text
}
