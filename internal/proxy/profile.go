// Package proxy is strandlab's watch-aware throttling proxy between
// kube-controller-manager and kube-apiserver. It forwards every request with
// the controller's own identity and can hold watch events back — per
// resource, per event type, per predicate (e.g. a Node update that drops an
// entry from status.volumesAttached) — by a seeded delay distribution,
// without reordering, splitting or changing a frame. It can also add request
// latency and throttle to a QPS. Delayed events wait in a bounded queue per
// watch; when it is full the proxy stops reading from the API server
// (backpressure) instead of buffering without limit.
package proxy

// The fault vocabulary the proxy applies (Profile, Rule, Delay, the
// predicates, journal entries and counters) lives in internal/fault, shared
// with the scenarios, the extender, timelines and the report.
