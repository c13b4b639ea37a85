// Package clustertest has test doubles of the cluster seam, for tests of
// what happens before any cluster starts (provider lookup, validation).
package clustertest

import (
	"context"
	"errors"

	"github.com/strandlab/strandlab/internal/cluster"
)

// Provider is a provider that starts nothing. Missing is what Available
// reports (nil: available).
type Provider struct {
	ProviderName string
	Missing      error
}

func (p Provider) Name() string                    { return p.ProviderName }
func (p Provider) Available(context.Context) error { return p.Missing }
func (p Provider) Start(context.Context, cluster.Spec) (cluster.Cluster, error) {
	return nil, errors.New("clustertest: a fake provider starts no cluster")
}

// BuildsProvider is a Provider that can run controller builds, as the local
// provider can.
type BuildsProvider struct{ Provider }

func (BuildsProvider) RunsControllerBuilds() {}

var _ cluster.ControllerBuildRunner = BuildsProvider{}
