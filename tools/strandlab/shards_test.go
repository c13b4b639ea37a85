package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/strandlab/strandlab/internal/scenario"
	"github.com/strandlab/strandlab/internal/shards"
)

// runShards runs `strandlab shards args...` and returns what it printed.
func runShards(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := shardsCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SilenceUsage = true
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// The matrix the workflows fan out to: one shard per index, seeds distinct.
func TestShardsCommandRendersDistinctSeeds(t *testing.T) {
	for _, n := range []int{1, 2, 8, 64, shards.MaxShards} {
		for _, first := range []int64{0, 20261129} {
			t.Run(fmt.Sprintf("%d shards from seed %d", n, first), func(t *testing.T) {
				out, err := runShards(t, "--shards", fmt.Sprint(n), "--first-seed", fmt.Sprint(first))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
					t.Errorf("not one line (a $GITHUB_OUTPUT value is one line): %q", out)
				}
				var m struct {
					Include []struct {
						Shard *int   `json:"shard"`
						Seed  *int64 `json:"seed"`
					} `json:"include"`
				}
				dec := json.NewDecoder(strings.NewReader(out))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&m); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				if len(m.Include) != n {
					t.Fatalf("%d shards, want %d", len(m.Include), n)
				}
				seeds := map[int64]int{}
				for i, s := range m.Include {
					if s.Shard == nil || s.Seed == nil {
						t.Fatalf("include[%d] = %s: shard and seed are required", i, out)
					}
					if *s.Shard != i {
						t.Errorf("include[%d].shard = %d", i, *s.Shard)
					}
					if j, dup := seeds[*s.Seed]; dup {
						t.Errorf("shards %d and %d both take seed %d", j, i, *s.Seed)
					}
					seeds[*s.Seed] = i
				}
				if *m.Include[0].Seed != first {
					t.Errorf("shard 0 takes seed %d, want --first-seed %d", *m.Include[0].Seed, first)
				}
			})
		}
	}
}

func TestShardsCommandRefusesNamingTheFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no --shards", nil, "--shards: 0 is below 1"},
		{"negative", []string{"--shards", "-1"}, "--shards: -1 is below 1"},
		{"more than GitHub allows", []string{"--shards", "300"}, "--shards: 300 is more than the 256 jobs GitHub Actions allows in one matrix"},
		{"seeds past int64", []string{"--shards", "3", "--first-seed", "9223372036854775807"}, "--first-seed: 9223372036854775807 + 3 shards overflows"},
		{"an argument", []string{"--shards", "2", "extra"}, "unknown command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runShards(t, tc.args...)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if out != "" {
				t.Errorf("printed %q on error", out)
			}
		})
	}
}

// workflow is the part of a GitHub Actions workflow file the tests read.
// sigs.k8s.io/yaml reads YAML 1.1, where the key `on` is the boolean true:
// the triggers are under "true".
type workflow struct {
	On   map[string]json.RawMessage `json:"true"`
	Jobs map[string]job             `json:"jobs"`
}

type job struct {
	Uses     string            `json:"uses"`
	With     map[string]any    `json:"with"`
	Needs    needs             `json:"needs"`
	If       string            `json:"if"`
	Outputs  map[string]string `json:"outputs"`
	Strategy struct {
		FailFast *bool `json:"fail-fast"`
		Matrix   any   `json:"matrix"`
	} `json:"strategy"`
	Steps []step `json:"steps"`
}

type step struct {
	ID   string            `json:"id"`
	Uses string            `json:"uses"`
	Run  string            `json:"run"`
	If   string            `json:"if"`
	With map[string]any    `json:"with"`
	Env  map[string]string `json:"env"`
}

// needs is a job's needs: one job name or a list.
type needs []string

func (n *needs) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*n = needs{one}
		return nil
	}
	return json.Unmarshal(data, (*[]string)(n))
}

const workflowsDir = "../../.github/workflows"

func readWorkflow(t *testing.T, name string) workflow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(workflowsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	if err := yaml.Unmarshal(data, &w); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(w.Jobs) == 0 {
		t.Fatalf("%s: no jobs", name)
	}
	return w
}

// jobWith is the name of the one job of w that has a step whose run script
// matches re ("" and a failed test when there is not exactly one).
func jobWith(t *testing.T, file string, w workflow, re *regexp.Regexp) string {
	t.Helper()
	var found []string
	for name, j := range w.Jobs {
		if slices.ContainsFunc(j.Steps, func(s step) bool { return re.MatchString(s.Run) }) {
			found = append(found, name)
		}
	}
	if len(found) != 1 {
		t.Errorf("%s: jobs running %s: %v, want one", file, re, found)
		return ""
	}
	return found[0]
}

