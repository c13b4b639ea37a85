// Package cluster defines the seam between the harness and the clusters it
// runs on: a Provider starts a Cluster from a Spec; local, kind and existing
// clusters all look the same to the runner and to e2e-framework suites.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/pinning"
	"github.com/strandlab/strandlab/internal/provenance"
	"github.com/strandlab/strandlab/internal/runtimeops"
	"github.com/strandlab/strandlab/internal/usage"
)

// Spec is what the harness asks of a cluster.
type Spec struct {
	// Name identifies the cluster (directory names, kubeconfig context).
	Name string
	// Nodes is the number of worker nodes (existing: the least number of
	// schedulable nodes the cluster must have).
	Nodes int
	// OutputDir receives the components' log files.
	OutputDir string
	// Keep leaves the cluster running when the harness exits.
	Keep bool
	// CSIDriverName names strandlab's CSI driver (default hostpath.csi.k8s.io).
	CSIDriverName string
	// NodeStatusUpdateFrequency of the kubelets (default 10s, the kubelet's).
	NodeStatusUpdateFrequency time.Duration
	// NodeStatusReportFrequency: the kubelets write an unchanged status
	// after this long (default 5m, the kubelet's).
	NodeStatusReportFrequency time.Duration
	// Seed is the run's seed: the simulated kubelets seed their container
	// runtime's draws with it (and their node's index).
	Seed int64
	// FailedMountOnTimeout: the simulated kubelets record FailedMount when a
	// pod's volumes are not mounted within 2m3s, as kubelets up to v1.27 did.
	FailedMountOnTimeout bool
	// RuntimeTimings is a file of container runtime timings (written by
	// `strandlab runtime-timings`) the simulated kubelets draw their pod
	// starts and stops from; empty: kubelet-sim's built-in ones. Calibrating
	// local against kind on one machine draws from that machine's kind runs
	// (docs/kind.md, "Calibration").
	RuntimeTimings string
	// KubeletVerbosity is the kubelets' log verbosity (klog -v; 0: their
	// default); only a provider with Capabilities.OwnKubelets takes it.
	KubeletVerbosity int
	// Extender, if set, runs the pinning scheduler extender with this
	// configuration and makes kube-scheduler call it.
	Pinning *pinning.Config
	// Proxy, if set, puts the throttling proxy with this fault profile
	// between kube-controller-manager and kube-apiserver.
	Proxy *fault.Profile
	// ControllerManager is the kube-controller-manager binary to run (the
	// controller build under test); empty runs the provider's own. Only a
	// provider with Capabilities.ControllerBuilds accepts it.
	ControllerManager string
	// ControllerManagerArgs are extra kube-controller-manager flags (a later
	// flag of the same name wins over the provider's default).
	ControllerManagerArgs []string
	// Namespace is where the harness creates and churns its workload. A
	// provider that does not own the cluster (existing) creates it in
	// Start, labelled, and removes it in Stop; the others ignore it.
	Namespace string
	// StorageClass is the StorageClass of the workload's PVCs (the
	// scenario's cluster.storageClass). The local and kind providers
	// create strandlab-hostpath themselves; existing checks the cluster
	// has the class.
	StorageClass string
	// CSIDeployment is which CSI driver serves the volumes: CSIStrandlab
	// (default, "") or CSIUpstream (kind only: upstream's
	// csi-driver-host-path, whose images come from a registry).
	CSIDeployment string
	// CSIErrors make strandlab's CSI driver fail or slow the matching
	// calls, with draws seeded by Seed; only a provider with
	// Capabilities.OwnCSIDriver runs that driver.
	CSIErrors []fault.CSIError
}

// CSI deployments (Spec.CSIDeployment).
const (
	CSIStrandlab = "strandlab"
	CSIUpstream  = "upstream"
)

// Validate reports the first invalid field of s.
func (s Spec) Validate() error {
	if s.Name == "" {
		return fmt.Errorf("cluster spec: name: must not be empty")
	}
	if s.Nodes < 1 || s.Nodes > 100 {
		return fmt.Errorf("cluster spec: nodes: %d out of range [1, 100]", s.Nodes)
	}
	if s.OutputDir == "" {
		return fmt.Errorf("cluster spec: outputDir: must not be empty")
	}
	if s.KubeletVerbosity < 0 || s.KubeletVerbosity > 10 {
		return fmt.Errorf("cluster spec: kubeletVerbosity: %d out of range [0, 10]", s.KubeletVerbosity)
	}
	if s.CSIDeployment != "" && s.CSIDeployment != CSIStrandlab && s.CSIDeployment != CSIUpstream {
		return fmt.Errorf("cluster spec: csiDeployment: %q, want %s or %s", s.CSIDeployment, CSIStrandlab, CSIUpstream)
	}
	return nil
}

