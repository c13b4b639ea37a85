// Package cli tests `strandlab run` as a user runs it: the binary, its output,
// its report files, its exit status, and what it leaves behind — after a
// normal run, with --keep, after Ctrl-C and after being killed.
package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/strandlab/strandlab/internal/ownership"
	"github.com/strandlab/strandlab/internal/process"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/upstream"
)

var (
	repoRoot  string
	strandlab string // the built CLI
)

func TestMain(m *testing.M) {
	flag.Parse() // testing.Short reads the -short flag, which m.Run would parse only later
	if testing.Short() {
		// Every test here runs the built CLI, and setup builds the binaries.
		fmt.Println("e2e/cli: skipped in -short mode (starts a cluster)")
		os.Exit(0)
	}
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if strandlab != "" {
		os.RemoveAll(filepath.Dir(strandlab))
	}
	os.Exit(code)
}

func setup() error {
	wd, _ := os.Getwd()
	var err error
	if repoRoot, err = upstream.RepoRoot(wd); err != nil {
		return err
	}
	// Build the upstream binaries once, here, so the runs below only start clusters.
	if _, err := upstream.Ensure(context.Background(), repoRoot, os.Stderr); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "strandlab-cli-bin-")
	if err != nil {
		return err
	}
	strandlab = filepath.Join(dir, "strandlab")
	cmd := exec.Command("go", "build", "-o", strandlab, "./tools/strandlab")
	cmd.Dir, cmd.Stderr = repoRoot, os.Stderr
	return cmd.Run()
}

// run is a started `strandlab run` whose output is captured line by line.
type run struct {
	cmd    *exec.Cmd
	output string // the --output directory
	mu     sync.Mutex
	stdout []string
	stderr []string
	lines  chan string // every stderr line, as it comes
	done   chan struct{}
}

func start(t *testing.T, args ...string) *run {
	t.Helper()
	return startIn(t, t.TempDir(), args...)
}

// startIn is start with out as the --output directory.
func startIn(t *testing.T, out string, args ...string) *run {
	t.Helper()
	r := &run{output: out, lines: make(chan string, 1000), done: make(chan struct{})}
	r.cmd = exec.Command(strandlab, append([]string{"run", "--output", out}, args...)...)
	r.cmd.Dir = repoRoot
	stdout, _ := r.cmd.StdoutPipe()
	stderr, _ := r.cmd.StderrPipe()
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	collect := func(rd io.Reader, dst *[]string, ch chan string) {
		defer wg.Done()
		sc := bufio.NewScanner(rd)
		for sc.Scan() {
			r.mu.Lock()
			*dst = append(*dst, sc.Text())
			r.mu.Unlock()
			if ch != nil {
				select {
				case ch <- sc.Text():
				default:
				}
			}
		}
	}
	go collect(stdout, &r.stdout, nil)
	go collect(stderr, &r.stderr, r.lines)
	go func() { wg.Wait(); close(r.done) }()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
		}
	})
	return r
}

// waitForLine blocks until a stderr line contains s.
func (r *run) waitForLine(t *testing.T, s string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-r.lines:
			if strings.Contains(l, s) {
				return l
			}
		case <-r.done:
			t.Fatalf("output ended before %q:\n%s", s, r.text())
		case <-deadline:
			t.Fatalf("no %q within %v:\n%s", s, timeout, r.text())
		}
	}
}

func (r *run) wait(t *testing.T) int {
	t.Helper()
	<-r.done
	err := r.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0
}

func (r *run) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return "stdout:\n" + strings.Join(r.stdout, "\n") + "\nstderr:\n" + strings.Join(r.stderr, "\n")
}

// stdoutLines is what the run printed on stdout: its reports' paths.
func (r *run) stdoutLines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.stdout)
}

func (r *run) lastStdoutLine() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.stdout) == 0 {
		return ""
	}
	return r.stdout[len(r.stdout)-1]
}

