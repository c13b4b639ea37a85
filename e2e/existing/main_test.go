package existing

import (
	"os"
	"testing"
	"time"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster"
)

// nodeCount is existing-control's cluster.nodes.
const nodeCount = 3

var s suite.Suite

// The package's one local cluster plays a cluster strandlab did not create.
// Its owner chose a 1 s node status pace (control.yaml's; the existing
// provider cannot set it, so the cluster brings it), which keeps a cycle
// to a few seconds.
func TestMain(m *testing.M) {
	os.Exit(suite.Run(m, "e2e-existing", cluster.Spec{Nodes: nodeCount, NodeStatusUpdateFrequency: time.Second}, &s))
}
