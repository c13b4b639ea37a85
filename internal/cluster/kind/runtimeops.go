package kind

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"k8s.io/client-go/kubernetes"

	"github.com/strandlab/strandlab/internal/runtimeops"
)

// RuntimeOps reads how long each worker's container runtime has taken to
// start and stop pods so far, and how long and how far apart the PLEG's
// relists have been, and the kubelet's own delays around them: the
// kubelets' own histograms of their CRI calls (runtimeops.Metric), relists,
// status writes and pod worker starts (runtimeops.KubeletMetrics), from each
// kubelet's /metrics through the API server's node proxy, summed over the
// workers.
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

// parseRuntimeOps reads runtimeops.Metric, one histogram per
// operation_type, the histograms of runtimeops.KubeletMetrics, and those of
// runtimeops.KubeletLatencies, one per value of their label, from a
// kubelet's /metrics (Prometheus text
// format). A kubelet that has not called its runtime yet has no such
// metric: that is an empty Ops, not an error.
func parseRuntimeOps(r io.Reader) (runtimeops.Ops, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse the kubelet's metrics: %w", err)
	}
	out := runtimeops.Ops{}
	add := func(name, op string, m *dto.Metric) error {
		h, err := histogramOf(m.GetHistogram())
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if out, err = runtimeops.Add(out, runtimeops.Ops{op: h}); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	if mf, ok := families[runtimeops.Metric]; ok {
		for _, m := range mf.GetMetric() {
			op := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation_type" {
					op = l.GetValue()
				}
			}
			if op == "" || m.GetHistogram() == nil {
				continue
			}
			if err := add(fmt.Sprintf("%s{operation_type=%q}", runtimeops.Metric, op), op, m); err != nil {
				return nil, err
			}
		}
	}
	for metric, lm := range runtimeops.KubeletLatencies {
		mf, ok := families[metric]
		if !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
			value := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == lm.Label {
					value = l.GetValue()
				}
			}
			if value == "" || m.GetHistogram() == nil {
				continue
			}
			if err := add(fmt.Sprintf("%s{%s=%q}", metric, lm.Label, value), lm.Operation(value), m); err != nil {
				return nil, err
			}
		}
	}
	for metric, op := range runtimeops.KubeletMetrics {
		mf, ok := families[metric]
		if !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetHistogram() == nil {
				continue
			}
			if err := add(metric, op, m); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// histogramOf turns a Prometheus histogram's cumulative buckets into
// per-bucket counts, the overflow last.
func histogramOf(hist *dto.Histogram) (runtimeops.Histogram, error) {
	var h runtimeops.Histogram
	var below uint64
	for _, b := range hist.GetBucket() {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue
		}
		c := b.GetCumulativeCount()
		if c < below {
			return h, fmt.Errorf("cumulative bucket counts decrease")
		}
		h.Bounds = append(h.Bounds, b.GetUpperBound())
		h.Counts = append(h.Counts, c-below)
		below = c
	}
	total := hist.GetSampleCount()
	if total < below {
		return h, fmt.Errorf("%d samples but %d in the buckets", total, below)
	}
	h.Counts = append(h.Counts, total-below)
	return h, nil
}