// Cluster is a running cluster.
type Cluster interface {
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig() string
	// RESTConfig is an admin client configuration.
	RESTConfig() *rest.Config
	// Nodes are the names of the worker nodes.
	Nodes() []string
	// Components lists every real binary the cluster runs.
	Components() []provenance.Component
	// KubernetesVersion is the API server's version.
	KubernetesVersion() string
	// StartDuration is the time from the first process launched until the
	// control plane was healthy and all nodes were Ready.
	StartDuration() time.Duration
	// Stop tears the cluster down, unless it is kept, and releases everything
	// it holds. It is safe to call more than once.
	Stop(ctx context.Context) error
}

// Provider starts clusters of one kind.
type Provider interface {
	// Name is what a scenario's cluster.provider says to choose it.
	Name() string
	// Available reports, cheaply and before anything starts, what this
	// machine lacks for the provider to start a cluster (a tool, a daemon,
	// a kubeconfig); nil when nothing is missing.
	Available(ctx context.Context) error
	// Prepare does the provider's one-time work before its first cluster
	// (build or find its binaries and images) and returns what starts its
	// clusters: no cluster can be started before it.
	Prepare(ctx context.Context) (Starter, error)
	// Capabilities says what the provider can do. It is data, constant
	// for the provider, and answered without touching anything.
	Capabilities() Capabilities
	// PlanDown proves that dir is the state directory of a cluster this
	// provider started and left running (--keep), whose run has ended,
	// and says what Down would stop and remove. It changes nothing; a
	// directory it cannot prove its own is an error (ownership.ErrNotOurs).
	PlanDown(ctx context.Context, dir string) (fmt.Stringer, error)
	// Down stops and removes the kept cluster of dir, after PlanDown's
	// proof (`strandlab down DIR`, through the registry).
	Down(ctx context.Context, dir string) error
}

// Capabilities is what a provider can do, stated as data and checked in one
// place (CheckSpec, CheckScenario) instead of by the provider's name or by
// optional marker interfaces — the way kind's internal providers answer
// Info() with a ProviderInfo that its create checks
// (sigs.k8s.io/kind pkg/cluster/internal/providers/provider.go).
type Capabilities struct {
	// ControllerBuilds: Spec.ControllerManager, the build under test, runs
	// as the cluster's kube-controller-manager, with
	// Spec.ControllerManagerArgs. Without it the cluster's own controller
	// runs and only the stock build can be measured.
	ControllerBuilds bool
	// Proxy: the throttling proxy can be put between the controller and
	// the API server (Spec.Proxy).
	Proxy bool
	// PinningExtender: the pinning scheduler extender can be run and
	// kube-scheduler made to call it (Spec.Pinning).
	PinningExtender bool
	// SimulatedKubelets: the nodes run kubelet-sim, which can be told the
	// runtime timings it draws from (Spec.RuntimeTimings) and to record
	// FailedMount on a timeout (Spec.FailedMountOnTimeout).
	SimulatedKubelets bool
	// OwnKubelets: the provider configures its kubelets (node status
	// frequencies); an existing cluster's keep their own.
	OwnKubelets bool
	// OwnCSIDriver: the provider installs strandlab's CSI driver and its
	// StorageClass, and a scenario's volumes use that class; without it
	// they use a class the cluster already has (cluster.storageClass).
	OwnCSIDriver bool
	// NodeNames, when not nil, names the n worker nodes a cluster will
	// have before it starts (local: node-1..node-n), so a scenario's pins
	// are checked against them up front; nil: only the started cluster
	// says.
	NodeNames func(n int) []string
}

