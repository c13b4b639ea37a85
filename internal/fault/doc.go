// Package fault is strandlab's fault vocabulary: the delay distribution
// (one type, one validator, one seeded sampler), the throttling proxy's
// profile and rules, and what the proxy reports back (its journal entries
// and counters). It is a leaf: the proxy, the pinning extender, scenarios,
// timelines and the report all speak it, and it imports none of them, no
// client-go and no metrics library (docs/design.md, "Packages").
package fault
