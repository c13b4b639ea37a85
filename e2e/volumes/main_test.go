// Package volumes is the e2e suite of the attach path on a local cluster:
// PVCs provisioned by the real csi-provisioner, VolumeAttachments attached by
// the real csi-attacher through the real attach/detach controller, and the
// simulated kubelet mounting only what node status says is attached.
package volumes

import (
	"os"
	"testing"
	"time"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/fault"
)

var s suite.Suite

// faultyClaim is the one claim whose attaches the suite's CSI driver fails
// (TestCSIFaults); no other assessment uses it.
const faultyClaim = "data-0-faulty-0"

// faultyAttaches is how many of its attaches fail.
const faultyAttaches = 2

// A 1 s node status pace keeps the suite quick; the order of events it
// checks does not depend on the pace.
func TestMain(m *testing.M) {
	os.Exit(suite.Run(m, "e2e-volumes", cluster.Spec{Nodes: 3, NodeStatusUpdateFrequency: time.Second, Seed: 1,
		CSIErrors: []fault.CSIError{{Call: "ControllerPublishVolume", Code: "UNAVAILABLE", PVCs: []string{faultyClaim}, Fraction: 1, Count: faultyAttaches}},
	}, &s))
}
