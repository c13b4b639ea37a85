// Package cycle is the record of the churn: what one delete/recreate cycle
// of a StatefulSet pod produced (how it ended, its latencies, the stranding
// it found with its timeline) and a run's result. The churn runner writes
// it; the report summarises it. It is pure data, so the report needs
// neither the churn runner nor an API client (docs/design.md, "Packages").
package cycle

import (
	"time"

	"github.com/strandlab/strandlab/internal/detector"
	"github.com/strandlab/strandlab/internal/timeline"
)

// Outcome is how a cycle ended.
type Outcome string

const (
	// Running: the replacement pod reached Running and Ready.
	Running Outcome = "running"
	// TimedOut: the replacement was not Running within the cycle timeout.
	TimedOut Outcome = "timed_out"
	// Stranded: the detector found the replacement's volume stranded.
	Stranded Outcome = "stranded"
)

// Cycle is what happened in one delete/recreate cycle.
type Cycle struct {
	Index int `json:"index"`
	// Round is the round of the churn the cycle belongs to (a round deletes
	// every target pod once): the unit the report's rounds interval treats
	// as independent (docs/statistics.md).
	Round   int     `json:"round"`
	Pod     string  `json:"pod"`
	Outcome Outcome `json:"outcome"`
	OldNode string  `json:"old_node"`
	NewNode string  `json:"new_node,omitempty"`
	// DeleteToRunning: from the delete request to the replacement Running.
	DeleteToRunning time.Duration `json:"delete_to_running_ns,omitempty"`
	// CreateToRunning: from the replacement first seen by the harness to it
	// Running (creationTimestamp has only second precision).
	CreateToRunning time.Duration `json:"create_to_running_ns,omitempty"`
	// DeleteToDetach: from the delete request to the detach request (the
	// VolumeAttachment's deletion) of the pod's volume on its old node, as
	// the harness's watches saw it; 0 when the controller did not detach
	// within the cycle (the replacement came back to the node first).
	DeleteToDetach time.Duration `json:"delete_to_detach_ns,omitempty"`
	// ListedToDetach: from the volume's last addition to the old node's
	// status.volumesAttached (the controller's add patch) to that detach
	// request: the window a stale node informer opens (docs/kind.md,
	// "Calibration"). 0 when unknown.
	ListedToDetach time.Duration `json:"listed_to_detach_ns,omitempty"`
	// DeleteToReleased: from the delete request to the old node's kubelet
	// dropping the pod's volume from status.volumesInUse (it unmounted
	// it), as the harness's watches saw it; 0 when it stayed in use
	// within the cycle. The controller detaches only after it, so this
	// against ReplacementBoundAt says why a cycle did or did not detach.
	DeleteToReleased time.Duration `json:"delete_to_released_ns,omitempty"`
	// DeleteToTerminal and DeleteToGone: from the delete request to the
	// old pod's terminal phase (its node's kubelet stopped the containers
	// and wrote the status) and to its removal from the API server (the
	// kubelet's final delete, after the volumes' teardown), as the
	// harness's watches saw them; 0 when not seen within the cycle.
	DeleteToTerminal time.Duration `json:"delete_to_terminal_ns,omitempty"`
	DeleteToGone     time.Duration `json:"delete_to_gone_ns,omitempty"`
	Error            string        `json:"error,omitempty"`
	// DeferredBy is how many later entries of the plan were deleted before
	// this cycle began: its pod was busy (a cycle in flight on it, or not
	// ready) when their turn came (docs/design.md, "Dispatch").
	DeferredBy int `json:"deferred_by,omitempty"`
	// DeletedAt and ReplacementSeenAt anchor the cycle's timeline.
	DeletedAt         time.Time `json:"deleted_at"`
	ReplacementSeenAt time.Time `json:"replacement_seen_at,omitempty"`
	// ReplacementBoundAt is when the harness first saw the replacement
	// bound to a node: before it, the cycle's time is the old pod's
	// termination, the StatefulSet controller's and the scheduler's; after
	// it, the node's (attach, mount, start).
	ReplacementBoundAt time.Time `json:"replacement_bound_at,omitempty"`
	// Stranding is the detector's finding for a Stranded cycle.
	Stranding *detector.Finding `json:"stranding,omitempty"`
	// DetectedAt is when the stranding was reported.
	DetectedAt time.Time `json:"detected_at,omitempty"`
	// Timeline is what the API and the proxy saw around a stranding (the
	// report merges it with the cycle's own steps).
	Timeline []timeline.Entry `json:"-"`
}

// Result is a finished (or interrupted) run.
type Result struct {
	Cycles  []Cycle
	Elapsed time.Duration
	// BusyWait is the time the churn had a free slot but every pod whose
	// cycle was next was busy (a cycle in flight on it, or not ready).
	BusyWait    time.Duration
	Interrupted bool
}
