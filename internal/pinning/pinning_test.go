package pinning

import (
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/strandlab/strandlab/internal/fault"
)

func TestSchedulerConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name        string
		latency     fault.Delay
		wantTimeout string
	}{
		{"no latency: the scheduler's 30 s", fault.Delay{}, "30s"},
		{"fixed latency is added", fault.Delay{Fixed: fault.Duration{Duration: 6 * time.Second}}, "36s"},
		{"the slowest uniform draw is added", fault.Delay{UniformMin: fault.Duration{}, UniformMax: fault.Duration{Duration: 100 * time.Millisecond}}, "30.1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{Sticky: true, Latency: tc.latency}
			var doc struct {
				Kind             string
				ClientConnection struct{ Kubeconfig string }
				Extenders        []struct {
					URLPrefix, FilterVerb, HTTPTimeout string
					NodeCacheCapable, Ignorable        bool
				}
			}
			if err := yaml.Unmarshal([]byte(c.SchedulerConfiguration("/etc/kubernetes/scheduler.conf", "127.0.0.1:8888")), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Kind != "KubeSchedulerConfiguration" || doc.ClientConnection.Kubeconfig != "/etc/kubernetes/scheduler.conf" || len(doc.Extenders) != 1 {
				t.Fatalf("configuration = %+v", doc)
			}
			e := doc.Extenders[0]
			if e.URLPrefix != "http://127.0.0.1:8888" || e.FilterVerb != "filter" || !e.NodeCacheCapable || e.Ignorable || e.HTTPTimeout != tc.wantTimeout {
				t.Errorf("extender = %+v, want the filter at 127.0.0.1:8888, not ignorable, timeout %s", e, tc.wantTimeout)
			}
		})
	}
}
