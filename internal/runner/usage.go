package runner

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/procstat"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/runtimeops"
	"github.com/strandlab/strandlab/internal/usage"
)

// meter reads what a build costs around its churn (docs/performance.md):
// the CPU time and peak memory of the cluster's components and of the
// harness itself, when the cluster's processes are on this machine or it
// samples its components itself (kind's control groups), the container
// runtime's operation timings, when its nodes run real kubelets, and the
// API server's requests per client, when it tells clients apart.
type meter struct {
	procs   cluster.ProcessLister     // nil: not processes of this machine
	sampler cluster.UsageSampler      // nil: does not sample itself
	api     cluster.APIRequestCounter // nil: no requests per client
	runtime cluster.RuntimeOpsReader  // nil: no real kubelets to read
}

// reading is one meter reading.
type reading struct {
	samples  []usage.Sample
	requests usage.Counter  // nil when not read
	runtime  runtimeops.Ops // nil when not read
}

// newMeter is the meter of c: its processes' accounting whenever it has
// them (reading /proc is cheap), and its API requests per client only when
// requestsByClient (Options.RequestsByClient: a /metrics scrape).
func newMeter(c cluster.Cluster, requestsByClient bool) meter {
	in := cluster.InstrumentsOf(c)
	m := meter{procs: in.Processes, sampler: in.Usage, runtime: in.RuntimeOps}
	if requestsByClient {
		m.api = in.APIRequests
	}
	return m
}

// read takes one reading. What cannot be read is logged and left out: the
// figures are a measurement beside the run's, not a reason to fail it.
func (m meter) read(ctx context.Context) reading {
	var r reading
	if m.procs != nil {
		for _, p := range m.procs.Processes() {
			s, err := procstat.Read(p.Name, p.PID)
			if err != nil {
				// It exited since it was listed: usage.CPU counts it as gone.
				klog.V(2).InfoS("Process not sampled", "process", p.Name, "err", err)
				continue
			}
			r.samples = append(r.samples, s)
		}
	}
	if m.sampler != nil {
		samples, err := m.sampler.SampleUsage(ctx)
		if err != nil {
			klog.ErrorS(err, "The cluster's components' CPU time and memory not read")
		}
		r.samples = append(r.samples, samples...)
	}
	if len(r.samples) > 0 {
		if self, err := procstat.Self(); err == nil {
			r.samples = append(r.samples, self)
		} else {
			klog.ErrorS(err, "The harness's own CPU time cannot be read")
		}
	}
	if m.runtime != nil {
		ops, err := m.runtime.RuntimeOps(ctx)
		if err != nil {
			klog.ErrorS(err, "The kubelets' container runtime timings not read")
		} else {
			r.runtime = ops
		}
	}
	if m.api != nil {
		counts, err := m.api.APIRequestsByClient(ctx)
		if err != nil {
			klog.ErrorS(err, "API requests per client not read")
		} else {
			r.requests = counts
		}
	}
	return r
}

// apply puts the figures of the churn between before and after into b.
func (m meter) apply(b *report.Build, before, after reading) {
	if len(before.samples) > 0 && len(after.samples) > 0 {
		report.AddUsage(b, usage.CPU(before.samples, after.samples), usage.Memory(after.samples))
	}
	if before.runtime != nil && after.runtime != nil {
		report.AddRuntimeOps(b, runtimeops.Sub(after.runtime, before.runtime))
	}
	if before.requests != nil && after.requests != nil {
		report.AddRequestsByClient(b, usage.Delta(before.requests, after.requests))
	}
}
