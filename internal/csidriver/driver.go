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
	"runtime"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/fault"
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

// PublishMode selects how NodePublishVolume exposes a volume at the target
// path.
type PublishMode string

const (
	// PublishSymlink makes the target path a symlink to the volume's data
	// directory: no root needed, enough for simulated kubelets, which never
	// look inside.
	PublishSymlink PublishMode = "symlink"
	// PublishBind bind-mounts the data directory onto the target directory:
	// the CSI spec has a node plugin mount a volume at the target path, and a
	// real kubelet looks for a mount point there (when it tears a volume down
	// or reconstructs its state after a restart). Needs Linux and
	// CAP_SYS_ADMIN.
	PublishBind PublishMode = "bind"
)

// ParsePublishMode parses "symlink" or "bind".
func ParsePublishMode(s string) (PublishMode, error) {
	switch m := PublishMode(s); m {
	case PublishSymlink, PublishBind:
		return m, nil
	}
	return "", fmt.Errorf("invalid publish mode %q: want symlink or bind", s)
}

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
	// PublishMode selects how NodePublishVolume exposes a volume;
	// PublishSymlink if empty.
	PublishMode PublishMode
	// RegistrationDir is the kubelet's plugin registration directory
	// (/var/lib/kubelet/plugins_registry). If set, Run registers the driver
	// with the kubelet through <RegistrationDir>/<Name>-reg.sock, the job
	// node-driver-registrar does in upstream deployments. Node and both mode
	// only.
	RegistrationDir string
	// KubeletRegistrationPath is the CSI socket's path as the kubelet sees it
	// (the driver's container may mount it elsewhere); it must be absolute.
	// Empty means the path of Run's endpoint.
	KubeletRegistrationPath string
	// CSIErrors fail or slow the matching calls (a scenario's csiErrors),
	// drawn with FaultSeed; each affected call is journaled under
	// <StateDir>/faults/ (ReadFaultJournal).
	CSIErrors []fault.CSIError
	FaultSeed uint64
}

