package kind

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestStaticPodRequestsCPU: strandlab's static pods on the control-plane
// node request the CPU of the component each stands beside, so that they
// are not BestEffort pods a busy node starves (cpu.shares 2 against the
// control plane's 102-256).
func TestStaticPodRequestsCPU(t *testing.T) {
	for _, tc := range []struct{ name, cpu string }{
		{"strandlab-apiproxy", apiproxyCPU},
		{"strandlab-pin-extender", pinExtenderCPU},
	} {
		pod := (&controlPlane{}).staticPod(tc.name, "strandlab/"+tc.name+":test", tc.cpu, nil)
		got := pod.Spec.Containers[0].Resources.Requests.Cpu()
		if want := resource.MustParse(tc.cpu); got.Cmp(want) != 0 || got.IsZero() {
			t.Errorf("%s requests %s of CPU, want %s (not zero)", tc.name, got, tc.cpu)
		}
	}
}

// TestControlPlaneCPUShares: the control-plane node weighs as much as all
// the workers together, and at least as much as one.
func TestControlPlaneCPUShares(t *testing.T) {
	for _, tc := range []struct{ workers, want int }{{0, 1024}, {1, 1024}, {3, 3072}, {8, 8192}} {
		if got := controlPlaneCPUShares(tc.workers); got != tc.want {
			t.Errorf("controlPlaneCPUShares(%d) = %d, want %d", tc.workers, got, tc.want)
		}
	}
}
