// Package render turns a report (internal/report's contract) into what
// people read: report.md, compare.md with its tests and compare.png, and
// writes a run's report files. It computes no statistics: the tests against
// the baseline are the ones report.SetTests stored in the report.
package render

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/strandlab/strandlab/internal/report"
)

// Markdown renders the report for people.
func Markdown(r *report.Report) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# strandlab report: %s\n\n", r.Scenario)
	fmt.Fprintf(&b, "- run: `%s` (%s)\n", r.RunID, r.Status())
	if r.Failure != "" {
		fmt.Fprintf(&b, "- failed: %s\n", r.Failure)
	}
	fmt.Fprintf(&b, "- provider: %s, Kubernetes %s, seed %d\n- cluster start: %.1f s\n%s\n",
		r.Provider, r.KubernetesVersion, r.Seed, r.ClusterStartSeconds, mergedMarkdown(r))
	b.WriteString("## Builds\n\n")
	b.WriteString(Table(r))
	writeCycleSteps(&b, r)
	b.WriteString("\n## Components\n\n| component | version | provenance |\n|---|---|---|\n")
	names := make([]string, 0, len(r.Components))
	for n := range r.Components {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := r.Components[n]
		fmt.Fprintf(&b, "| %s | %s | %s |\n", n, c.Version, c.Provenance)
	}
	for _, bld := range r.Builds {
		if len(bld.SafetyFindings) > 0 {
			fmt.Fprintf(&b, "\n## Safety violations: build %s\n\n| since | kind | pod | node | volume | evidence |\n|---|---|---|---|---|---|\n", bld.Name)
			for _, f := range bld.SafetyFindings {
				fmt.Fprintf(&b, "| %s | %s | %s | %s | `%s` | %s |\n", f.Since.UTC().Format("15:04:05.000"), f.Kind, f.Pod, f.Node, f.Volume,
					strings.ReplaceAll(f.Evidence, "|", "\\|"))
			}
		}
		for i, f := range bld.SafetyFindings {
			if i == maxTimelinesPerKind {
				fmt.Fprintf(&b, "\n(%d more safety violations: their timelines are in report.json)\n", len(bld.SafetyFindings)-i)
				break
			}
			fmt.Fprintf(&b, "\n## Safety violation: build %s, %s\n\npod %s on %s, volume `%s`, from %s\n\n| t (ms) | source | event |\n|---:|---|---|\n",
				bld.Name, f.Kind, f.Pod, f.Node, f.Volume, f.Since.UTC().Format("15:04:05.000"))
			writeTimeline(&b, f.Timeline)
		}
		writePhantomListings(&b, bld)
		for i, s := range bld.Strandings {
			if i == maxTimelinesPerKind {
				fmt.Fprintf(&b, "\n(%d more strandings: their timelines are in report.json)\n", len(bld.Strandings)-i)
				break
			}
			fmt.Fprintf(&b, "\n## Stranding: build %s, cycle %d%s\n\npod %s on %s, volume `%s`, detected after %.0f ms%s\n\n| t (ms) | source | event |\n|---:|---|---|\n",
				bld.Name, s.Cycle, ofRun(s.RunID), s.Pod, s.Node, s.Volume, s.DetectedAfterMS, continuesText(s))
			writeTimeline(&b, s.Timeline)
		}
	}
	return b.String()
}

// writePhantomListings lists a build's phantom listings like its safety
// violations: a table, then the first timelines.
func writePhantomListings(b *bytes.Buffer, bld report.Build) {
	if len(bld.PhantomFindings) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Phantom listings: build %s\n\n| since | node | volume | volume attachment | evidence |\n|---|---|---|---|---|\n", bld.Name)
	for _, f := range bld.PhantomFindings {
		fmt.Fprintf(b, "| %s | %s | `%s` | %s | %s |\n", f.Since.UTC().Format("15:04:05.000"), f.Node, f.Volume, f.VolumeAttachment,
			strings.ReplaceAll(f.Evidence, "|", "\\|"))
	}
	for i, f := range bld.PhantomFindings {
		if i == maxTimelinesPerKind {
			fmt.Fprintf(b, "\n(%d more phantom listings: their timelines are in report.json)\n", len(bld.PhantomFindings)-i)
			break
		}
		fmt.Fprintf(b, "\n## Phantom listing: build %s\n\nnode %s, volume `%s`, from %s\n\n| t (ms) | source | event |\n|---:|---|---|\n",
			bld.Name, f.Node, f.Volume, f.Since.UTC().Format("15:04:05.000"))
		writeTimeline(b, f.Timeline)
	}
}

// maxTimelinesPerKind bounds report.md on long runs; report.json has all.
const maxTimelinesPerKind = 10

func writeTimeline(b *bytes.Buffer, entries []report.TimelineEntry) {
	for _, e := range entries {
		fmt.Fprintf(b, "| %.0f | %s | %s |\n", e.TMS, e.Source, strings.ReplaceAll(e.Event, "|", "\\|"))
	}
}

