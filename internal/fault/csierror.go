package fault

import (
	"fmt"
	"slices"
)

// CSIError makes strandlab's CSI driver fail or slow down the matching calls
// of one CSI method: the ControllerUnpublish that times out or fails, the
// NodeStage that cannot complete, of the attach/detach controller's older
// bugs. The driver applies it before it does the call's work: an injected
// error leaves the volume's state as it was; a latency alone delays the
// call's real answer, and the work is done even if the caller gave up
// waiting (a slow storage back end finishes what it started).
type CSIError struct {
	// Call is the CSI method: one of CSICalls.
	Call string `json:"call"`
	// Code is the gRPC status code of the error, by its canonical name
	// (UNAVAILABLE, DEADLINE_EXCEEDED, ...: one of CSICodes); empty with a
	// Latency: no error, a slow call.
	Code string `json:"code,omitempty"`
	// Latency delays the answer, the error's or the call's own.
	Latency Delay `json:"latency,omitzero"`
	// Nodes limits the rule to calls for these nodes (the node a volume is
	// published to or unpublished from, the node instance that stages or
	// publishes it); empty: all.
	Nodes []string `json:"nodes,omitempty"`
	// PVCs limits the rule to the volumes of these PersistentVolumeClaims,
	// by name (the provisioner tells the driver each volume's claim); empty:
	// all.
	PVCs []string `json:"pvcs,omitempty"`
	// Fraction of the matching calls affected, drawn with the scenario's
	// seed; or Nth: only the n-th matching call (from 1). Exactly one.
	Fraction float64 `json:"fraction,omitempty"`
	Nth      int     `json:"nth,omitempty"`
	// Count bounds how many calls the rule affects (0: no bound), so that a
	// scenario can fail a few detaches and then let them succeed. Counted
	// per driver instance: the controller instance for Controller* calls,
	// each node's instance for Node* calls.
	Count int `json:"count,omitempty"`
}

// CSICalls are the CSI methods a CSIError may name: those on the path of an
// attach and a detach.
var CSICalls = []string{
	"ControllerPublishVolume", "ControllerUnpublishVolume",
	"NodeStageVolume", "NodeUnstageVolume", "NodePublishVolume", "NodeUnpublishVolume",
}

// CSICodes are the gRPC codes a CSIError may answer with, by the names
// google.golang.org/grpc/codes parses; OK is not an error.
var CSICodes = []string{
	"CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
	"PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
	"UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
}

// Validate reports the first bad field by its JSON name.
func (e CSIError) Validate() error {
	if e.Call == "" {
		return fmt.Errorf("call: required, one of %v", CSICalls)
	}
	if !slices.Contains(CSICalls, e.Call) {
		return fmt.Errorf("call: %q is not one of %v", e.Call, CSICalls)
	}
	if e.Code != "" && !slices.Contains(CSICodes, e.Code) {
		return fmt.Errorf("code: %q is not one of %v", e.Code, CSICodes)
	}
	if err := e.Latency.Validate(); err != nil {
		return fmt.Errorf("latency.%w", err)
	}
	if e.Code == "" && e.Latency.IsZero() {
		// Neither would change nothing: the faulted scenario would silently
		// be its own control.
		return fmt.Errorf("code, latency: set a code, a latency or both")
	}
	for i, n := range e.Nodes {
		if n == "" {
			return fmt.Errorf("nodes[%d]: empty", i)
		}
	}
	for i, p := range e.PVCs {
		if p == "" {
			return fmt.Errorf("pvcs[%d]: empty", i)
		}
	}
	if err := validateSelection(e.Fraction, e.Nth, "calls"); err != nil {
		return err
	}
	if e.Count < 0 {
		return fmt.Errorf("count: %d is negative", e.Count)
	}
	return nil
}

// Matches tells whether a call of method for node and the volume of claim
// pvc ("" when the driver does not know it) is one the rule selects.
func (e CSIError) Matches(method, node, pvc string) bool {
	return method == e.Call &&
		(len(e.Nodes) == 0 || slices.Contains(e.Nodes, node)) &&
		(len(e.PVCs) == 0 || slices.Contains(e.PVCs, pvc))
}

// ValidateCSIErrors validates a list of rules, naming the bad one by its
// index (csiErrors[1].code).
func ValidateCSIErrors(rules []CSIError) error {
	for i, e := range rules {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("csiErrors[%d].%w", i, err)
		}
	}
	return nil
}
