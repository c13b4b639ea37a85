// Package e2eprovider plugs strandlab's cluster providers into
// sigs.k8s.io/e2e-framework, so suites create and destroy a strandlab cluster
// with envfuncs.CreateCluster / envfuncs.DestroyCluster exactly as they would
// a kind cluster.
package e2eprovider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/strandlab/strandlab/internal/cluster"
)

// Provider adapts a prepared cluster provider to e2e-framework's
// E2EClusterProvider.
type Provider struct {
	name    string // the cluster provider's
	starter cluster.Starter
	spec    cluster.Spec
	version string
	running cluster.Cluster
}

var _ types.E2EClusterProvider = (*Provider)(nil)

// New returns an e2e-framework provider that starts clusters of the
// provider named name with starter (what its Prepare returned) from spec
// (spec.Name is overridden by WithName).
func New(name string, starter cluster.Starter, spec cluster.Spec) *Provider {
	return &Provider{name: name, starter: starter, spec: spec}
}

// Cluster is the running cluster (nil before Create), for suites that need
// more than a kubeconfig (component versions, start time).
func (p *Provider) Cluster() cluster.Cluster { return p.running }

func (p *Provider) SetDefaults() types.E2EClusterProvider {
	if p.spec.Nodes == 0 {
		p.spec.Nodes = 3
	}
	return p
}

func (p *Provider) WithName(name string) types.E2EClusterProvider {
	p.spec.Name = name
	return p
}

// WithVersion records the version a suite expects; Create fails when the
// cluster's version differs (the local provider runs the pinned version only).
func (p *Provider) WithVersion(version string) types.E2EClusterProvider {
	p.version = version
	return p
}

// WithPath is not used: binaries come from the provider's build.
func (p *Provider) WithPath(string) types.E2EClusterProvider { return p }

func (p *Provider) WithOpts(opts ...types.ClusterOpts) types.E2EClusterProvider {
	for _, o := range opts {
		o(p)
	}
	return p
}

// Create starts the cluster and returns its kubeconfig path.
func (p *Provider) Create(ctx context.Context, _ ...string) (string, error) {
	if p.running != nil {
		return p.running.Kubeconfig(), nil
	}
	if p.spec.OutputDir == "" {
		dir, err := os.MkdirTemp("", "strandlab-e2e-logs-")
		if err != nil {
			return "", err
		}
		p.spec.OutputDir = dir
	}
	c, err := p.starter.Start(ctx, p.spec)
	if err != nil {
		return "", err
	}
	if p.version != "" && c.KubernetesVersion() != p.version {
		stopErr := c.Stop(ctx)
		return "", errors.Join(fmt.Errorf("%s provider runs Kubernetes %s, suite asked for %s", p.name, c.KubernetesVersion(), p.version), stopErr)
	}
	p.running = c
	return c.Kubeconfig(), nil
}

// CreateWithConfig is Create: a strandlab cluster is configured by its Spec.
func (p *Provider) CreateWithConfig(ctx context.Context, _ string) (string, error) {
	return p.Create(ctx)
}

func (p *Provider) GetKubeconfig() string {
	if p.running == nil {
		return ""
	}
	return p.running.Kubeconfig()
}

func (p *Provider) GenerateKubeconfig(...string) (string, error) {
	if p.running == nil {
		return "", errors.New("cluster not created")
	}
	return p.running.Kubeconfig(), nil
}

// GetKubectlContext is the context name in the admin kubeconfig.
func (p *Provider) GetKubectlContext() string { return "admin" }

// ExportLogs copies the components' log files to dest.
func (p *Provider) ExportLogs(ctx context.Context, dest string) error {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	return exec.CommandContext(ctx, "cp", "-r", filepath.Join(p.spec.OutputDir, "logs"), dest).Run()
}

func (p *Provider) Destroy(ctx context.Context) error {
	if p.running == nil {
		return nil
	}
	err := p.running.Stop(ctx)
	p.running = nil
	return err
}

// WaitForControlPlane returns at once: Start returns only when the control
// plane is healthy and every node is Ready.
func (p *Provider) WaitForControlPlane(context.Context, klient.Client) error {
	if p.running == nil {
		return errors.New("cluster not created")
	}
	return nil
}

func (p *Provider) KubernetesRestConfig() *rest.Config {
	if p.running == nil {
		return nil
	}
	return p.running.RESTConfig()
}
