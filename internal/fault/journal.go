package fault

import "time"

// Kinds of journal entries.
const (
	// JournalEventDelayed: a watch event the proxy held back.
	JournalEventDelayed = "event_delayed"
	// JournalRequest: a write the controller sent for a node's status or a
	// VolumeAttachment.
	JournalRequest = "request"
	// JournalAPIError: a request the proxy answered with an error itself
	// (an APIError rule); Code is the status it answered.
	JournalAPIError = "api_error"
	// JournalCSIError: a CSI call strandlab's driver failed or slowed (a
	// CSIError rule); Verb is the CSI method, Name the volume's PV, Node
	// the call's node, Code the gRPC code (0: slowed only), Body the rule,
	// the volume's handle and the latency.
	JournalCSIError = "csi_error"
)

// JournalEntry is one thing the proxy saw that a stranding's timeline
// needs: a watch event it held back, or a write the controller sent for a
// node's status or a VolumeAttachment (with the body, so an empty patch
// `{}` shows).
type JournalEntry struct {
	Time time.Time `json:"time"`
	// Kind: JournalEventDelayed, JournalRequest, JournalAPIError or
	// JournalCSIError.
	Kind     string `json:"kind"`
	Resource string `json:"resource"`
	// Name is the object's name when known (node or VolumeAttachment).
	Name string `json:"name,omitempty"`
	// Verb: the watch event type (event_delayed) or the request verb.
	Verb string `json:"verb"`
	// Release is when a delayed event reached the controller.
	Release time.Time `json:"release,omitzero"`
	// Body: the request body (truncated), or the delayed node event's
	// status.volumesAttached as a JSON list.
	Body string `json:"body,omitempty"`
	Code int    `json:"code,omitempty"`
	// Node is the node of a CSI call (csi_error).
	Node string `json:"node,omitempty"`
}

// Counters are the proxy's totals since it started.
type Counters struct {
	Requests      map[string]int64 `json:"requests"` // "VERB resource[/subresource]" -> n
	EventsDelayed int64            `json:"events_delayed"`
	MaxQueueDepth int64            `json:"max_queue_depth"`
	Undecodable   int64            `json:"undecodable_events"`
	// APIErrors counts the requests the proxy answered with an error itself.
	APIErrors int64 `json:"api_errors,omitempty"`
	// WatchLag is, per watched resource, how long the proxy's watch events
	// waited after they were due (their arrival plus any delay a rule drew)
	// until the controller's connection took them: the controller not
	// reading its watch, measured where the proxy can see it. What the
	// controller does with an event after reading it is not in it.
	WatchLag map[string]Histogram `json:"watch_lag,omitempty"`
}

// Histogram is counts by bucket: Counts[i] took at most Bounds[i] seconds
// and more than Bounds[i-1]; the last count, one past the bounds, took
// longer than the last bound. It is runtimeops.Histogram's layout (the
// report converts it to that type, for its arithmetic), kept here so that
// the fault vocabulary stays a leaf.
type Histogram struct {
	Bounds []float64 `json:"bounds_seconds"`
	Counts []uint64  `json:"counts"`
}
