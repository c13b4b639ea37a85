// Package kind is the e2e suite of the kind provider: one kind cluster (real
// kubelets in Docker, the offline node image, strandlab's CSI driver in the
// cluster) is started for the whole package through e2e-framework, and the
// features below check it as a user would. Without Docker the suite is
// skipped with one line.
package kind

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vladimirvivien/gexe"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster"
)

const nodeCount = 2

var s suite.Suite

func TestMain(m *testing.M) {
	code := suite.RunOn(m, "kind", "e2e-kind", cluster.Spec{Nodes: nodeCount}, &s)
	if code == 0 && s.ClusterProvider != nil {
		// After the last cluster is gone, strandlab's kind network must be
		// gone too (the per-cluster checks are in TestTeardown).
		if p := gexe.RunProc("docker network ls --quiet --filter name=^strandlab-kind$"); strings.TrimSpace(p.Result()) != "" {
			fmt.Fprintf(os.Stderr, "e2e/kind: the Docker network strandlab-kind is left after the last cluster: %s\n", p.Result())
			code = 1
		}
	}
	os.Exit(code)
}
