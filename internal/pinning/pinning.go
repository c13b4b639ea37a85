// Package pinning is the configuration of the pinning scheduler extender:
// which StatefulSet ordinal is held to which node, and how slow its filter
// answers. It is pure data with its validation, so scenarios, the cluster
// seam and the providers can carry it without importing the extender's
// server (docs/design.md, "Packages").
package pinning

import (
	"fmt"
	"time"

	"github.com/strandlab/strandlab/internal/fault"
)

// DefaultConfigMapName holds sticky pins.
const DefaultConfigMapName = "strandlab-pinning"

// Config configures the extender.
type Config struct {
	// Static pins: ordinal -> node, enforced from the start.
	Static []StaticPin `json:"static,omitempty"`
	// Sticky records each ordinal's first placement (in the ConfigMap
	// ConfigMapName of the pod's namespace) and enforces it afterwards.
	Sticky        bool   `json:"sticky,omitempty"`
	ConfigMapName string `json:"configMapName,omitempty"`
	// Latency delays every filter answer; Seed makes the draws repeat.
	Latency fault.Delay `json:"latency,omitzero"`
	Seed    uint64      `json:"seed,omitempty"`
}

// StaticPin is one explicit ordinal -> node pin.
type StaticPin struct {
	Namespace   string `json:"namespace"`
	StatefulSet string `json:"statefulSet"`
	Ordinal     int    `json:"ordinal"`
	Node        string `json:"node"`
}

// Validate reports the first bad field.
func (c *Config) Validate() error {
	for i, p := range c.Static {
		if p.Namespace == "" || p.StatefulSet == "" || p.Node == "" || p.Ordinal < 0 {
			return fmt.Errorf("static[%d]: namespace, statefulSet, node and a non-negative ordinal are required", i)
		}
	}
	if err := c.Latency.Validate(); err != nil {
		return fmt.Errorf("latency.%w", err)
	}
	return nil
}

// SchedulerConfiguration is the KubeSchedulerConfiguration that makes
// kube-scheduler call the extender at addr (host:port) as a filter, with
// its client kubeconfig at kubeconfig. Both providers write it. The
// extender's slowest answer (c's latency bound) must fit in the
// scheduler's timeout, or the "slow extender" becomes a failing one.
func (c *Config) SchedulerConfiguration(kubeconfig, addr string) string {
	timeout := 30*time.Second + c.Latency.Bound()
	return fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
leaderElection:
  leaderElect: false
extenders:
- urlPrefix: "http://%s"
  filterVerb: filter
  nodeCacheCapable: true
  ignorable: false
  httpTimeout: %s
`, kubeconfig, addr, timeout)
}
