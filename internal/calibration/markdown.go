package calibration

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// Markdown is calibration.md: the criteria, the rates, the timings and
// what they rest on. command is how the table was made.
func Markdown(t *Table, command string) string {
	a, b := t.Providers[0], t.Providers[1]
	var w bytes.Buffer
	fmt.Fprintf(&w, "# Calibration: %s against %s\n\n", a, b)
	if command != "" {
		fmt.Fprintf(&w, "```sh\n%s\n```\n\n", command)
	}
	fmt.Fprintf(&w, "%s is the reference. A class of events is compared where each provider saw at least %d of it; "+
		"the rates agree within a factor of %.1f. The exact test is two-sided (Fisher); a large p is not agreement. "+
		"A timing's medians agree within %.0f%% of %s's median or %v, whichever is larger, with a Kolmogorov–Smirnov distance of at most %.2f.\n",
		b, MinEvents, RateFactor, 100*MedianShare, b, MedianSlack, MaxKSDistance)
	w.WriteString("\n## Rates\n\n")
	fmt.Fprintf(&w, "| profile | build | class | %s | %s | %s / %s | p (two-sided) | verdict |\n|---|---|---|---|---|---:|---:|---|\n", a, b, a, b)
	for _, r := range t.Rates {
		ratio := "–"
		if r.Ratio != nil {
			ratio = fmt.Sprintf("%.2f", *r.Ratio)
		}
		fmt.Fprintf(&w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Scenario, r.Build, r.Class,
			sideText(r.Sides[0], r.Unit), sideText(r.Sides[1], r.Unit), ratio, pText(r.P), r.Verdict)
	}
	w.WriteString("\n## Timings\n\nMilliseconds, p50 / p90 (samples), from the harness's watches: the pod's delete to the replacement Running, " +
		"split into the delete to the replacement's creation (the old pod's end, the StatefulSet controller) and the replacement's binding to it Running (attach, mount, start); " +
		"the old pod's end as the delete to its terminal phase (containers stopped, status written) and to its removal (the kubelet's final delete, after the volumes' teardown); " +
		"the delete to the old node's kubelet dropping the volume from status.volumesInUse (released: the controller detaches only after it) " +
		"and to the detach request of the volume on the old node, that split at the release (old pod terminal → released: the kubelet's teardown and node status; released → detach: the controller), " +
		"and the old pod's end over the cycles with a detach only (the rates' \"cycles with a detach\": which cycles detach can differ between the providers, and delete → detach rests on those alone); " +
		"and from the volume's last listing in the node's status.volumesAttached (the add patch) to that detach.\n\n")
	fmt.Fprintf(&w, "| profile | build | timing | %s | %s | median %s − %s | KS distance | KS p | verdict |\n|---|---|---|---|---|---:|---:|---:|---|\n", a, b, a, b)
	for _, r := range t.Timings {
		diff, d, p := "–", "–", "–"
		if r.Verdict != NoSamples {
			diff, d, p = fmt.Sprintf("%+.0f", r.MedianDiffMS), fmt.Sprintf("%.2f", r.KSDistance), pText(r.KSP)
		}
		fmt.Fprintf(&w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Scenario, r.Build, r.Measure,
			timingText(r.Sides[0]), timingText(r.Sides[1]), diff, d, p, r.Verdict)
	}
	w.WriteString("\n## What the rows rest on\n\n| profile | provider | runs | seeds | cycles per build | incomplete runs |\n|---|---|---:|---|---|---:|\n")
	for _, s := range t.Sources {
		var cycles []string
		for _, build := range sortedKeys(s.Cycles) {
			cycles = append(cycles, fmt.Sprintf("%s %d", build, s.Cycles[build]))
		}
		fmt.Fprintf(&w, "| %s | %s | %d | %s | %s | %d |\n", s.Scenario, s.Provider, s.Runs, seedsText(s.Seeds), strings.Join(cycles, ", "), s.Incomplete)
	}
	return w.String()
}

func sideText(s Side, unit string) string {
	return fmt.Sprintf("%d / %d %s (%.3g [%.3g, %.3g])", s.Events, s.Trials, unit, s.Rate, s.CI95[0], s.CI95[1])
}

func timingText(s TimingSide) string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f / %.0f (%d)", s.P50MS, s.P90MS, s.N)
}

func pText(p float64) string {
	if p < 0.001 {
		return fmt.Sprintf("%.1e", p)
	}
	return fmt.Sprintf("%.3f", p)
}

// seedsText is a compact list: 1–10 for a run of consecutive seeds.
func seedsText(seeds []int64) string {
	var parts []string
	for i := 0; i < len(seeds); {
		j := i
		for j+1 < len(seeds) && seeds[j+1] == seeds[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, fmt.Sprint(seeds[i]))
		case j == i+1:
			parts = append(parts, fmt.Sprint(seeds[i]), fmt.Sprint(seeds[j]))
		default:
			parts = append(parts, fmt.Sprintf("%d–%d", seeds[i], seeds[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
