package csidriver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// ErrRegistrationFailed is wrapped by the error Run returns when the kubelet
// reports that it could not register the driver.
var ErrRegistrationFailed = errors.New("kubelet plugin registration failed")

// supportedCSIVersions is what GetInfo offers the kubelet, which picks the
// highest 1.x version it supports; node-driver-registrar offers the same.
var supportedCSIVersions = []string{"1.0.0"}

// registrationServer answers the kubelet's plugin watcher. The watcher finds
// <registration-dir>/<driver>-reg.sock, asks GetInfo for the driver's name
// and CSI endpoint, registers the driver (NodeGetInfo on that endpoint, then
// the CSINode object) and reports the outcome with NotifyRegistrationStatus.
// In upstream deployments node-driver-registrar serves this API in a sidecar;
// here the node plugin serves it itself.
type registrationServer struct {
	registerapi.UnimplementedRegistrationServer
	name     string
	endpoint string
	// fail stops the driver with err.
	fail func(err error)
}

func (s *registrationServer) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	klog.V(2).InfoS("Kubelet asked for plugin info", "driver", s.name, "endpoint", s.endpoint)
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.name,
		Endpoint:          s.endpoint,
		SupportedVersions: supportedCSIVersions,
	}, nil
}

// NotifyRegistrationStatus stops the driver when the kubelet could not
// register it. node-driver-registrar exits in that case ("Registration
// process failed with error ..., restarting registration container"), so the
// pod restarts and the kubelet, seeing the socket anew, tries again; a driver
// that stayed up would stay unregistered until someone noticed. The kubelet
// gets its answer first: the driver stops after this call returns.
func (s *registrationServer) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if st.GetPluginRegistered() {
		klog.InfoS("Registered with the kubelet", "driver", s.name, "endpoint", s.endpoint)
		return &registerapi.RegistrationStatusResponse{}, nil
	}
	err := fmt.Errorf("%w: the kubelet says: %s", ErrRegistrationFailed, st.GetError())
	klog.ErrorS(err, "Stopping the driver so that it restarts and registers anew", "driver", s.name)
	s.fail(err)
	return &registerapi.RegistrationStatusResponse{}, nil
}

// serveRegistration serves rs on lis until ctx is done or serving fails. It
// closes lis.
func serveRegistration(ctx context.Context, lis net.Listener, rs *registrationServer) error {
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, rs)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Graceful, so that the kubelet gets the answer to the
	// NotifyRegistrationStatus call that stopped the driver.
	stopServer(srv, time.Second)
	<-errc
	return nil
}