// CheckSpec refuses, by the spec field's name, what a provider with these
// capabilities cannot do with spec. A provider may refuse more
// (SpecChecker).
func (c Capabilities) CheckSpec(spec Spec) error {
	var errs []error
	refuse := func(field, what string) {
		errs = append(errs, fmt.Errorf("%s: %s", field, what))
	}
	if !c.ControllerBuilds {
		if spec.ControllerManager != "" {
			refuse("builds", fmt.Sprintf("a controller build needs its own kube-controller-manager (%s); the provider measures the cluster's own controller (builds: [stock])", spec.ControllerManager))
		}
		if len(spec.ControllerManagerArgs) > 0 {
			refuse("builds", fmt.Sprintf("kube-controller-manager flags %v cannot be given to the cluster's own controller", spec.ControllerManagerArgs))
		}
	}
	if !c.Proxy {
		// A proxy that holds nothing back (`proxy: {}`) is no proxy: the
		// run goes without one (ProxyHoldsBack).
		const why = "needs strandlab's throttling proxy between the cluster's kube-controller-manager and its API server, which the provider cannot put there (a managed control plane cannot be re-pointed)"
		for _, field := range proxyFields(spec.Proxy) {
			if field == "proxy.rules" {
				refuse(field, fmt.Sprintf("%d fault rule(s); each %s", len(spec.Proxy.Rules), why))
				continue
			}
			if field == "proxy.apiErrors" {
				refuse(field, fmt.Sprintf("%d error rule(s); each %s", len(spec.Proxy.APIErrors), why))
				continue
			}
			refuse(field, why)
		}
	}
	if spec.Pinning != nil && !c.PinningExtender {
		refuse("scheduling.pinning", "needs strandlab's pinning extender and a kube-scheduler configured to call it, which the provider cannot configure (a managed control plane does not allow it); use pinning: none (the cluster's scheduler places the pods)")
	}
	const kubelets = "configures strandlab's simulated kubelets; the cluster's kubelets keep their own configuration"
	if !c.OwnKubelets {
		if spec.NodeStatusUpdateFrequency != 0 {
			refuse("cluster.nodeStatusUpdateFrequency", kubelets)
		}
		if spec.NodeStatusReportFrequency != 0 {
			refuse("cluster.nodeStatusReportFrequency", kubelets)
		}
		if spec.KubeletVerbosity != 0 {
			refuse("--kubelet-verbosity", kubelets)
		}
	}
	if !c.SimulatedKubelets {
		if spec.FailedMountOnTimeout {
			refuse("cluster.failedMountOnTimeout", "only simulated kubelets can be told; real kubelets record what their version records")
		}
		if spec.RuntimeTimings != "" {
			refuse("--runtime-timings", "the provider's kubelets are real and their container runtime takes what it takes; runtime timings are drawn by simulated kubelets")
		}
	}
	if !c.OwnCSIDriver {
		if spec.CSIDeployment != "" {
			refuse("--csi-driver", spec.CSIDeployment+" deploys a CSI driver, which the provider does not install; the volumes come from the cluster's cluster.storageClass")
		}
		if spec.CSIDriverName != "" {
			refuse("cluster.csiDriver", "names strandlab's own CSI driver, which the provider does not install; the volumes come from the cluster's cluster.storageClass")
		}
		if len(spec.CSIErrors) > 0 {
			refuse("csiErrors", fmt.Sprintf("%d fault rule(s) for strandlab's own CSI driver, which the provider does not install; the cluster's driver cannot be told to fail", len(spec.CSIErrors)))
		}
	} else if len(spec.CSIErrors) > 0 && spec.CSIDeployment == CSIUpstream {
		refuse("csiErrors", "only strandlab's own CSI driver can be told to fail; --csi-driver upstream deploys upstream's")
	}
	return errors.Join(errs...)
}

// proxyFields are the fields of a proxy profile that hold something back;
// none for a profile without faults, or without a proxy.
func proxyFields(p *fault.Profile) []string {
	if p == nil {
		return nil
	}
	var fields []string
	if len(p.Rules) > 0 {
		fields = append(fields, "proxy.rules")
	}
	if len(p.APIErrors) > 0 {
		fields = append(fields, "proxy.apiErrors")
	}
	for _, f := range []struct {
		field string
		set   bool
	}{{"proxy.requestLatency", !p.RequestLatency.IsZero()}, {"proxy.qps", p.QPS != 0}, {"proxy.burst", p.Burst != 0}, {"proxy.queueLimit", p.QueueLimit != 0}} {
		if f.set {
			fields = append(fields, f.field)
		}
	}
	return fields
}

