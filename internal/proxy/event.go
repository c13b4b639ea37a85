package proxy

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// event is what the rules need to know of one watch frame.
type event struct {
	Type string // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
	// For Node events: the node and its status.volumesAttached names.
	Node            string
	VolumesAttached []string
}

// decodeEvent reads a frame's event type and, for Nodes, the attached
// volumes. JSON frames are {"type":...,"object":{...}}; protobuf frames are a
// length prefix and a metav1.WatchEvent whose object is an encoded runtime
// object (the API server's protobuf watch encoding).
func decodeEvent(protobuf bool, frame []byte, wantNode bool) (event, error) {
	if protobuf {
		var we metav1.WatchEvent
		if len(frame) < 4 {
			return event{}, fmt.Errorf("short protobuf frame")
		}
		if err := we.Unmarshal(frame[4:]); err != nil {
			return event{}, fmt.Errorf("protobuf watch event: %w", err)
		}
		ev := event{Type: we.Type}
		if !wantNode || we.Type == "BOOKMARK" || we.Type == "ERROR" {
			return ev, nil
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(we.Object.Raw, nil, nil)
		if err != nil {
			return ev, fmt.Errorf("protobuf watch object: %w", err)
		}
		if node, ok := obj.(*corev1.Node); ok {
			ev.Node, ev.VolumesAttached = node.Name, attachedNames(node)
		}
		return ev, nil
	}
	var raw struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(frame, &raw); err != nil {
		return event{}, fmt.Errorf("JSON watch event: %w", err)
	}
	ev := event{Type: raw.Type}
	if !wantNode || raw.Type == "BOOKMARK" || raw.Type == "ERROR" {
		return ev, nil
	}
	var node corev1.Node
	if err := json.Unmarshal(raw.Object, &node); err != nil {
		return ev, fmt.Errorf("JSON watch object: %w", err)
	}
	ev.Node, ev.VolumesAttached = node.Name, attachedNames(&node)
	return ev, nil
}

func attachedNames(n *corev1.Node) []string {
	out := make([]string, 0, len(n.Status.VolumesAttached))
	for _, v := range n.Status.VolumesAttached {
		out = append(out, string(v.Name))
	}
	return out
}

// isProtobuf tells the watch encoding from the response Content-Type.
func isProtobuf(contentType string) bool {
	return strings.HasPrefix(contentType, "application/vnd.kubernetes.protobuf")
}

// isJSON: JSON watch streams (application/json, with or without parameters).
func isJSON(contentType string) bool {
	return strings.HasPrefix(contentType, "application/json")
}
