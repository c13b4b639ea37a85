// Package cluster is the e2e suite of the local cluster provider: one real
// local cluster (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, CSI parts, simulated kubelets) is started for the whole
// package through e2e-framework, and the features below check it as a user
// would.
package cluster

import (
	"os"
	"testing"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster"
)

const nodeCount = 3

var s suite.Suite

func TestMain(m *testing.M) {
	os.Exit(suite.Run(m, "e2e-cluster", cluster.Spec{Nodes: nodeCount}, &s))
}