func readReport(t *testing.T, path string) *report.Report {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// The done-when of the foundation: the smoke scenario runs 20 cycles, writes
// the contract report and prints its path last.
// With --runtime-timings its kubelets draw from another timings file, which
// the report names.
func TestSmokeRunWritesTheReport(t *testing.T) {
	builtIn, err := os.ReadFile(filepath.Join(repoRoot, "tools", "upstream", "kubelet-sim", "containerruntime", "timings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var timings map[string]any
	if err := json.Unmarshal(builtIn, &timings); err != nil {
		t.Fatal(err)
	}
	const source = "the smoke test's copy of the built-in timings"
	timings["source"] = source
	timingsFile := filepath.Join(t.TempDir(), "timings.json")
	if data, err := json.Marshal(timings); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(timingsFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := start(t, "--scenario", "scenarios/smoke.yaml", "--runtime-timings", timingsFile)
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, r.text())
	}
	path := r.lastStdoutLine()
	if !strings.HasPrefix(path, filepath.Join(r.output, "reports")) || !strings.HasSuffix(path, "report.json") {
		t.Fatalf("last line %q is not the report path", path)
	}
	rep := readReport(t, path)
	if !rep.Complete || rep.Interrupted {
		t.Errorf("report not complete: complete=%v interrupted=%v", rep.Complete, rep.Interrupted)
	}
	if rep.KubernetesVersion != "v1.37.2" || rep.ClusterStartSeconds <= 0 {
		t.Errorf("kubernetes_version %q, cluster_start_seconds %v", rep.KubernetesVersion, rep.ClusterStartSeconds)
	}
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet-sim"} {
		if rep.Components[c].Version == "" {
			t.Errorf("component %s missing from the report", c)
		}
	}
	// kubelet-sim's volumes are the kubelet's own code (docs/kubelet-sim.md).
	if v, want := rep.Components["kubelet-sim"].Version, "volume manager and pod status manager from k8s.io/kubernetes@v1.37.2"; !strings.Contains(v, want) {
		t.Errorf("component kubelet-sim is %q, want it to name the %s", v, want)
	}
	if v := rep.Components["kubelet-sim"].Version; !strings.Contains(v, "runtime timings drawn from "+source) {
		t.Errorf("component kubelet-sim is %q, want it to name the --runtime-timings file's source %q", v, source)
	}
	if len(rep.Builds) != 1 || rep.Builds[0].Cycles != 20 || rep.Builds[0].CyclesNotRunning != 0 {
		t.Fatalf("builds: %+v", rep.Builds)
	}
	for _, c := range rep.Builds[0].CycleLog {
		if c.Outcome != "running" || c.DeleteToRunning <= 0 {
			t.Errorf("cycle %d: %+v", c.Index, c)
		}
	}
	for _, f := range []string{"report.json", "report.md"} {
		if _, err := os.Stat(filepath.Join(r.output, "reports", "latest", f)); err != nil {
			t.Errorf("latest/%s: %v", f, err)
		}
	}
	assertNothingLeft(t, r)
}

// With the throttling proxy in the scenario, the report carries the
// controller's requests per cycle and the proxy's delayed events.
func TestProxyFiguresInTheReport(t *testing.T) {
	scenarioFile := filepath.Join(t.TempDir(), "proxied.yaml")
	scenario := `name: proxied
seed: 5
cluster: {nodes: 2, nodeStatusUpdateFrequency: 1s}
workload:
  statefulSets: [{name: web, replicas: 2, volumesPerPod: 1}]
proxy:
  rules: [{resource: nodes, delay: {fixed: 200ms}}]
churn: {cycles: 2}
`
	if err := os.WriteFile(scenarioFile, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	r := start(t, "--scenario", scenarioFile, "--requests-by-client")
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, r.text())
	}
	rep := readReport(t, r.lastStdoutLine())
	b := rep.Builds[0]
	if b.Proxy.EventsDelayed == 0 || b.Proxy.MaxQueueDepth == 0 {
		t.Errorf("proxy figures %+v: no node event held back", b.Proxy)
	}
	if len(b.APIRequestsPerCycle) == 0 {
		t.Error("api_requests_per_cycle is empty")
	}
	if rep.Components["apiproxy"].Version == "" {
		t.Errorf("apiproxy missing from components: %v", rep.Components)
	}
	// What the churn cost (docs/performance.md): CPU of the components
	// that work in every cycle and of the harness, their peak memory, and
	// the requests of the controller (through the proxy) and the harness
	// as the API server counted them.
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "apiproxy", "harness"} {
		if b.CPUSecondsPerCycle[c] <= 0 || b.MemoryPeakMiB[c].SumMiB <= 0 {
			t.Errorf("%s: %v CPU seconds per cycle, %+v peak memory", c, b.CPUSecondsPerCycle[c], b.MemoryPeakMiB[c])
		}
	}
	if b.CPUSecondsTotalPerCycle <= 0 || b.HarnessCPUShare <= 0 || b.HarnessCPUShare >= 1 {
		t.Errorf("cpu_seconds_total_per_cycle %v, harness_cpu_share %v", b.CPUSecondsTotalPerCycle, b.HarnessCPUShare)
	}
	for _, c := range []string{"kube-controller-manager", "harness", "kubelet-sim"} {
		if b.APIRequestsPerCycleByClient[c] <= 0 {
			t.Errorf("api_requests_per_cycle_by_client[%s] = %v: %v", c, b.APIRequestsPerCycleByClient[c], b.APIRequestsPerCycleByClient)
		}
	}
}