var (
	rendersMatrix = regexp.MustCompile(`strandlab"? shards --shards "\$SHARDS"`)
	runsShard     = regexp.MustCompile(`make e2e .*SEED="\$SEED"`)
	mergesChecked = regexp.MustCompile(`strandlab"? merge --check --sequential --scenario "\$SCENARIO"`)
	fromSetup     = regexp.MustCompile(`^\$\{\{ fromJSON\(needs\.([a-z-]+)\.outputs\.([a-z-]+)\) \}\}$`)
	stepOutput    = regexp.MustCompile(`^\$\{\{ steps\.([a-z-]+)\.outputs\.([a-z-]+) \}\}$`)
)

// checkShardsWorkflow checks the fan-out of a reusable workflow: a setup
// job renders the matrix with `strandlab shards` into an output, the shard
// job's matrix is that output and a run per shard with its seed, and the
// merge job needs the shard job and runs `strandlab merge --check`.
func checkShardsWorkflow(t *testing.T, file string) {
	w := readWorkflow(t, file)
	var call struct {
		Inputs map[string]struct {
			Type string `json:"type"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal(w.On["workflow_call"], &call); err != nil {
		t.Fatalf("%s: on.workflow_call: %v", file, err)
	}
	for _, in := range []string{"scenario", "builds", "cycles", "shards"} {
		if _, ok := call.Inputs[in]; !ok {
			t.Errorf("%s: no input %q", file, in)
		}
	}
	setup := jobWith(t, file, w, rendersMatrix)
	shard := jobWith(t, file, w, runsShard)
	merge := jobWith(t, file, w, mergesChecked)
	if setup == "" || shard == "" || merge == "" {
		return
	}

	// setup: outputs.matrix is the output of the step that renders it.
	m := stepOutput.FindStringSubmatch(w.Jobs[setup].Outputs["matrix"])
	if m == nil {
		t.Fatalf("%s: jobs.%s.outputs.matrix = %q, want a step's output", file, setup, w.Jobs[setup].Outputs["matrix"])
	}
	i := slices.IndexFunc(w.Jobs[setup].Steps, func(s step) bool { return s.ID == m[1] })
	if i < 0 || !rendersMatrix.MatchString(w.Jobs[setup].Steps[i].Run) ||
		!strings.Contains(w.Jobs[setup].Steps[i].Run, m[2]+"=$matrix") {
		t.Errorf("%s: jobs.%s.outputs.matrix is not the output of the step running strandlab shards", file, setup)
	}

	// shard: the matrix comes from the setup job's output, every shard runs.
	sj := w.Jobs[shard]
	matrix, _ := sj.Strategy.Matrix.(string)
	if f := fromSetup.FindStringSubmatch(matrix); f == nil || f[1] != setup || f[2] != "matrix" {
		t.Errorf("%s: jobs.%s.strategy.matrix = %v, want ${{ fromJSON(needs.%s.outputs.matrix) }}", file, shard, sj.Strategy.Matrix, setup)
	}
	if !slices.Contains(sj.Needs, setup) {
		t.Errorf("%s: jobs.%s.needs = %v, want %s (its matrix is that job's output)", file, shard, sj.Needs, setup)
	}
	if sj.Strategy.FailFast == nil || *sj.Strategy.FailFast {
		t.Errorf("%s: jobs.%s.strategy.fail-fast is not false: one failed shard would cancel the others", file, shard)
	}
	run := sj.Steps[slices.IndexFunc(sj.Steps, func(s step) bool { return runsShard.MatchString(s.Run) })]
	if run.Env["SEED"] != "${{ matrix.seed }}" || !strings.Contains(run.Run, "RUN_ID_SUFFIX=") {
		t.Errorf("%s: the shard's run takes SEED %q (want the matrix's seed) and needs a RUN_ID_SUFFIX: %s", file, run.Env["SEED"], run.Run)
	}
	upload := slices.IndexFunc(sj.Steps, func(s step) bool { return strings.HasPrefix(s.Uses, "actions/upload-artifact@") })
	if upload < 0 || !strings.Contains(fmt.Sprint(sj.Steps[upload].With["name"]), "${{ matrix.shard }}") ||
		!strings.Contains(sj.Steps[upload].If, "always()") {
		t.Errorf("%s: jobs.%s uploads no report per shard (artifact named by matrix.shard, uploaded always())", file, shard)
	}

	// merge: after every shard, whatever they did, with their reports.
	mj := w.Jobs[merge]
	if !slices.Contains(mj.Needs, shard) {
		t.Errorf("%s: jobs.%s.needs = %v, want %s: the merge must wait for all shards", file, merge, mj.Needs, shard)
	}
	if !strings.Contains(mj.If, "!cancelled()") && !strings.Contains(mj.If, "always()") {
		t.Errorf("%s: jobs.%s.if = %q: a failed shard would skip the merge of the others", file, merge, mj.If)
	}
	download := slices.IndexFunc(mj.Steps, func(s step) bool { return strings.HasPrefix(s.Uses, "actions/download-artifact@") })
	if download < 0 {
		t.Fatalf("%s: jobs.%s downloads no artifact", file, merge)
	}
	pattern := fmt.Sprint(mj.Steps[download].With["pattern"])
	name := strings.Replace(fmt.Sprint(sj.Steps[upload].With["name"]), "${{ matrix.shard }}", "*", 1)
	if pattern != name {
		t.Errorf("%s: the merge downloads %q, the shards upload %q", file, pattern, name)
	}
	if !slices.ContainsFunc(mj.Steps, func(s step) bool {
		return strings.Contains(s.Run, "GITHUB_STEP_SUMMARY") && strings.Contains(s.Run, "compare.md")
	}) {
		t.Errorf("%s: jobs.%s writes no compare.md to the job summary", file, merge)
	}
}

// callerOf is the input values w passes to shards.yml (failing the test
// when no job, or more than one, calls it).
func callerOf(t *testing.T, file string, w workflow) map[string]any {
	t.Helper()
	callers := callersOf(t, file, w)
	if len(callers) != 1 {
		t.Fatalf("%s: %d jobs use ./.github/workflows/shards.yml, want one", file, len(callers))
	}
	return callers[0]
}

// callersOf is the input values of every job of w that calls shards.yml
// (failing the test when none does).
func callersOf(t *testing.T, file string, w workflow) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, j := range w.Jobs {
		if j.Uses == "./.github/workflows/shards.yml" {
			out = append(out, j.With)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no job uses ./.github/workflows/shards.yml", file)
	}
	return out
}

func TestWorkflowsFanOutAndMerge(t *testing.T) {
	checkShardsWorkflow(t, "shards.yml")

	t.Run("nightly", func(t *testing.T) {
		w := readWorkflow(t, "nightly.yml")
		for _, trigger := range []string{"schedule", "workflow_dispatch"} {
			if _, ok := w.On[trigger]; !ok {
				t.Errorf("nightly.yml: not run on %s", trigger)
			}
		}
		// Every shards.yml caller: the local soak, whose stock rate is
		// banded so that a lost reproduction fails the night, and the kind
		// soak, whose fix is held to 0 while stock's rate on real kubelets
		// is being measured (scenarios/soak-kind.yaml).
		for _, with := range callersOf(t, "nightly.yml", w) {
			provider := fmt.Sprint(with["provider"])
			if with["provider"] == nil {
				provider = "local"
			}
			n, ok := with["shards"].(float64)
			if !ok || n < 2 || n > shards.MaxShards {
				t.Errorf("nightly.yml: shards %v, want 2 to %d", with["shards"], shards.MaxShards)
			}
			if _, err := runShards(t, "--shards", fmt.Sprint(with["shards"])); err != nil {
				t.Errorf("nightly.yml: %v", err)
			}
			if with["builds"] != "stock,fix" {
				t.Errorf("nightly.yml: builds %v, want stock,fix", with["builds"])
			}
			// The check the nightly fails on is the scenario's expect bands.
			sc, err := scenario.Load(filepath.Join("../..", fmt.Sprint(with["scenario"])))
			if err != nil {
				t.Fatal(err)
			}
			stock, okStock := sc.BandFor("stock")
			fix, okFix := sc.BandFor("fix")
			if provider == "local" && (!okStock || stock.StrandedRate.Min == nil || *stock.StrandedRate.Min <= 0 || stock.StrandedRate.Max == nil) {
				t.Errorf("%s: no band on stock's stranded rate with a lower bound above 0 (expect.stock.strandedRate)", with["scenario"])
			}
			if !okFix || fix.Stranded.Max == nil || *fix.Stranded.Max != 0 || fix.SafetyViolations.Max == nil || *fix.SafetyViolations.Max != 0 {
				t.Errorf("%s: fix is not held to 0 stranded, 0 safety violations", with["scenario"])
			}
		}
		if providers := callersOf(t, "nightly.yml", w); len(providers) != 2 {
			t.Errorf("nightly.yml: %d shards.yml callers, want the local soak and the kind soak", len(providers))
		}
		kind := jobWith(t, "nightly.yml", w, regexp.MustCompile(`make e2e PROVIDER=kind .*CHECK=1`))
		if kind == "" {
			t.Error("nightly.yml: no kind job held to its scenario's bands")
		}
	})

	t.Run("compare", func(t *testing.T) {
		w := readWorkflow(t, "compare.yml")
		var dispatch struct {
			Inputs map[string]json.RawMessage `json:"inputs"`
		}
		if err := json.Unmarshal(w.On["workflow_dispatch"], &dispatch); err != nil {
			t.Fatalf("compare.yml: on.workflow_dispatch: %v", err)
		}
		with := callerOf(t, "compare.yml", w)
		for _, in := range []string{"scenario", "builds", "cycles", "shards"} {
			if _, ok := dispatch.Inputs[in]; !ok {
				t.Errorf("compare.yml: no workflow_dispatch input %q", in)
			}
			if with[in] != "${{ inputs."+in+" }}" {
				t.Errorf("compare.yml: passes %s = %v, want its input", in, with[in])
			}
		}
	})
}
