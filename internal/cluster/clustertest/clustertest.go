// Package clustertest has test doubles of the cluster seam, for tests of
// what happens before any cluster starts (provider lookup, validation).
package clustertest

import (
	"context"
	"errors"
	"fmt"

	"github.com/strandlab/strandlab/internal/cluster"
)

// Provider is a provider that starts nothing. Missing is what Available
// reports (nil: available); Abilities is what it says it can do (none:
// like a cluster strandlab did not create).
type Provider struct {
	ProviderName string
	Missing      error
	Abilities    cluster.Capabilities
}

func (p Provider) Name() string                                     { return p.ProviderName }
func (p Provider) Available(context.Context) error                  { return p.Missing }
func (p Provider) Capabilities() cluster.Capabilities               { return p.Abilities }
func (p Provider) Prepare(context.Context) (cluster.Starter, error) { return p, nil }
func (p Provider) Start(context.Context, cluster.Spec) (cluster.Cluster, error) {
	return nil, errors.New("clustertest: a fake provider starts no cluster")
}
func (p Provider) PlanDown(context.Context, string) (fmt.Stringer, error) {
	return nil, errors.New("clustertest: a fake provider keeps no cluster")
}
func (p Provider) Down(context.Context, string) error {
	return errors.New("clustertest: a fake provider keeps no cluster")
}

// Everything is what a provider that starts its own clusters can do (the
// local provider, less its node names).
var Everything = cluster.Capabilities{ControllerBuilds: true, Proxy: true, PinningExtender: true,
	SimulatedKubelets: true, OwnKubelets: true, OwnCSIDriver: true}