var keptRe = regexp.MustCompile(`kubeconfig: (\S+)`)
var downRe = regexp.MustCompile(`strandlab down (\S+)`)

// keptCluster registers the teardown of the cluster a --keep run kept,
// whatever the run's outcome (a run that fails its checks keeps it too),
// and returns its kubeconfig and directory, failing t when the run printed
// none. Call it right after r.wait.
func keptCluster(t *testing.T, r *run) (kubeconfig, dir string) {
	t.Helper()
	m, d := keptRe.FindStringSubmatch(r.text()), downRe.FindStringSubmatch(r.text())
	if d != nil {
		t.Cleanup(func() { _ = exec.Command(strandlab, "down", d[1]).Run() })
	}
	if m == nil || d == nil {
		t.Fatalf("no kubeconfig path / down command printed:\n%s", r.text())
	}
	return m[1], d[1]
}

func TestKeepLeavesAUsableCluster(t *testing.T) {
	r := start(t, "--scenario", "scenarios/smoke.yaml", "--cycles", "1", "--keep")
	code := r.wait(t)
	kubeconfig, dir := keptCluster(t, r)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, r.text())
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 3 {
		t.Fatalf("list nodes through the kept kubeconfig: %d nodes, %v", len(nodes.Items), err)
	}
	pods, err := client.CoreV1().Pods("strandlab").List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("list pods: %d, %v", len(pods.Items), err)
	}
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "nodes", "-o", "name").CombinedOutput()
		if err != nil || strings.Count(string(out), "node/") != 3 {
			t.Errorf("kubectl get nodes: %v\n%s", err, out)
		}
	}

	// A healthy cluster: strandscan finds nothing and exits 0.
	if code, found, stderr := runStrandscan(t, kubeconfig); code != 0 || len(found.Findings) != 0 || found.Counts.Pods == 0 {
		t.Errorf("strandscan on a healthy cluster: exit %d, %+v\n%s", code, found, stderr)
	}

	pids := pidsOf(t, filepath.Join(dir, "processes.json"))
	if out, err := exec.Command(strandlab, "down", dir).CombinedOutput(); err != nil {
		t.Fatalf("strandlab down: %v\n%s", err, out)
	}
	for name, pid := range pids {
		if process.Alive(pid) {
			t.Errorf("%s (pid %d) still running after down", name, pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s not removed by down", dir)
	}
}

// Ctrl-C in any phase of a run: exit 130, a report that is marked
// interrupted and names the phase, and nothing left running or on disk.
// A second Ctrl-C cuts the teardown short and still leaves nothing.
func TestCtrlCInEachPhase(t *testing.T) {
	tests := []struct {
		phase, after string // interrupt once this line is printed
		twice        bool
		cycles       string
	}{
		{phase: "cluster start", after: ">> build stock: starting", cycles: "100000"},
		{phase: "workload start", after: ">> waiting for", cycles: "100000"},
		{phase: "churn", after: "cycles 1/", cycles: "100000"},
		{phase: "churn", after: "cycles 1/", cycles: "100000", twice: true},
		{phase: "teardown", after: ">> build stock: tearing down", cycles: "1"},
	}
	for _, tc := range tests {
		name := tc.phase
		if tc.twice {
			name += ", twice"
		}
		t.Run(name, func(t *testing.T) {
			r := start(t, "--scenario", "scenarios/smoke.yaml", "--cycles", tc.cycles)
			r.waitForLine(t, tc.after, 3*time.Minute)
			var pids map[string]int
			var dir string
			if tc.phase == "churn" {
				dir = clusterDir(t, r)
				pids = pidsOf(t, filepath.Join(dir, "processes.json"))
			}
			if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			if tc.twice {
				r.waitForLine(t, ">> interrupted: stopping", time.Minute)
				if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
					t.Fatal(err)
				}
			}
			if code := r.wait(t); code != 130 {
				t.Errorf("exit %d after Ctrl-C, want 130:\n%s", code, r.text())
			}
			if tc.twice && !strings.Contains(r.text(), ">> interrupted again: cutting the teardown short") {
				t.Errorf("the second Ctrl-C was not acknowledged:\n%s", r.text())
			}
			rep := readReport(t, r.lastStdoutLine())
			if !rep.Interrupted || rep.Complete || rep.InterruptedDuring != tc.phase {
				t.Errorf("report: interrupted=%v complete=%v during %q, want interrupted during %q", rep.Interrupted, rep.Complete, rep.InterruptedDuring, tc.phase)
			}
			if tc.phase == "churn" && (len(rep.Builds) != 1 || rep.Builds[0].Cycles == 0) {
				t.Errorf("partial report has no cycles: %+v", rep.Builds)
			}
			for name, pid := range pids {
				if process.Alive(pid) {
					t.Errorf("%s (pid %d) still running after Ctrl-C", name, pid)
				}
			}
			if dir != "" {
				if _, err := os.Stat(dir); !os.IsNotExist(err) {
					t.Errorf("state directory %s left after Ctrl-C", dir)
				}
			}
			assertNothingLeft(t, r)
			matches, _ := filepath.Glob(filepath.Join(os.TempDir(), "strandlab-*"))
			for _, m := range matches {
				if mk, err := ownership.ReadMarker(m, ""); err == nil && mk.Creator.PID == r.cmd.Process.Pid {
					t.Errorf("state directory %s of the interrupted run left", m)
				}
			}
		})
	}
}

