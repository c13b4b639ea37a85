package render

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/stats"
)

// Verdicts is what the console prints after a run's table: each build's
// verdict against the baseline in a sentence, the sequential one for a run
// until a verdict (and why it stopped), otherwise the fixed-cycles test;
// "" when there is nothing to test.
func Verdicts(r *report.Report) string {
	var b bytes.Buffer
	if s := r.Sequential; s != nil {
		for _, t := range s.Builds {
			fmt.Fprintf(&b, "verdict: %s\n", t.Strandings.Verdict)
			fmt.Fprintf(&b, "  safety: %s\n", t.Safety.Verdict)
		}
		if s.Stopped != "" {
			fmt.Fprintf(&b, "stopped: %s\n", s.Stopped)
		}
		return b.String()
	}
	base, ok := baselineOf(r)
	if !ok {
		return ""
	}
	for _, x := range r.Builds {
		if x.Name == report.Baseline || x.VersusBaseline == nil {
			continue
		}
		m := report.EpisodeMeasure
		fmt.Fprintf(&b, "verdict: %s: %d of %d against %d of %d %s (Fisher's exact, one-sided)", x.VersusBaseline.Verdict,
			m.Count(x), m.Trials(x), m.Count(base), m.Trials(base), m.Noun)
		if strings.HasPrefix(x.VersusBaseline.Verdict, "no evidence") && m.Trials(x) > 0 && m.Trials(base) > 0 {
			// What a run without a verdict can still say: how high either
			// rate could be.
			_, hx := stats.Wilson95(m.Count(x), m.Trials(x))
			_, hb := stats.Wilson95(m.Count(base), m.Trials(base))
			fmt.Fprintf(&b, "; what it excludes: %s's rate above %.3g and %s's above %.3g per cycle (95%% upper bounds)", x.Name, hx, base.Name, hb)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func baselineOf(r *report.Report) (report.Build, bool) {
	for _, x := range r.Builds {
		if x.Name == report.Baseline {
			return x, true
		}
	}
	return report.Build{}, false
}

// writeSequential writes compare.md's "Until a verdict" for a run until a
// verdict: the design, why it stopped, and each build's two tests look by
// look.
func writeSequential(b *bytes.Buffer, r *report.Report) {
	s := r.Sequential
	if s == nil {
		return
	}
	fmt.Fprintf(b, "\n## Until a verdict\n\n")
	fmt.Fprintf(b, "- test: %s (docs/statistics.md, \"Until a verdict\")\n", s.Test)
	fmt.Fprintf(b, "- design: α = %g for each kind of wrong verdict over all looks; \"no difference\" means within ±%g per cycle; rounds of %d cycles a build (fresh clusters, the next seed); at most %d cycles a build\n",
		s.Alpha, s.Margin, s.RoundCycles, s.MaxCycles)
	fmt.Fprintf(b, "- rounds: %d (%s)\n", len(s.Rounds), strings.Join(s.Rounds, ", "))
	stopped := s.Stopped
	if stopped == "" {
		stopped = "not yet (the run is in progress or was interrupted)"
	}
	fmt.Fprintf(b, "- stopped: %s\n\n", stopped)
	b.WriteString("| build | count | verdict | always-valid p | decided at look | design effect |\n|---|---|---|---:|---:|---:|\n")
	for _, t := range s.Builds {
		for _, c := range []struct {
			noun string
			t    report.SequentialTest
		}{{"stranding episodes", t.Strandings}, {"safety violations", t.Safety}} {
			at := "–"
			if c.t.DecidedAt > 0 {
				at = fmt.Sprint(c.t.DecidedAt)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %.2f |\n", mdCell(t.Name), c.noun, mdCell(c.t.Verdict), report.PValueText(c.t.PValue), at, c.t.DesignEffect)
		}
	}
	b.WriteString("\nThe p-value after each look (stranding episodes):\n\n")
	for _, t := range s.Builds {
		ps := make([]string, len(t.Strandings.PValues))
		for i, p := range t.Strandings.PValues {
			ps[i] = report.PValueText(p)
		}
		fmt.Fprintf(b, "- %s: %s\n", mdCell(t.Name), strings.Join(ps, ", "))
	}
}
