package main

import (
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// The heartbeat client is the kubelet's: no rate limit, and a timeout of
// the status period or the Lease's duration, whichever is shorter
// (cmd/kubelet/app.RunKubelet), but never shorter than the default period's
// 10 s, since strandlab's compressed period does not compress the API
// server's latency; the pod client keeps its own settings.
func TestHeartbeatConfig(t *testing.T) {
	for _, tc := range []struct {
		every        time.Duration
		leaseSeconds int32
		want         time.Duration
	}{
		{500 * time.Millisecond, 40, 10 * time.Second},
		{500 * time.Millisecond, 5, 5 * time.Second},
		{10 * time.Second, 40, 10 * time.Second},
		{time.Minute, 40, 40 * time.Second},
	} {
		cfg := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 50, Burst: 100}
		hb := heartbeatConfig(cfg, tc.every, tc.leaseSeconds)
		if hb.QPS != -1 || hb.Timeout != tc.want || hb.Host != cfg.Host {
			t.Errorf("every %v, lease %ds: QPS %v timeout %v host %q; want QPS -1, timeout %v", tc.every, tc.leaseSeconds, hb.QPS, hb.Timeout, hb.Host, tc.want)
		}
		if cfg.QPS != 50 || cfg.Timeout != 0 {
			t.Errorf("the pod client's config changed: %+v", cfg)
		}
	}
}
