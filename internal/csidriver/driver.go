package csidriver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

const (
	// DefaultName is the driver name used when Config.Name is empty. It is the
	// name of the upstream hostpath driver, so manifests written for that
	// driver (StorageClass provisioner, CSIDriver object) work unchanged.
	DefaultName = "hostpath.csi.k8s.io"
	// VendorVersion is reported by GetPluginInfo.
	VendorVersion = "strandlab"
)

// Mode selects which CSI services a Driver serves.
type Mode string

const (
	ModeController Mode = "controller"
	ModeNode       Mode = "node"
	ModeBoth       Mode = "both"
)

// ParseMode parses "controller", "node" or "both".
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeController, ModeNode, ModeBoth:
		return m, nil
	}
	return "", fmt.Errorf("invalid mode %q: want controller, node or both", s)
}

func (m Mode) controller() bool { return m == ModeController || m == ModeBoth }
func (m Mode) node() bool       { return m == ModeNode || m == ModeBoth }

// Config configures a Driver.
type Config struct {
	// Name is the CSI driver name; DefaultName if empty.
	Name string
	// NodeID identifies this node; required in node and both mode.
	NodeID string
	// StateDir holds all volume state and data; instances that share it share
	// volumes.
	StateDir string
	// Mode selects the services to serve; ModeBoth if empty.
	Mode Mode
}

// Driver is one instance of the CSI driver: a controller, a node, or both.
type Driver struct {
	cfg   Config
	store *store

	identity   *identityServer
	controller *controllerServer
	node       *nodeServer
}

// namePattern is the driver name rule that CSI sanity (and Kubernetes' CSIDriver
// object) enforce; checking it here fails fast instead of at registration.
var namePattern = regexp.MustCompile(`^[a-zA-Z][A-Za-z0-9.-]{0,61}[a-zA-Z]$`)

// NewDriver validates cfg, prepares the state directory and, for a node
// instance, registers the node so that the controller accepts attaches to it.
func NewDriver(cfg Config) (*Driver, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if !namePattern.MatchString(cfg.Name) {
		return nil, fmt.Errorf("invalid driver name %q", cfg.Name)
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeBoth
	}
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		return nil, err
	}
	if cfg.Mode.node() {
		if cfg.NodeID == "" {
			return nil, fmt.Errorf("node ID is required in %s mode", cfg.Mode)
		}
		if !validID(cfg.NodeID) {
			return nil, fmt.Errorf("invalid node ID %q: want up to 128 letters, digits, '.', '_' or '-'", cfg.NodeID)
		}
	}
	if cfg.StateDir == "" {
		return nil, errors.New("state directory is required")
	}
	// Publish targets are symlinks into the state dir, so it must be absolute.
	dir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	cfg.StateDir = dir
	st, err := newStore(dir)
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if cfg.Mode.node() {
		if err := st.registerNode(cfg.NodeID); err != nil {
			return nil, fmt.Errorf("register node %s: %w", cfg.NodeID, err)
		}
	}
	d := &Driver{cfg: cfg, store: st}
	d.identity = &identityServer{d: d}
	d.controller = &controllerServer{d: d}
	d.node = &nodeServer{d: d}
	return d, nil
}

// Config returns the effective configuration (defaults filled in, StateDir
// absolute).
func (d *Driver) Config() Config { return d.cfg }

// IdentityServer returns the driver's CSI identity service.
func (d *Driver) IdentityServer() csi.IdentityServer { return d.identity }

// ControllerServer returns the driver's CSI controller service. It works in
// any mode; the mode only decides what Serve registers.
func (d *Driver) ControllerServer() csi.ControllerServer { return d.controller }

// NodeServer returns the driver's CSI node service; it needs Config.NodeID.
func (d *Driver) NodeServer() csi.NodeServer { return d.node }

// Run serves the driver on endpoint (unix:///path/csi.sock, unix:/path or a
// plain path) until ctx is done. The socket file is removed on return.
func (d *Driver) Run(ctx context.Context, endpoint string) error {
	lis, err := Listen(endpoint)
	if err != nil {
		return err
	}
	path := lis.Addr().String()
	defer func() {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			klog.ErrorS(err, "Removing CSI socket")
		}
	}()
	return d.Serve(ctx, lis)
}

// Listen listens on a unix socket endpoint, replacing a stale socket file left
// by an earlier instance (but never a file of another kind).
func Listen(endpoint string) (net.Listener, error) {
	path, err := socketPath(endpoint)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("endpoint %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale socket: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return net.Listen("unix", path)
}

func socketPath(endpoint string) (string, error) {
	var path string
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		path = strings.TrimPrefix(endpoint, "unix://")
	case strings.HasPrefix(endpoint, "unix:"):
		path = strings.TrimPrefix(endpoint, "unix:")
	case strings.Contains(endpoint, "://"):
		return "", fmt.Errorf("endpoint %q: only unix sockets are supported", endpoint)
	default:
		path = endpoint
	}
	if path == "" {
		return "", fmt.Errorf("endpoint %q: empty socket path", endpoint)
	}
	return filepath.Clean(path), nil
}

// Serve serves the driver's services on lis until ctx is done or serving
// fails. It closes lis.
func (d *Driver) Serve(ctx context.Context, lis net.Listener) error {
	srv := grpc.NewServer(grpc.UnaryInterceptor(logCalls))
	csi.RegisterIdentityServer(srv, d.identity)
	if d.cfg.Mode.controller() {
		csi.RegisterControllerServer(srv, d.controller)
	}
	if d.cfg.Mode.node() {
		csi.RegisterNodeServer(srv, d.node)
	}
	klog.V(1).InfoS("CSI driver serving", "name", d.cfg.Name, "mode", d.cfg.Mode, "node", d.cfg.NodeID,
		"endpoint", lis.Addr().String(), "stateDir", d.cfg.StateDir)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Let in-flight calls finish so no state update is cut short, but do not
	// hang on a client that never finishes.
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		srv.Stop()
		<-stopped
	}
	<-errc
	klog.V(1).InfoS("CSI driver stopped", "name", d.cfg.Name, "mode", d.cfg.Mode)
	return nil
}

// logCalls logs every call at high verbosity and failures a little lower, so
// the driver is silent at the default verbosity.
func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if r, ok := req.(interface{ GetSecrets() map[string]string }); ok && len(r.GetSecrets()) > 0 {
		// Never write secrets to the log.
		klog.V(5).InfoS("CSI call", "method", info.FullMethod, "request", "<has secrets, not logged>")
	} else {
		klog.V(5).InfoS("CSI call", "method", info.FullMethod, "request", req)
	}
	resp, err := handler(ctx, req)
	if err != nil {
		klog.V(3).InfoS("CSI call failed", "method", info.FullMethod, "code", status.Code(err), "err", err)
	} else {
		klog.V(5).InfoS("CSI call done", "method", info.FullMethod, "response", resp)
	}
	return resp, err
}
