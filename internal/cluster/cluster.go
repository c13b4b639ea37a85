// Package cluster defines the seam between the harness and the clusters it
// runs on: a Provider starts a Cluster from a Spec; local, kind and existing
// clusters all look the same to the runner and to e2e-framework suites.
package cluster

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	"github.com/strandlab/strandlab/internal/fault"

	"github.com/strandlab/strandlab/internal/pinning"

	"github.com/strandlab/strandlab/internal/provenance"
)

// Spec is what the harness asks of a cluster.
type Spec struct {
	// Name identifies the cluster (directory names, kubeconfig context).
	Name string
	// Nodes is the number of worker nodes.
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
	// FailedMountOnTimeout: the simulated kubelets record FailedMount when a
	// pod's volumes are not mounted within 2m3s, as kubelets up to v1.27 did.
	FailedMountOnTimeout bool
	// Extender, if set, runs the pinning scheduler extender with this
	// configuration and makes kube-scheduler call it.
	Pinning *pinning.Config
	// Proxy, if set, puts the throttling proxy with this fault profile
	// between kube-controller-manager and kube-apiserver.
	Proxy *fault.Profile
	// ControllerManagerArgs are extra kube-controller-manager flags (a later
	// flag of the same name wins over the provider's default).
	ControllerManagerArgs []string
}

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

// ProxiedCluster is a cluster whose controller manager talks to the API
// server through the throttling proxy.
type ProxiedCluster interface {
	Cluster
	// ProxyCounters are the proxy's totals since the cluster started.
	ProxyCounters(ctx context.Context) (fault.Counters, error)
	// ProxyJournal is what the proxy delayed or saw the controller write
	// since t (a bounded recent past).
	ProxyJournal(ctx context.Context, since time.Time) ([]fault.JournalEntry, error)
}

// Provider starts clusters of one kind.
type Provider interface {
	Name() string
	Start(ctx context.Context, spec Spec) (Cluster, error)
}
