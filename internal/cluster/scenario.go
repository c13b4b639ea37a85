package cluster

import (
	"errors"
	"fmt"
	"slices"

	"github.com/strandlab/strandlab/internal/scenario"
	"github.com/strandlab/strandlab/manifests"
)

// CheckScenario refuses, by the scenario field's path, what sc asks of a
// provider with these capabilities that a scenario file alone shows: a
// StorageClass other than strandlab's where the provider installs its own
// driver, knobs only simulated kubelets have, pins to nodes the cluster
// will not have. What depends on the spec a build starts with is
// CheckSpec's.
func (c Capabilities) CheckScenario(sc *scenario.Scenario) error {
	provider := sc.Cluster.Provider
	var errs []error
	if class := sc.Cluster.StorageClass; class != "" && class != manifests.StorageClassName && c.OwnCSIDriver {
		errs = append(errs, fmt.Errorf("cluster.storageClass: %q: the %s provider's only class is %s (strandlab's CSI driver); another class is for a provider that uses the cluster's own (existing)", class, provider, manifests.StorageClassName))
	}
	if sc.Cluster.FailedMountOnTimeout && !c.SimulatedKubelets {
		errs = append(errs, fmt.Errorf("cluster.failedMountOnTimeout: only simulated kubelets can be told; the %s provider's kubelets record what their version records", provider))
	}
	if c.NodeNames != nil {
		nodes := c.NodeNames(sc.Cluster.Nodes)
		for i, p := range sc.Scheduling.Static {
			if !slices.Contains(nodes, p.Node) {
				errs = append(errs, fmt.Errorf("scheduling.static[%d].node: %q is not a node of the %s provider's cluster (%s to %s)", i, p.Node, provider, nodes[0], nodes[len(nodes)-1]))
			}
		}
		for i, e := range sc.CSIErrors {
			for j, n := range e.Nodes {
				if !slices.Contains(nodes, n) {
					errs = append(errs, fmt.Errorf("csiErrors[%d].nodes[%d]: %q is not a node of the %s provider's cluster (%s to %s)", i, j, n, provider, nodes[0], nodes[len(nodes)-1]))
				}
			}
		}
	}
	return errors.Join(errs...)
}