// Two runs of one scenario started together into one output directory both
// complete, with distinct report directories, and latest/ holds one of
// them whole.
func TestTwoRunsAtOnce(t *testing.T) {
	out := t.TempDir()
	a := startIn(t, out, "--scenario", "scenarios/smoke.yaml", "--cycles", "3")
	b := startIn(t, out, "--scenario", "scenarios/smoke.yaml", "--cycles", "3")
	var reports []string
	for _, r := range []*run{a, b} {
		if code := r.wait(t); code != 0 {
			t.Fatalf("exit %d:\n%s", code, r.text())
		}
		rep := readReport(t, r.lastStdoutLine())
		if !rep.Complete || len(rep.Builds) != 1 || rep.Builds[0].Cycles != 3 {
			t.Errorf("%s: complete %t, builds %+v", r.lastStdoutLine(), rep.Complete, rep.Builds)
		}
		reports = append(reports, r.lastStdoutLine())
	}
	if reports[0] == reports[1] {
		t.Errorf("both runs wrote %s", reports[0])
	}
	latest := readReport(t, filepath.Join(out, "reports", "latest", "report.json"))
	if !slices.ContainsFunc(reports, func(p string) bool { return readReport(t, p).RunID == latest.RunID }) {
		t.Errorf("latest/ is run %s, neither of %v", latest.RunID, reports)
	}
}

