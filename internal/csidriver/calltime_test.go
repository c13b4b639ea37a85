package csidriver

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// A node call is held by its drawn time less what the method takes here;
// controller calls, calls not measured and a driver without call times are
// served at once.
func TestHoldCalls(t *testing.T) {
	const stage = "/csi.v1.Node/NodeStageVolume"
	draws := map[string]time.Duration{stage: 60 * time.Millisecond, "/csi.v1.Controller/ControllerPublishVolume": time.Hour}
	callTime := func(m string) (time.Duration, bool) { d, ok := draws[m]; return d, ok }
	for _, tc := range []struct {
		name     string
		callTime func(string) (time.Duration, bool)
		method   string
		served   time.Duration // what the method took here so far
		min, max time.Duration
	}{
		{"a node call, drawn", callTime, stage, 0, 60 * time.Millisecond, 2 * time.Second},
		{"less what it takes here", callTime, stage, 50 * time.Millisecond, 10 * time.Millisecond, 45 * time.Millisecond},
		{"a node call not measured", callTime, "/csi.v1.Node/NodeGetCapabilities", 0, 0, 45 * time.Millisecond},
		{"a controller call", callTime, "/csi.v1.Controller/ControllerPublishVolume", 0, 0, 45 * time.Millisecond},
		{"no call times", nil, stage, 0, 0, 45 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Driver{cfg: Config{CallTime: tc.callTime}}
			if tc.served > 0 {
				d.served.observe(tc.method, tc.served)
			}
			var servedAfter time.Duration
			start := time.Now()
			_, err := d.holdCalls(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: tc.method}, func(context.Context, any) (any, error) {
				servedAfter = time.Since(start)
				return nil, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if servedAfter < tc.min || servedAfter > tc.max {
				t.Errorf("served after %v, want between %v and %v", servedAfter, tc.min, tc.max)
			}
		})
	}
}

// A call whose context ends while it is held is not served.
func TestHeldCallCancelled(t *testing.T) {
	d := &Driver{cfg: Config{CallTime: func(string) (time.Duration, bool) { return time.Hour, true }}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	served := false
	_, err := d.holdCalls(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Node/NodePublishVolume"}, func(context.Context, any) (any, error) {
		served = true
		return nil, nil
	})
	if !errors.Is(err, context.Canceled) || served {
		t.Errorf("err %v, served %v; want context.Canceled and not served", err, served)
	}
}
