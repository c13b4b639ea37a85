package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/runtimeops"
)

// kindReport is a kind run whose churn saw n of each pod operation, n
// status writes (api_patch), n NodeStageVolume calls (drawn) and n
// NodeGetCapabilities calls (read, not drawn),
// each in the bucket of at most bound seconds.
func kindReport(id string, n uint64, bound int) *report.Report {
	ops := runtimeops.Ops{}
	for _, op := range append([]string{runtimeops.APIPrefix + "patch", "csi_nodestagevolume", "csi_nodegetcapabilities"}, runtimeops.PodOperations...) {
		h := runtimeops.Histogram{Bounds: []float64{0.1, 1, 10}, Counts: make([]uint64, 4)}
		h.Counts[bound] = n
		ops[op] = h
	}
	b := report.Build{Name: "stock"}
	report.AddRuntimeOps(&b, ops)
	return &report.Report{RunID: id, Provider: "kind", KubernetesVersion: "v1.37.2", Builds: []report.Build{b}}
}

// The reference's runs so far are pooled into the file the next local run
// draws from: a file kubelet-sim accepts, naming the runs, with every
// run's operations counted.
func TestWriteReferenceTimingsPoolsTheKindRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calibration", "runtime-timings.json")
	if err := writeReferenceTimings(path, []*report.Report{kindReport("kind-1", 3, 0), kindReport("kind-2", 2, 2)}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := runtimeops.DecodeTimings(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := tm.Operations[runtimeops.StopPodSandbox].Counts; got[0] != 3 || got[2] != 2 {
		t.Errorf("stop_podsandbox counts %v, want 3 in the first bucket and 2 in the third", got)
	}
	if got := tm.Operations[runtimeops.APIPrefix+"patch"].Total(); got != 5 {
		t.Errorf("api_patch: %d requests pooled, want 5", got)
	}
	if got := tm.Operations["csi_nodestagevolume"].Total(); got != 5 {
		t.Errorf("csi_nodestagevolume: %d calls pooled, want 5", got)
	}
	if _, ok := tm.Operations["csi_nodegetcapabilities"]; ok {
		t.Error("csi_nodegetcapabilities pooled: nothing draws it")
	}
	for _, want := range []string{"kind kubelets v1.37.2", "kind-1, kind-2", "run_podsandbox 5", "rest_client_request_duration_seconds", "api_patch 5",
		"csi_operations_seconds", "csi_nodestagevolume 5"} {
		if !strings.Contains(tm.Source, want) {
			t.Errorf("source %q lacks %q", tm.Source, want)
		}
	}

	// A run without runtime operations (not on kind) is refused, and the
	// file the last local run drew from is left as it was.
	local := &report.Report{RunID: "local-1", Provider: "local", Builds: []report.Build{{Name: "stock"}}}
	err = writeReferenceTimings(path, []*report.Report{kindReport("kind-3", 1, 1), local})
	if err == nil || !strings.Contains(err.Error(), "--runtime-timings reference: run local-1: no build has runtime_ops") {
		t.Errorf("err %v, want one naming the run without runtime_ops", err)
	}
	if again, _ := os.ReadFile(path); string(again) != string(data) {
		t.Error("a refused pool changed the timings file")
	}
}

// --runtime-timings is checked before anything runs.
func TestCalibrateRuntimeTimingsFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"reference needs kind as the reference", []string{"--scenario", "scenarios/smoke.yaml", "--providers", "kind,local", "--runtime-timings", "reference"},
			"--runtime-timings reference: the local provider draws from the kind runs' timings: --providers local,kind, not kind,local"},
		{"not with written reports", []string{"--reports", "x", "--runtime-timings", "reference"},
			"--scenario, --seeds, --builds, --cycles and --runtime-timings do not apply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := calibrateCommand()
			cmd.SetArgs(tc.args)
			cmd.SetOut(new(strings.Builder))
			cmd.SetErr(new(strings.Builder))
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}
