package kind

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"k8s.io/client-go/kubernetes"

	"github.com/strandlab/strandlab/internal/runtimeops"
)

// RuntimeOps reads how long each worker's container runtime has taken to
// start and stop pods so far: the kubelets' own histogram of their CRI
// calls (runtimeops.Metric), from each kubelet's /metrics through the API
// server's node proxy, summed over the workers.
func (c *Cluster) RuntimeOps(ctx context.Context) (runtimeops.Ops, error) {
	admin, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return nil, fmt.Errorf("read the kubelets' runtime operations: %w", err)
	}
	total := runtimeops.Ops{}
	for _, node := range c.nodes {
		raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "metrics").DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the kubelet metrics of %s: %w", node, err)
		}
		ops, err := parseRuntimeOps(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", node, err)
		}
		if total, err = runtimeops.Add(total, ops); err != nil {
			return nil, fmt.Errorf("%s: %w", node, err)
		}
	}
	return total, nil
}

// parseRuntimeOps reads runtimeops.Metric from a kubelet's /metrics (Prometheus text format). A
// kubelet that has not called its runtime yet has no such metric: that is
// an empty Ops, not an error.
func parseRuntimeOps(r io.Reader) (runtimeops.Ops, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse the kubelet's metrics: %w", err)
	}
	out := runtimeops.Ops{}
	mf, ok := families[runtimeops.Metric]
	if !ok {
		return out, nil
	}
	for _, m := range mf.GetMetric() {
		op := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "operation_type" {
				op = l.GetValue()
			}
		}
		hist := m.GetHistogram()
		if op == "" || hist == nil {
			continue
		}
		var h runtimeops.Histogram
		var below uint64
		for _, b := range hist.GetBucket() {
			if math.IsInf(b.GetUpperBound(), 1) {
				continue
			}
			c := b.GetCumulativeCount()
			if c < below {
				return nil, fmt.Errorf("%s{operation_type=%q}: cumulative bucket counts decrease", runtimeops.Metric, op)
			}
			h.Bounds = append(h.Bounds, b.GetUpperBound())
			h.Counts = append(h.Counts, c-below)
			below = c
		}
		if total := hist.GetSampleCount(); total >= below {
			h.Counts = append(h.Counts, total-below)
		} else {
			return nil, fmt.Errorf("%s{operation_type=%q}: %d samples but %d in the buckets", runtimeops.Metric, op, total, below)
		}
		if out, err = runtimeops.Add(out, runtimeops.Ops{op: h}); err != nil {
			return nil, fmt.Errorf("%s{operation_type=%q}: %w", runtimeops.Metric, op, err)
		}
	}
	return out, nil
}