// ProxyHoldsBack is whether a proxy profile holds anything back; one that
// does not (`proxy: {}`) is accepted by a provider without Proxy, whose
// run then goes without a proxy.
func ProxyHoldsBack(p *fault.Profile) bool { return len(proxyFields(p)) > 0 }

// CheckSpec is everything provider refuses of spec: what its capabilities
// rule out, then what it refuses itself (SpecChecker), each refusal on a
// line of its own naming its field.
func CheckSpec(provider Provider, spec Spec) error {
	err := provider.Capabilities().CheckSpec(spec)
	if checker, ok := provider.(SpecChecker); ok {
		err = errors.Join(err, checker.CheckSpec(spec))
	}
	return err
}

// Optional abilities. A provider or a cluster implements those it has; the
// harness asks with a type assertion and does without the rest, as kind's
// providers split theirs.

// Starter starts the clusters of a prepared provider (Provider.Prepare).
type Starter interface {
	// Start brings a cluster up from spec, or fails leaving nothing behind.
	Start(ctx context.Context, spec Spec) (Cluster, error)
}

// SpecChecker is a provider that refuses some specs beyond what its
// Capabilities rule out (the existing provider needs a namespace and a
// StorageClass; kind cannot start more nodes than the Docker host's
// inotify limit holds). runner.Prepare calls CheckSpec with the
// spec each build would start with, before any cluster is touched; the
// error names what is refused by its scenario field.
type SpecChecker interface {
	CheckSpec(spec Spec) error
}

// Instrumented is a cluster that can tell the runner more about itself
// than its API does: its readings, in one place. A cluster with none (an
// existing cluster) does not implement it; InstrumentsOf answers for every
// cluster.
type Instrumented interface {
	Instruments() Instruments
}

// Instruments are the readings a cluster offers; each is nil where the
// cluster cannot take it.
type Instruments struct {
	// Proxy: the throttling proxy in the controller's path (local, kind).
	Proxy ProxyReader
	// Processes: the components run as processes on this machine (local).
	Processes ProcessLister
	// Usage: the cluster reads its components' accounting itself (kind).
	Usage UsageSampler
	// RuntimeOps: the nodes run real kubelets and runtimes (kind).
	RuntimeOps RuntimeOpsReader
	// APIRequests: the API server tells its requests apart by client
	// (local).
	APIRequests APIRequestCounter
	// CSIFaults: strandlab's CSI driver journals the calls it failed or
	// slowed (Spec.CSIErrors) where the harness can read them (local,
	// kind).
	CSIFaults CSIFaultReader
}

// InstrumentsOf is what c offers; nothing for a cluster that is not
// Instrumented.
func InstrumentsOf(c Cluster) Instruments {
	if i, ok := c.(Instrumented); ok {
		return i.Instruments()
	}
	return Instruments{}
}

// ProxyReader reads the throttling proxy between the controller manager and
// the API server.
type ProxyReader interface {
	// ProxyCounters are the proxy's totals since the cluster started.
	ProxyCounters(ctx context.Context) (fault.Counters, error)
	// ProxyJournal is what the proxy delayed or saw the controller write
	// since t (a bounded recent past).
	ProxyJournal(ctx context.Context, since time.Time) ([]fault.JournalEntry, error)
}

// CSIFaultReader reads the journal of strandlab's CSI driver: the calls it
// failed or slowed (fault.JournalCSIError).
type CSIFaultReader interface {
	// CSIFaultJournal is every injected CSI fault since the cluster started.
	CSIFaultJournal(ctx context.Context) ([]fault.JournalEntry, error)
}

// StateDirCluster is a cluster with local state: a kept cluster is stopped
// later from this directory (strandlab down DIR).
type StateDirCluster interface {
	StateDir() string
}

// DownArgsCluster is a kept cluster that `strandlab down` removes with
// arguments other than a state directory: DownArgs are those arguments
// (the existing provider: --kubeconfig FILE --namespace NS).
type DownArgsCluster interface {
	DownArgs() []string
}

// LogCluster is a cluster whose components' logs are files on this machine.
type LogCluster interface {
	// LogDir holds one log file per component.
	LogDir() string
}

// APIServerRestarter is a cluster that can restart its API server in place
// (same port, same storage): a fault clients must survive.
type APIServerRestarter interface {
	RestartAPIServer(ctx context.Context) error
}

