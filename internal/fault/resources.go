package fault

import (
	"fmt"
	"slices"
	"strings"
)

// Resources are the watched resources a rule may name: the plural names of
// Kubernetes v1.37's built-in resources (core, apps, batch, storage,
// coordination, discovery, policy, rbac, networking, certificates,
// autoscaling, scheduling, node, resource, flowcontrol, admissionregistration,
// apiextensions). A name outside it would match no watch and silently turn a
// faulted scenario into its own control. fault is a leaf and cannot import
// client-go; TestResourcesAreBuiltIn (internal/proxy) holds this list to
// client-go's scheme.
var Resources = []string{
	// core
	"componentstatuses", "configmaps", "endpoints", "events", "limitranges", "namespaces", "nodes",
	"persistentvolumeclaims", "persistentvolumes", "pods", "podtemplates", "replicationcontrollers",
	"resourcequotas", "secrets", "serviceaccounts", "services",
	// apps, batch
	"controllerrevisions", "daemonsets", "deployments", "replicasets", "statefulsets", "cronjobs", "jobs",
	// storage
	"csidrivers", "csinodes", "csistoragecapacities", "storageclasses", "volumeattachments", "volumeattributesclasses",
	// coordination, discovery, policy, networking
	"leases", "endpointslices", "poddisruptionbudgets", "ingressclasses", "ingresses", "networkpolicies",
	"ipaddresses", "servicecidrs",
	// rbac, certificates
	"clusterrolebindings", "clusterroles", "rolebindings", "roles", "certificatesigningrequests",
	// autoscaling, scheduling, node, resource, flowcontrol, admission, CRDs
	"horizontalpodautoscalers", "priorityclasses", "runtimeclasses",
	"deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices",
	"flowschemas", "prioritylevelconfigurations",
	"mutatingwebhookconfigurations", "validatingwebhookconfigurations",
	"validatingadmissionpolicies", "validatingadmissionpolicybindings",
	"customresourcedefinitions",
}

// checkResource refuses a resource that is not in Resources, suggesting the
// nearest one for a typo ("nodez": did you mean "nodes"?).
func checkResource(name string) error {
	if slices.Contains(Resources, name) {
		return nil
	}
	if near := nearest(strings.ToLower(name), Resources); near != "" {
		return fmt.Errorf("%q is not a built-in resource; did you mean %q?", name, near)
	}
	return fmt.Errorf("%q is not a built-in resource (a plural, lower-case resource name such as nodes, pods or volumeattachments)", name)
}

// nearest is the candidate within edit distance 2 of s (or equal to it
// ignoring case), or "".
func nearest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance, two rows at a time.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
