// Package csilatency makes kubelet-sim's CSI node calls take as long as a
// real kubelet's took on kind. On kind a volume's NodeUnpublishVolume and
// NodeUnstageVolume are real unmounts by a driver sharing the node's 2 cores:
// 57-86 ms at the median and about half a second at p90, read from the kind
// kubelets' own logs (docs/kind.md, "The volume's release, stage by
// stage"); on local the driver publishes a symlink and each call takes a
// few milliseconds, so the volume left the node's volumesInUse, and the
// controller detached it, sooner than with real kubelets.
//
// A Proxy stands between the kubelet's CSI plugin and the driver: it
// forwards every call as it is and, for the calls it has a time for, holds
// the reply back until that time has passed since the call arrived. The
// CSI plugin dials the endpoint kubelet-sim registers (the proxy's), so
// upstream's code is used unchanged.
package csilatency

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strandlab/strandlab/tools/upstream/kubelet-sim/containerruntime"
)

// Drawer draws one call's time by the gRPC method's name ("NodeUnpublishVolume");
// ok is false when it has none for the method (the call is not held).
type Drawer interface {
	CSICall(method string) (d time.Duration, ok bool)
}

// Proxy forwards a CSI driver's gRPC calls from its own unix socket.
type Proxy struct {
	// Endpoint is the proxy's socket, for the CSI plugin to dial.
	Endpoint string

	server *grpc.Server
	driver *grpc.ClientConn
	draw   Drawer
	// sleep waits d or until ctx ends (tests record instead).
	sleep func(ctx context.Context, d time.Duration) error
}

// Start serves a proxy of the driver at driverEndpoint on endpoint (a unix
// socket path, or "@name" for an abstract one) until ctx ends or Stop.
func Start(ctx context.Context, endpoint, driverEndpoint string, draw Drawer) (*Proxy, error) {
	return start(ctx, endpoint, driverEndpoint, draw, containerruntime.Sleep)
}

func start(ctx context.Context, endpoint, driverEndpoint string, draw Drawer, sleep func(context.Context, time.Duration) error) (*Proxy, error) {
	driver, err := grpc.NewClient("passthrough:///"+driverEndpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	if err != nil {
		return nil, fmt.Errorf("CSI driver %s: %w", driverEndpoint, err)
	}
	l, err := net.Listen("unix", endpoint)
	if err != nil {
		driver.Close()
		return nil, fmt.Errorf("CSI latency proxy: %w", err)
	}
	p := &Proxy{Endpoint: endpoint, driver: driver, draw: draw, sleep: sleep}
	p.server = grpc.NewServer(grpc.ForceServerCodec(frameCodec{}), grpc.UnknownServiceHandler(p.forward))
	go p.server.Serve(l) //nolint:errcheck // Serve returns when the server stops
	go func() {
		<-ctx.Done()
		p.Stop()
	}()
	return p, nil
}

// Stop closes the proxy's socket and its connection to the driver.
func (p *Proxy) Stop() {
	p.server.Stop()
	p.driver.Close()
}

// forward relays one unary call (every CSI call is unary) and holds its
// reply, error or not, until the drawn time has passed: the real call's
// time includes the kubelet's wait for a failing one too.
func (p *Proxy) forward(_ any, stream grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(stream)
	if !ok {
		return fmt.Errorf("CSI latency proxy: no method")
	}
	start := time.Now()
	var req, resp frame
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	ctx := stream.Context()
	err := p.driver.Invoke(ctx, method, &req, &resp, grpc.ForceCodec(frameCodec{}))
	if d, ok := p.draw.CSICall(method[strings.LastIndex(method, "/")+1:]); ok {
		if hold := d - time.Since(start); hold > 0 {
			if serr := p.sleep(ctx, hold); serr != nil {
				return serr
			}
		}
	}
	if err != nil {
		return err
	}
	return stream.SendMsg(&resp)
}

// frame is one message as it goes over the wire: the proxy does not
// decode what it forwards.
type frame []byte

// frameCodec passes frames through unchanged. It keeps the "proto" name so
// that both sides see the content type they would without the proxy.
type frameCodec struct{}

func (frameCodec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("CSI latency proxy: cannot marshal %T", v)
	}
	return *f, nil
}

func (frameCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("CSI latency proxy: cannot unmarshal into %T", v)
	}
	*f = append((*f)[:0], data...)
	return nil
}

func (frameCodec) Name() string { return "proto" }
