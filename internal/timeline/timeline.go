// Package timeline merges what the harness, the API and the throttling proxy
// saw into one stranding's timeline. It is pure: the recorder that fills it
// from informers lives with the runner; here are the entries, their
// relevance to one stranding, and their order.
package timeline

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/strandlab/strandlab/internal/fault"
)

// Sources of entries.
const (
	Runner   = "runner"   // the harness's own actions
	API      = "api"      // object transitions seen by the harness's watches
	Proxy    = "proxy"    // what the controller received late or sent
	CSI      = "csi"      // CSI calls strandlab's driver failed or slowed
	Detector = "detector" // the detector's verdicts
)

// Entry is one event. The subject fields say what it is about, so that a
// stranding's timeline keeps only its own pod, node, volume and attachment.
type Entry struct {
	Time   time.Time
	Source string
	Event  string

	Pod        string // namespace/name
	Node       string
	Volume     string // unique volume name
	PV         string
	Attachment string // VolumeAttachment name

	// Change says which change an API entry records where code measures
	// the time between changes (DetachTimings); "" for the others.
	Change Change
}

// Change is a kind of API transition that timings are measured between.
type Change string

const (
	// VolumeListed: a volume added to a node's status.volumesAttached
	// (the controller's "add" status patch, as the harness saw it).
	VolumeListed Change = "volume-listed"
	// DetachRequested: a VolumeAttachment's deletion timestamp set (the
	// controller's detach).
	DetachRequested Change = "detach-requested"
	// VolumeReleased: a volume removed from a node's status.volumesInUse
	// (the kubelet's report that it unmounted it, which the controller
	// waits for before it detaches).
	VolumeReleased Change = "volume-released"
	// PodTerminal: a pod's phase became Succeeded or Failed (the kubelet's
	// terminal status, written once its containers stopped).
	PodTerminal Change = "pod-terminal"
	// PodGone: a pod deleted from the API server (the kubelet's final
	// delete, once its volumes were torn down).
	PodGone Change = "pod-gone"
)

// Focus is one stranding: its subjects and the time window to show.
type Focus struct {
	Pod, Node, Volume, PV, Attachment string
	From, To                          time.Time
}

// Select returns the entries within the window that concern the focus, in
// time order (ties keep their input order). A node-wide entry (no PV and no
// attachment, e.g. a status patch) belongs when its node is the focus's.
func (f Focus) Select(entries []Entry) []Entry {
	var out []Entry
	for _, e := range entries {
		if e.Time.Before(f.From) || e.Time.After(f.To) || !f.concerns(e) {
			continue
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return a.Time.Compare(b.Time) })
	return out
}

func (f Focus) concerns(e Entry) bool {
	switch {
	case e.Pod != "":
		return e.Pod == f.Pod
	case e.Attachment != "":
		return e.Attachment == f.Attachment
	case e.Volume != "":
		return e.Volume == f.Volume && (e.Node == "" || e.Node == f.Node)
	case e.PV != "":
		return e.PV == f.PV && (e.Node == "" || e.Node == f.Node)
	case e.Node != "":
		return e.Node == f.Node
	}
	return false
}

// FromProxy turns the proxy's journal into entries: a held watch event
// becomes two (held, then delivered to the controller), a controller write
// one, with its body, so that an empty status patch reads `{}`, and a
// request the proxy failed itself one, saying so. A held node
// event whose volumesAttached is the same as the node's previous held
// event's (a heartbeat) is left out: it changes nothing a timeline shows.
func FromProxy(journal []fault.JournalEntry) []Entry {
	var out []Entry
	lastList := map[string]string{} // node -> volumesAttached of its last held event
	for _, j := range journal {
		switch j.Kind {
		case fault.JournalEventDelayed:
			if j.Name != "" {
				if prev, ok := lastList[j.Name]; ok && prev == j.Body {
					continue
				}
				lastList[j.Name] = j.Body
			}
			what := fmt.Sprintf("%s event %s", j.Resource, j.Verb)
			if j.Name != "" {
				what = fmt.Sprintf("%s event for %s (status.volumesAttached %s)", j.Verb, j.Name, j.Body)
			}
			held := j.Release.Sub(j.Time).Round(time.Millisecond)
			out = append(out,
				Entry{Time: j.Time, Source: Proxy, Node: j.Name, Event: fmt.Sprintf("watch %s held back from kube-controller-manager for %v", what, held)},
				Entry{Time: j.Release, Source: Proxy, Node: j.Name, Event: fmt.Sprintf("watch %s delivered to kube-controller-manager", what)})
		case fault.JournalRequest, fault.JournalAPIError:
			e := Entry{Time: j.Time, Source: Proxy, Event: fmt.Sprintf("kube-controller-manager %s %s", j.Verb, objectPath(j.Resource, j.Name))}
			if j.Body != "" {
				e.Event += " " + j.Body
			}
			e.Event += fmt.Sprintf(" -> %d", j.Code)
			if j.Kind == fault.JournalAPIError {
				e.Event += " injected by the proxy (apiErrors), never reached the API server"
			}
			if j.Resource == "volumeattachments" {
				e.Attachment = j.Name
			} else {
				e.Node = j.Name
			}
			if j.Name == "" && j.Resource == "volumeattachments" {
				// A create: the name is in the body, which the runner's API
				// entries already cover; keep it node-less and PV-less.
				continue
			}
			out = append(out, e)
		}
	}
	return out
}

// FromCSIDriver turns the CSI driver's journal of injected faults into
// entries, one per call it failed or slowed, about the call's volume (by
// its PV) on the call's node.
func FromCSIDriver(journal []fault.JournalEntry) []Entry {
	var out []Entry
	for _, j := range journal {
		if j.Kind != fault.JournalCSIError {
			continue
		}
		what := "slowed"
		if j.Code != 0 {
			what = "failed"
		}
		out = append(out, Entry{Time: j.Time, Source: CSI, PV: j.Name, Node: j.Node,
			Event: fmt.Sprintf("%s for %s %s by strandlab's CSI driver (%s)", j.Verb, j.Node, what, j.Body)})
	}
	return out
}

// objectPath writes resource/name, or resource/name/subresource for a
// "resource/subresource" (nodes/node-1/status).
func objectPath(resource, name string) string {
	if r, sub, ok := strings.Cut(resource, "/"); ok {
		return r + "/" + name + "/" + sub
	}
	return resource + "/" + name
}