// writeCycleSteps tables where the cycles' time went, for the builds that
// have the steps.
func writeCycleSteps(b *bytes.Buffer, r *report.Report) {
	header := false
	for _, bld := range r.Builds {
		st := bld.CycleStepsMS
		if st == nil {
			continue
		}
		if !header {
			b.WriteString("\n## Where a cycle's time goes\n\nFrom the delete to the replacement Running, in the harness's sightings (p50 / p99 ms, " +
				"over the cycles that reached Running): the old pod's termination and the StatefulSet controller, the scheduler, then the node.\n\n" +
				"| build | cycles | delete → replacement | → bound to a node | → Running | delete → Running |\n|---|---:|---|---|---|---|\n")
			header = true
		}
		fmt.Fprintf(b, "| %s | %d | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f |\n", bld.Name, st.Cycles,
			st.ToReplacement.P50, st.ToReplacement.P99, st.ToBound.P50, st.ToBound.P99, st.ToRunning.P50, st.ToRunning.P99,
			bld.DeleteToRunningMS.P50, bld.DeleteToRunningMS.P99)
	}
	header = false
	for _, bld := range r.Builds {
		d := bld.DetachMS
		if d == nil {
			continue
		}
		if !header {
			b.WriteString("\n## When the controller detached\n\nOver the cycles whose deleted pod's volume was detached from its old node within the cycle " +
				"(p50 / p99 ms, the harness's watches): from the delete, and from the volume's last listing in the node's status.volumesAttached " +
				"(the add patch). A stale node informer can hide a detach that comes sooner after the listing than its lag.\n\n" +
				"| build | cycles with a detach | delete → detach | with a listing | listed → detach |\n|---|---:|---|---:|---|\n")
			header = true
		}
		fmt.Fprintf(b, "| %s | %d | %.0f / %.0f | %d | %.0f / %.0f |\n", bld.Name, d.Cycles, d.DeleteToDetach.P50, d.DeleteToDetach.P99,
			d.ListedCycles, d.ListedToDetach.P50, d.ListedToDetach.P99)
	}
	writeRuntimeOps(b, r)
}

// writeRuntimeOps tables the container runtime's operations of the builds
// that read them (real kubelets).
func writeRuntimeOps(b *bytes.Buffer, r *report.Report) {
	header := false
	for _, bld := range r.Builds {
		if len(bld.RuntimeOps) == 0 {
			continue
		}
		if !header {
			b.WriteString("\n## The container runtime\n\nThe nodes' CRI calls during the churn, from the kubelets' own histogram " +
				"(kubelet_runtime_operations_duration_seconds), and their PLEG's relists (pleg_relist: kubelet_pleg_relist_duration_seconds; " +
				"pleg_relist_interval, from one relist's start to the next's: kubelet_pleg_relist_interval_seconds, shown, not drawn: kubelet-sim starts a relist a period after the last one ended); p50 / p90 ms read inside the buckets: " +
				"what kubelet-sim draws from (`strandlab runtime-timings`), with the kubelets' own API requests by verb " +
				"(api_*: rest_client_request_duration_seconds) and their CSI volume calls (csi_nodestagevolume, csi_nodepublishvolume, csi_nodeunpublishvolume, " +
				"csi_nodeunstagevolume: csi_operations_seconds). Beside them, read and not drawn: the other CSI calls (csi_*) " +
				"and volume operations (storage_*: storage_operation_duration_seconds), whose first bucket ends at 100 ms.\n\n| build | operation | count | p50 / p90 ms |\n|---|---|---:|---|\n")
			header = true
		}
		ops := slices.Sorted(maps.Keys(bld.RuntimeOps))
		for _, op := range ops {
			o := bld.RuntimeOps[op]
			fmt.Fprintf(b, "| %s | %s | %d | %.0f / %.0f |\n", bld.Name, op, o.Count, o.P50MS, o.P90MS)
		}
	}
}

// Table is the per-build comparison as a Markdown table (also printed on
// the terminal at the end of a run).
func Table(r *report.Report) string {
	var b bytes.Buffer
	b.WriteString("| build | cycles | not running | stranded | episodes | rate (95% CI) | 95% CI, rounds as unit | safety | cycles/s | to-running p50/p99 ms | same node |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---|---:|---:|---|---:|\n")
	for _, bld := range r.Builds {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %.4f [%.4f, %.4f] | %s | %d | %.2f | %s / %s | %.2f |\n",
			bld.Name, bld.Cycles, bld.CyclesNotRunning, bld.Stranded, report.Episodes(bld), bld.StrandedRate, bld.StrandedRateCI95[0], bld.StrandedRateCI95[1],
			intervalText(bld.StrandedRateCI95Rounds), bld.SafetyViolations, bld.CyclesPerSecond,
			runningMS(bld, bld.CreatedToRunningMS.P50), runningMS(bld, bld.CreatedToRunningMS.P99), bld.PinningSameNodeRatio)
	}
	return b.String()
}

// intervalText is an optional interval as "[low, high]", "–" when absent.
func intervalText(ci *[2]float64) string {
	if ci == nil {
		return "–"
	}
	return fmt.Sprintf("[%.4f, %.4f]", finite(ci[0]), finite(ci[1]))
}

// continuesText is report.md's note on a stranding that continues an
// episode begun in an earlier cycle.
func continuesText(s report.Stranding) string {
	if s.EpisodeCycle == s.Cycle {
		return ""
	}
	return fmt.Sprintf("; continues the stranding episode of cycle %d (the volume was not listed on the node in between)", s.EpisodeCycle)
}

// mergedMarkdown is the lines of report.md and compare.md that say a report
// is merged: the runs and seeds pooled and the notes.
func mergedMarkdown(r *report.Report) string {
	if len(r.MergedFrom) == 0 {
		return ""
	}
	var b strings.Builder
	seeds := make([]string, len(r.Seeds))
	for i, s := range r.Seeds {
		seeds[i] = fmt.Sprint(s)
	}
	fmt.Fprintf(&b, "- merged from %d runs: `%s`; seeds %s\n", len(r.MergedFrom), strings.Join(r.MergedFrom, "`, `"), strings.Join(seeds, ", "))
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- note: %s\n", n)
	}
	return b.String()
}

// ofRun names a merged report's stranding's run in report.md's heading.
func ofRun(runID string) string {
	if runID == "" {
		return ""
	}
	return ", run `" + runID + "`"
}
