package proxy

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// promMetrics are the proxy's Prometheus metrics, in a registry of its own
// (no global state).
type promMetrics struct {
	registry      *prometheus.Registry
	requests      *prometheus.CounterVec
	eventsDelayed *prometheus.CounterVec
	queueDepth    prometheus.Gauge
	delay         prometheus.Histogram
	watchLag      *prometheus.HistogramVec
}

func newPromMetrics() *promMetrics {
	m := &promMetrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strandlab_proxy_requests_total",
			Help: "Requests forwarded, by Kubernetes verb, resource and HTTP code."}, []string{"verb", "resource", "code"}),
		eventsDelayed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strandlab_proxy_watch_events_delayed_total",
			Help: "Watch events held back by a rule."}, []string{"resource", "type"}),
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{Name: "strandlab_proxy_watch_queue_depth",
			Help: "Events waiting in the most recently filled watch queue."}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strandlab_proxy_watch_event_delay_seconds",
			Help: "Delays drawn for watch events.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		watchLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strandlab_proxy_watch_lag_seconds",
			Help: "How long watch events waited, after they were due, for the controller to read them.", Buckets: watchLagBounds}, []string{"resource"}),
	}
	m.registry.MustRegister(m.requests, m.eventsDelayed, m.queueDepth, m.delay, m.watchLag)
	return m
}

// MetricsHandler serves the Prometheus metrics.
func (p *Proxy) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(p.metrics.prom.registry, promhttp.HandlerOpts{})
}