// ComponentLister is a cluster that can tell which of its components are
// still running (empty after Stop): how tests check teardown.
type ComponentLister interface {
	Running() []string
}

// ProcessLister lists a cluster's components that run as processes on this
// machine: the runner reads each one's CPU time and peak memory from
// /proc around the churn (docs/performance.md). Providers whose
// components run elsewhere (kind's containers, an existing cluster) have
// none, and their reports have no such figures.
type ProcessLister interface {
	// Processes are the components' running processes.
	Processes() []Process
}

// UsageSampler reads a cluster's components' accounting itself
// (the kind provider: its node containers' control groups, on this
// machine): what each component has used so far, as samples the runner
// takes around the churn like ProcessLister's (docs/performance.md). An
// error means no figures for this reading, not a failed run.
type UsageSampler interface {
	SampleUsage(ctx context.Context) ([]usage.Sample, error)
}

// RuntimeOpsReader reads a cluster whose nodes run real kubelets and
// container runtimes (kind): how long the runtime has taken to start and
// stop pods so far, from the kubelets' own metrics, read around the churn
// like UsageSampler's samples. kubelet-sim's simulated runtime draws from
// what it reads (docs/kubelet-sim.md).
type RuntimeOpsReader interface {
	RuntimeOps(ctx context.Context) (runtimeops.Ops, error)
}

// Process is one running process of a component.
type Process struct {
	// Name is the process's name in the cluster: the component's
	// ("etcd"), or the component's and its node's ("kubelet-sim-node-2").
	Name string
	PID  int
}

// APIRequestCounter counts the requests of a cluster whose API server tells
// them apart by client (the local provider's per-client FlowSchemas,
// docs/performance.md).
type APIRequestCounter interface {
	// APIRequestsByClient are the requests the API server has let through
	// since it started, by client name ("kube-controller-manager",
	// "harness", ...; "other" for requests of no known client).
	APIRequestsByClient(ctx context.Context) (map[string]float64, error)
}

// HarnessRateLimits lifts client-go's default client limits (5 QPS, burst
// 10) on the harness's own clients of a cluster strandlab started: waiting
// in the client would delay its deletes after their cycles were stamped as
// started, and so lengthen every "delete → ..." timing by the harness's own
// queue. The same on every provider that starts its clusters, so their
// timings compare; the components keep their own defaults.
func HarnessRateLimits(cfg *rest.Config) {
	cfg.QPS, cfg.Burst = 200, 400
}

// Registry holds the providers a harness can choose from by name. The CLI
// builds one; there is no global registry.
type Registry struct {
	providers map[string]Provider
	names     []string
}

// NewRegistry returns a registry of providers (names must be distinct).
func NewRegistry(providers ...Provider) *Registry {
	r := &Registry{providers: map[string]Provider{}}
	for _, p := range providers {
		if _, dup := r.providers[p.Name()]; dup {
			panic("cluster: provider " + p.Name() + " registered twice")
		}
		r.providers[p.Name()] = p
		r.names = append(r.names, p.Name())
	}
	return r
}

// Names lists the registered providers in registration order.
func (r *Registry) Names() []string { return append([]string(nil), r.names...) }

// Provider returns the provider called name without asking whether it is
// available here: checking a scenario file, or stopping a kept cluster,
// needs no more than the provider's own code.
func (r *Registry) Provider(name string) (Provider, error) {
	p, ok := r.providers[name]
	if !ok {
		return nil, fmt.Errorf("provider %q: unknown (known: %s)", name, strings.Join(r.names, ", "))
	}
	return p, nil
}

// Capabilities returns what the provider called name can do (Provider).
func (r *Registry) Capabilities(name string) (Capabilities, error) {
	p, err := r.Provider(name)
	if err != nil {
		return Capabilities{}, err
	}
	return p.Capabilities(), nil
}

// Lookup returns the provider called name and checks that it is available
// on this machine: an unknown or unavailable provider is an error naming it
// and what is missing.
func (r *Registry) Lookup(ctx context.Context, name string) (Provider, error) {
	p, ok := r.providers[name]
	if !ok {
		return nil, fmt.Errorf("provider %q: unknown (known: %s)", name, strings.Join(r.names, ", "))
	}
	if err := p.Available(ctx); err != nil {
		return nil, fmt.Errorf("provider %q is not available here: %w", name, err)
	}
	return p, nil
}
