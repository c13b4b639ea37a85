package csidriver

import (
	"context"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// holdCalls makes the node's calls take the time a real kubelet's took on
// kind (Config.CallTime, drawn from its csi_operations_seconds): on two
// busy cores its node calls took about 50 ms at the median, where this
// driver's symlink publishing takes a millisecond. A call is held before
// it is served, by the draw less what the method takes here, so the
// volume's state changes as late as it did there. Controller and identity
// calls are not held (the kubelet's histogram does not have them).
func (d *Driver) holdCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if d.cfg.CallTime == nil || !strings.HasPrefix(info.FullMethod, "/csi.v1.Node/") {
		return handler(ctx, req)
	}
	if draw, ok := d.cfg.CallTime(info.FullMethod); ok {
		if hold := draw - d.served.get(info.FullMethod); hold > 0 {
			t := time.NewTimer(hold)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
	}
	start := time.Now()
	resp, err := handler(ctx, req)
	d.served.observe(info.FullMethod, time.Since(start))
	return resp, err
}

// callTimes is a moving average of the time each method takes.
type callTimes struct {
	mu sync.Mutex
	m  map[string]time.Duration
}

// newestWeight is the weight of the newest call in the moving average.
const newestWeight = 0.1

func (c *callTimes) get(method string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[method]
}

func (c *callTimes) observe(method string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]time.Duration{}
	}
	old, seen := c.m[method]
	if !seen {
		c.m[method] = d
		return
	}
	c.m[method] = old + time.Duration(newestWeight*float64(d-old))
}