// Driver is one instance of the CSI driver: a controller, a node, or both.
type Driver struct {
	cfg   Config
	store *store

	identity   *identityServer
	controller *controllerServer
	node       *nodeServer
	faults     *injector // nil without CSIErrors
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
	if cfg.PublishMode == "" {
		cfg.PublishMode = PublishSymlink
	}
	if _, err := ParsePublishMode(string(cfg.PublishMode)); err != nil {
		return nil, err
	}
	if cfg.PublishMode == PublishBind && runtime.GOOS != "linux" {
		return nil, fmt.Errorf("publish mode %s needs Linux", cfg.PublishMode)
	}
	if cfg.RegistrationDir != "" && !cfg.Mode.node() {
		// The kubelet would register a driver whose node service is missing.
		return nil, fmt.Errorf("kubelet plugin registration needs node or both mode, not %s", cfg.Mode)
	}
	if cfg.KubeletRegistrationPath != "" {
		if cfg.RegistrationDir == "" {
			return nil, errors.New("kubelet registration path is set but no registration directory")
		}
		if !filepath.IsAbs(cfg.KubeletRegistrationPath) {
			return nil, fmt.Errorf("kubelet registration path %q is not absolute", cfg.KubeletRegistrationPath)
		}
	}
	if cfg.StateDir == "" {
		return nil, errors.New("state directory is required")
	}
	// Publish targets are symlinks to or bind mounts of directories in the
	// state dir, so it must be absolute.
	dir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", cfg.StateDir, err)
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
	if len(cfg.CSIErrors) > 0 {
		journal := faultJournalPath(dir, cfg.Mode, cfg.NodeID)
		if err := os.MkdirAll(filepath.Dir(journal), 0o755); err != nil {
			return nil, fmt.Errorf("fault journal: %w", err)
		}
		if d.faults, err = newInjector(cfg.CSIErrors, cfg.FaultSeed, st, cfg.NodeID, journal); err != nil {
			return nil, err
		}
	}
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

// RegistrationSocket returns the path of the kubelet plugin registration
// socket, "" without Config.RegistrationDir.
func (d *Driver) RegistrationSocket() string {
	if d.cfg.RegistrationDir == "" {
		return ""
	}
	return filepath.Join(d.cfg.RegistrationDir, d.cfg.Name+"-reg.sock")
}

// Run serves the driver on endpoint (unix:///path/csi.sock, unix:/path or a
// plain path) until ctx is done, and with Config.RegistrationDir also the
// kubelet plugin registration service. It returns an error wrapping
// ErrRegistrationFailed when the kubelet reports that it could not register
// the driver. The socket files are removed on return.
func (d *Driver) Run(ctx context.Context, endpoint string) error {
	lis, err := Listen(endpoint)
	if err != nil {
		return fmt.Errorf("CSI socket: %w", err)
	}
	path := lis.Addr().String()
	defer removeSocket(path, "CSI")
	if d.cfg.RegistrationDir == "" {
		return d.Serve(ctx, lis)
	}

	kubeletPath := d.cfg.KubeletRegistrationPath
	if kubeletPath == "" {
		if kubeletPath, err = filepath.Abs(path); err != nil {
			lis.Close()
			return fmt.Errorf("kubelet registration path of %s: %w", path, err)
		}
	}
	regPath := d.RegistrationSocket()
	// Listen replaces a socket left by an earlier instance, as upstream
	// node-driver-registrar does before it listens (a plugin must remove old
	// sockets and listen anew, pkg/kubelet/pluginmanager/pluginwatcher/README.md).
	// The CSI socket listens already, so the kubelet can call it as soon as
	// it sees this one.
	regLis, err := Listen(regPath)
	if err != nil {
		lis.Close()
		return fmt.Errorf("registration socket: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan error, 1)
	fail := func(err error) {
		select {
		case failed <- err:
		default:
		}
		cancel()
	}
	regDone := make(chan struct{})
	go func() {
		defer close(regDone)
		rs := &registrationServer{name: d.cfg.Name, endpoint: kubeletPath, fail: fail}
		if err := serveRegistration(ctx, regLis, rs); err != nil {
			fail(fmt.Errorf("registration server: %w", err))
		}
		// Gone as soon as the driver stops, before the CSI socket: the kubelet
		// then deregisters the driver, as when node-driver-registrar removes
		// its socket on SIGTERM.
		removeSocket(regPath, "registration")
	}()
	klog.V(1).InfoS("Kubelet plugin registration serving", "socket", regPath, "endpoint", kubeletPath)

	err = d.Serve(ctx, lis)
	cancel()
	<-regDone
	if err != nil {
		return err
	}
	select {
	case err := <-failed:
		return err
	default:
		return nil
	}
}

func removeSocket(path, what string) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		klog.ErrorS(err, "Removing socket", "socket", what, "path", path)
	}
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
		return nil, fmt.Errorf("create the directory of socket %s: %w", path, err)
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
	interceptors := []grpc.UnaryServerInterceptor{logCalls}
	if d.faults != nil {
		// After logCalls, so that the log shows the injected error as the
		// caller sees it.
		interceptors = append(interceptors, d.faults.intercept)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(interceptors...))
	csi.RegisterIdentityServer(srv, d.identity)
	if d.cfg.Mode.controller() {
		csi.RegisterControllerServer(srv, d.controller)
	}
	if d.cfg.Mode.node() {
		csi.RegisterNodeServer(srv, d.node)
	}
	klog.V(1).InfoS("CSI driver serving", "name", d.cfg.Name, "mode", d.cfg.Mode, "node", d.cfg.NodeID,
		"endpoint", lis.Addr().String(), "stateDir", d.cfg.StateDir, "publishMode", d.cfg.PublishMode)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve the CSI driver on %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	// Let in-flight calls finish so no state update is cut short.
	stopServer(srv, 5*time.Second)
	<-errc
	klog.V(1).InfoS("CSI driver stopped", "name", d.cfg.Name, "mode", d.cfg.Mode)
	return nil
}

// stopServer stops srv gracefully, letting in-flight calls finish, but does
// not hang longer than timeout on a client that never finishes.
func stopServer(srv *grpc.Server, timeout time.Duration) {
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		srv.Stop()
		<-stopped
	}
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
