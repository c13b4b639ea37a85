package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/runtimeops"
)

// runtimeTimingsCommand is `strandlab runtime-timings`: the container
// runtime's operation timings of kind reports pooled into the file
// kubelet-sim draws its runtime from (docs/kubelet-sim.md).
func runtimeTimingsCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "runtime-timings REPORT...",
		Short: "Pool the container runtime timings of kind reports into kubelet-sim's timings file",
		Long: `Pool the runtime_ops of reports run with real kubelets (the kind provider
reads each kubelet's kubelet_runtime_operations_duration_seconds around the
churn) into the JSON file kubelet-sim draws its simulated container runtime
from: the histograms of run_podsandbox, create_container, start_container,
stop_container and stop_podsandbox (the kills' stops alone: the container
GC's second stop of each sandbox, which returns at once, is taken out down
to one stop per sandbox started), reading a pod back, the PLEG's
relists and the kubelets' API requests by HTTP method (api_get, api_patch,
...: kubelet-sim holds its own requests back to them) and their CSI volume
calls (csi_nodestagevolume, csi_nodepublishvolume, csi_nodeunpublishvolume,
csi_nodeunstagevolume: kubelet-sim holds its own calls to them) where the
reports have them, and a source line naming the reports, their provider,
Kubernetes version and date. Each argument is a report
directory or a report.json. Every build of every report is pooled.

Written to --output (default: standard output). The built-in timings are
tools/upstream/kubelet-sim/containerruntime/timings.json; kubelet-sim reads
another file with --runtime-timings FILE.

Refused, with nothing written (exit 1): a report without runtime_ops (not
run on kind, or from before strandlab read them), reports whose histograms
are bucketed differently, and a pool missing one of the operations.`,
		Example: `  strandlab runtime-timings --output tools/upstream/kubelet-sim/containerruntime/timings.json _output/reports/20261202-*-soak-control-kind`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := pooledTimings(args)
			if err != nil {
				return err
			}
			data, err := json.MarshalIndent(t, "", "  ")
			if err != nil {
				return err
			}
			data = append(data, '\n')
			if output == "" {
				_, err = os.Stdout.Write(data)
				return err
			}
			return report.WriteFileAtomic(output, data)
		},
	}
	cmd.Flags().StringVar(&output, "output", "", "file to write (default: standard output)")
	return cmd
}

// pooledTimings reads the reports and pools their builds' runtime
// operations.
func pooledTimings(paths []string) (runtimeops.Timings, error) {
	reports := make([]*report.Report, 0, len(paths))
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			p = filepath.Join(p, "report.json")
		}
		r, err := report.Read(p)
		if err != nil {
			return runtimeops.Timings{}, err
		}
		reports = append(reports, r)
	}
	return poolTimings(reports)
}

// poolTimings pools the runtime operations of every build of the reports
// (each must have some) into the timings kubelet-sim draws from, with a
// source naming the runs.
func poolTimings(reports []*report.Report) (runtimeops.Timings, error) {
	total := runtimeops.Ops{}
	var runs, providers, versions []string
	for _, r := range reports {
		seen := false
		for _, b := range r.Builds {
			if len(b.RuntimeOps) == 0 {
				continue
			}
			seen = true
			var err error
			if total, err = runtimeops.Add(total, report.RuntimeOpsHistograms(b)); err != nil {
				return runtimeops.Timings{}, fmt.Errorf("run %s: build %s: %w", r.RunID, b.Name, err)
			}
		}
		if !seen {
			return runtimeops.Timings{}, fmt.Errorf("run %s: no build has runtime_ops (they come from real kubelets: run it with --provider kind)", r.RunID)
		}
		runs = append(runs, r.RunID)
		providers = appendNew(providers, r.Provider)
		versions = appendNew(versions, r.KubernetesVersion)
	}
	counts := make([]string, 0, len(runtimeops.PodOperations)+2)
	for _, op := range runtimeops.PodOperations {
		counts = append(counts, fmt.Sprintf("%s %d", op, total[op].Total()))
	}
	alsoRead := ""
	if total[runtimeops.PLEGRelist].Total() > 0 && total[runtimeops.PLEGRelistInterval].Total() > 0 {
		// kubelet-sim draws its PLEG's relists only when both are there.
		alsoRead = " and kubelet_pleg_relist_{duration,interval}_seconds"
		for _, op := range []string{runtimeops.PLEGRelist, runtimeops.PLEGRelistInterval} {
			counts = append(counts, fmt.Sprintf("%s %d", op, total[op].Total()))
		}
	}
	var apiOps []string
	for op, h := range total {
		if strings.HasPrefix(op, runtimeops.APIPrefix) && h.Total() > 0 {
			apiOps = append(apiOps, op)
		}
	}
	if len(apiOps) > 0 {
		// kubelet-sim holds its API requests back to these times.
		alsoRead += " and rest_client_request_duration_seconds"
		slices.Sort(apiOps)
		for _, op := range apiOps {
			counts = append(counts, fmt.Sprintf("%s %d", op, total[op].Total()))
		}
	}
	var csiOps []string
	for _, op := range runtimeops.CSIVolumeOperations {
		if total[op].Total() > 0 {
			csiOps = append(csiOps, op)
		}
	}
	if len(csiOps) > 0 {
		// kubelet-sim holds its CSI volume calls to these times.
		alsoRead += " and csi_operations_seconds"
		for _, op := range csiOps {
			counts = append(counts, fmt.Sprintf("%s %d", op, total[op].Total()))
		}
	}
	source := fmt.Sprintf("%s kubelets %s (kubelet_runtime_operations_duration_seconds%s during the churn of runs %s; %s)",
		strings.Join(providers, ", "), strings.Join(versions, ", "), alsoRead, strings.Join(runs, ", "), strings.Join(counts, ", "))
	return runtimeops.NewTimings(source, total)
}

func appendNew(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
