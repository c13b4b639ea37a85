package runner

import (
	"testing"

	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/scenario"
)

// TestScenarioDesign: a scenario's untilVerdict is a run's default design
// only where it can decide something (stock and another build); the
// fields it leaves out are the flags' defaults.
func TestScenarioDesign(t *testing.T) {
	def := report.DefaultSequentialDesign()
	tests := []struct {
		name   string
		until  *scenario.UntilVerdict
		builds []string
		want   *report.SequentialDesign
	}{
		{"no untilVerdict: a fixed run", nil, []string{"stock", "fix"}, nil},
		{"the defaults", &scenario.UntilVerdict{}, []string{"stock", "fix"}, &def},
		{"the scenario's alpha", &scenario.UntilVerdict{Alpha: 0.01}, []string{"stock", "fix"}, &report.SequentialDesign{Alpha: 0.01, Margin: def.Margin}},
		{"the scenario's margin", &scenario.UntilVerdict{Margin: 0.02}, []string{"fix", "stock", "other"}, &report.SequentialDesign{Alpha: def.Alpha, Margin: 0.02}},
		{"stock alone (--builds stock): a fixed run", &scenario.UntilVerdict{Alpha: 0.01}, []string{"stock"}, nil},
		{"no stock (--builds fix,other): a fixed run", &scenario.UntilVerdict{Alpha: 0.01}, []string{"fix", "other"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ScenarioDesign(&scenario.Scenario{Builds: tc.builds, UntilVerdict: tc.until})
			switch {
			case (got == nil) != (tc.want == nil):
				t.Fatalf("ScenarioDesign = %+v, want %+v", got, tc.want)
			case got != nil && *got != *tc.want:
				t.Errorf("ScenarioDesign = %+v, want %+v", *got, *tc.want)
			}
		})
	}
}