// A harness that dies without running any deferred code (SIGKILL, or a panic
// in a goroutine) must not leave components running.
func TestKilledHarnessLeavesNothingRunning(t *testing.T) {
	r := start(t, "--scenario", "scenarios/smoke.yaml", "--cycles", "100000")
	r.waitForLine(t, ">> churning", 3*time.Minute)
	dir := clusterDir(t, r)
	pids := pidsOf(t, filepath.Join(dir, "processes.json"))
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.wait(t)
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		for _, pid := range pids {
			if process.Alive(pid) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("components still running after the harness was killed: %v", pids)
	}
	// The next run sweeps the dead harness's state directory.
	r2 := start(t, "--scenario", "scenarios/smoke.yaml", "--cycles", "1")
	if code := r2.wait(t); code != 0 {
		t.Fatalf("next run failed: %d\n%s", code, r2.text())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state directory %s of the killed harness not swept", dir)
	}
}

func TestBadInputFailsBeforeAnyCluster(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("cluster:\n  nodes: 3\n  nodez: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown scenario field", []string{"--scenario", bad}, "nodez"},
		{"unknown build", []string{"--builds", "nope"}, `build "nope"`},
		{"cycles out of range", []string{"--cycles", "2000000"}, "churn.cycles"},
		{"unknown provider", []string{"--provider", "minikube"}, "cluster.provider"},
		{"missing file", []string{"--scenario", "does/not/exist.yaml"}, "no such file"},
		{"runtime timings not a file", []string{"--runtime-timings", "does/not/exist.json"}, "--runtime-timings: open "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, tc.args...)
			if code := r.wait(t); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if !strings.Contains(r.text(), tc.want) {
				t.Errorf("error does not name %q:\n%s", tc.want, r.text())
			}
			if strings.Contains(r.text(), "starting a") {
				t.Errorf("a cluster was started for bad input:\n%s", r.text())
			}
			if entries, _ := os.ReadDir(r.output); len(entries) != 0 {
				t.Errorf("bad input wrote %v", entries)
			}
		})
	}
}

// clusterDir finds the state directory of the run's cluster: the only
// strandlab directory whose marker names this run's process as its creator.
func clusterDir(t *testing.T, r *run) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), "strandlab-*"))
	for _, m := range matches {
		if mk, err := ownership.ReadMarker(m, ""); err == nil && mk.Creator.PID == r.cmd.Process.Pid {
			return m
		}
	}
	t.Fatalf("no cluster directory created by pid %d", r.cmd.Process.Pid)
	return ""
}

func pidsOf(t *testing.T, path string) map[string]int {
	t.Helper()
	recs, err := process.ReadRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range recs {
		out[r.Name] = r.PID
	}
	if len(out) < 5 {
		t.Fatalf("pid file lists %d components: %+v", len(out), recs)
	}
	return out
}

// assertNothingLeft checks that no component process of the run survives.
func assertNothingLeft(t *testing.T, r *run) {
	t.Helper()
	out, _ := exec.Command("pgrep", "-f", r.output).Output()
	if len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("processes still running with the run's output dir in their command line: %s", out)
	}
}
