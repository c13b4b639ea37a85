package proxy

import (
	"bufio"
	"context"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/fault"
)

// BenchmarkDelayedWatchMemory streams 1,000 Node events per second for
// STRANDLAB_BENCH_SECONDS (default 60) through the proxy with every event
// held 10 s, and reports the peak heap and the deepest queue. With the
// default queue limit of 10,000 events the bound is queueLimit x frame size
// (584 bytes here): under 6 MiB of frames; TestDelayedQueueIsBounded asserts
// the bound itself. Run:
//
//	go test ./internal/proxy -run '^$' -bench DelayedWatchMemory -benchtime 1x
func BenchmarkDelayedWatchMemory(b *testing.B) {
	seconds := 60
	if v, err := strconv.Atoi(os.Getenv("STRANDLAB_BENCH_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	const rate, hold = 1000, 10 * time.Second
	for i := 0; i < b.N; i++ {
		c := newCerts(b)
		up := newUpstream(b, c, "application/json")
		p, srv := startProxy(b, c, up, fault.Profile{Rules: []fault.Rule{{Resource: "nodes", Delay: fault.Delay{Fixed: fault.D(hold)}}}})
		resp, err := clientWith(c, &c.kcm).Get(srv.URL + "/api/v1/nodes?watch=true")
		if err != nil {
			b.Fatal(err)
		}
		frame := jsonFrame(b, "MODIFIED", nodeWith("kubernetes.io/csi/hostpath.csi.k8s.io^vol-0123456789abcdef0123456789abcdef",
			"kubernetes.io/csi/hostpath.csi.k8s.io^vol-fedcba9876543210fedcba9876543210"))
		total := rate * seconds
		var received atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			fr := NewJSONFrameReader(bufio.NewReader(resp.Body))
			for received.Load() < int64(total) {
				if _, err := fr.Next(); err != nil {
					if err != io.EOF {
						b.Error(err)
					}
					return
				}
				received.Add(1)
			}
		}()
		// peak is written by the sampling goroutine only, and read after it
		// has returned (sampled is closed then).
		var peak uint64
		ctx, cancel := context.WithCancel(context.Background())
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			var ms runtime.MemStats
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
				}
			}
		}()
		tick := time.NewTicker(time.Second / rate)
		for sent := 0; sent < total; sent++ {
			<-tick.C
			up.frames <- frame
		}
		tick.Stop()
		<-done
		cancel()
		<-sampled
		resp.Body.Close()
		cnt := p.metrics.counters()
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(cnt.MaxQueueDepth), "max-queue")
		b.ReportMetric(float64(len(frame)), "frame-bytes")
		if received.Load() != int64(total) {
			b.Errorf("received %d of %d events", received.Load(), total)
		}
	}
}
