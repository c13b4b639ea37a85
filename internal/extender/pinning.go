// Package extender is strandlab's pinning scheduler extender: an HTTP
// service speaking kube-scheduler's extender filter protocol
// (k8s.io/kube-scheduler/extender/v1) that keeps each StatefulSet ordinal on
// one node — from an explicit ordinal -> node map, or sticky: the first
// placement is recorded and enforced from then on. A configurable filter
// latency models the slow extender that, with a lagging controller, opens
// the stranding window of kubernetes #122413.
package extender

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Key names one StatefulSet ordinal.
type Key struct {
	Namespace   string
	StatefulSet string
	Ordinal     int
}

func (k Key) String() string { return fmt.Sprintf("%s/%s-%d", k.Namespace, k.StatefulSet, k.Ordinal) }

// configMapKey is the Key as a ConfigMap data key (no slashes allowed).
func (k Key) configMapKey() string { return fmt.Sprintf("%s.%d", k.StatefulSet, k.Ordinal) }

// parseConfigMapKey reverses configMapKey: "<set>.<ordinal>" (StatefulSet
// names are DNS labels, without dots).
func parseConfigMapKey(namespace, k string) (Key, bool) {
	i := strings.LastIndexByte(k, '.')
	if i <= 0 {
		return Key{}, false
	}
	ordinal, err := strconv.Atoi(k[i+1:])
	if err != nil || ordinal < 0 {
		return Key{}, false
	}
	return Key{Namespace: namespace, StatefulSet: k[:i], Ordinal: ordinal}, true
}

// KeyOf returns the StatefulSet ordinal a pod is, from its controller owner
// reference and the ordinal suffix of its name (the StatefulSet controller
// names pods <set>-<ordinal>).
func KeyOf(pod *corev1.Pod) (Key, bool) {
	for _, ref := range pod.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller || ref.Kind != "StatefulSet" || !strings.HasPrefix(ref.APIVersion, appsv1.GroupName+"/") {
			continue
		}
		suffix, ok := strings.CutPrefix(pod.Name, ref.Name+"-")
		if !ok {
			return Key{}, false
		}
		ordinal, err := strconv.Atoi(suffix)
		if err != nil || ordinal < 0 {
			return Key{}, false
		}
		return Key{Namespace: pod.Namespace, StatefulSet: ref.Name, Ordinal: ordinal}, true
	}
	return Key{}, false
}

// Filter keeps only the pinned node among the candidates. A pod that is not
// a StatefulSet pod, or an ordinal not pinned yet, passes on every node. A
// pinned node that is not a candidate (gone, unschedulable, filtered out by
// the scheduler) fails every node with a reason naming it: the pod stays
// Pending rather than being silently re-routed.
func Filter(pod *corev1.Pod, candidates []string, pinnedNode func(Key) (string, bool)) (passed []string, failed map[string]string) {
	key, ok := KeyOf(pod)
	if !ok {
		return candidates, nil
	}
	node, pinned := pinnedNode(key)
	if !pinned {
		return candidates, nil
	}
	failed = map[string]string{}
	if slices.Contains(candidates, node) {
		for _, c := range candidates {
			if c != node {
				failed[c] = fmt.Sprintf("%s is pinned to node %s", key, node)
			}
		}
		return []string{node}, failed
	}
	for _, c := range candidates {
		failed[c] = fmt.Sprintf("%s is pinned to node %s, which is not a candidate (gone, unschedulable or filtered out)", key, node)
	}
	return []string{}, failed
}
