package cluster_test

import (
	"strings"
	"testing"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/existing"
	"github.com/strandlab/strandlab/internal/cluster/kind"
	"github.com/strandlab/strandlab/internal/cluster/local"
	"github.com/strandlab/strandlab/internal/scenario"
)

const churn = `workload:
  statefulSets:
  - {name: web, replicas: 3}
churn: {cycles: 20}
`

// What a scenario file asks of a provider is checked against what the
// provider says it can do, not against its name.
func TestCheckScenario(t *testing.T) {
	for _, tc := range []struct {
		name, cluster string
		provider      cluster.Provider
		want          string // "" accepted
	}{
		{"local, strandlab's class", "cluster: {provider: local, nodes: 3}\n", &local.Provider{}, ""},
		{"another storage class on local", "cluster: {provider: local, nodes: 3, storageClass: standard}\n", &local.Provider{},
			`cluster.storageClass: "standard": the local provider's only class is strandlab-hostpath`},
		{"another storage class on kind", "cluster: {provider: kind, nodes: 3, storageClass: standard}\n", &kind.Provider{},
			`cluster.storageClass: "standard": the kind provider's only class`},
		{"another storage class on existing", "cluster: {provider: existing, nodes: 3, storageClass: standard}\n", &existing.Provider{}, ""},
		{"failedMountOnTimeout on local", "cluster: {provider: local, nodes: 3, failedMountOnTimeout: true}\n", &local.Provider{}, ""},
		{"failedMountOnTimeout on kind", "cluster: {provider: kind, nodes: 3, failedMountOnTimeout: true}\n", &kind.Provider{}, "cluster.failedMountOnTimeout"},
		{"static pin to a node the local cluster does not have",
			"cluster: {provider: local, nodes: 3}\nscheduling: {pinning: static, static: [{statefulSet: web, ordinal: 0, node: node-4}]}\n", &local.Provider{},
			`scheduling.static[0].node: "node-4" is not a node of the local provider's cluster (node-1 to node-3)`},
		{"CSI fault for a node the local cluster does not have",
			"cluster: {provider: local, nodes: 3}\ncsiErrors: [{call: ControllerUnpublishVolume, code: INTERNAL, nth: 1, nodes: [node-1, node-9]}]\n", &local.Provider{},
			`csiErrors[0].nodes[1]: "node-9" is not a node of the local provider's cluster (node-1 to node-3)`},
		{"CSI fault on kind: its nodes checked once the cluster is up",
			"cluster: {provider: kind, nodes: 3}\ncsiErrors: [{call: ControllerUnpublishVolume, code: INTERNAL, nth: 1, nodes: [node-9]}]\n", &kind.Provider{}, ""},
		{"static pin on kind: checked once the cluster is up",
			"cluster: {provider: kind, nodes: 3}\nscheduling: {pinning: static, static: [{statefulSet: web, ordinal: 0, node: node-4}]}\n", &kind.Provider{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := scenario.Parse([]byte(tc.cluster + churn))
			if err != nil {
				t.Fatal(err)
			}
			err = tc.provider.Capabilities().CheckScenario(sc)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckScenario = %v, want %q", err, tc.want)
			}
		})
	}
}
