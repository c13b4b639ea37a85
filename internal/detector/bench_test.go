package detector

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// steadyCluster is the snapshot of a churning cluster at rest: nodes × 20
// Running pods, each with one attached, listed and in-use CSI volume, as
// the scale scenarios have (scenarios/scale-*.yaml).
func steadyCluster(nodes int) Snapshot {
	const podsPerNode = 20
	s := Snapshot{Time: t0, Namespace: "ns", CSIDrivers: []*storagev1.CSIDriver{{ObjectMeta: metav1.ObjectMeta{Name: driver}}}}
	for n := range nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", n+1)}}
		for i := range podsPerNode {
			k := n*podsPerNode + i
			pod, pvc, pv := fmt.Sprintf("web-%d", k), fmt.Sprintf("data-0-web-%d", k), fmt.Sprintf("pv-%d", k)
			handle := fmt.Sprintf("h%d", k)
			unique := UniqueVolumeName(driver, handle)
			s.Pods = append(s.Pods, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "ns", UID: types.UID("uid-" + pod)},
				Spec: corev1.PodSpec{NodeName: node.Name, Volumes: []corev1.Volume{{Name: "data",
					VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
			})
			s.PVCs = append(s.PVCs, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: pvc, Namespace: "ns"},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv}})
			s.PVs = append(s.PVs, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv},
				Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: pvc},
					PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}}}})
			pvName := pv
			s.VolumeAttachments = append(s.VolumeAttachments, &storagev1.VolumeAttachment{
				ObjectMeta: metav1.ObjectMeta{Name: AttachmentName(handle, driver, node.Name)},
				Spec:       storagev1.VolumeAttachmentSpec{Attacher: driver, NodeName: node.Name, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}},
				Status:     storagev1.VolumeAttachmentStatus{Attached: true}})
			node.Status.VolumesAttached = append(node.Status.VolumesAttached, corev1.AttachedVolume{Name: corev1.UniqueVolumeName(unique)})
			node.Status.VolumesInUse = append(node.Status.VolumesInUse, corev1.UniqueVolumeName(unique))
		}
		s.Nodes = append(s.Nodes, node)
	}
	return s
}

// BenchmarkTrackerObserve is the detector's work per snapshot (the runner
// takes one every 250 ms) at the scale scenarios' sizes: the time per
// snapshot should grow in proportion to the pods, not faster
// (docs/performance.md, "Scale").
//
//	go test ./internal/detector -run '^$' -bench TrackerObserve -benchmem
func BenchmarkTrackerObserve(b *testing.B) {
	for _, nodes := range []int{8, 32, 100} {
		s := steadyCluster(nodes)
		b.Run(fmt.Sprintf("nodes=%d/pods=%d", nodes, len(s.Pods)), func(b *testing.B) {
			tr := NewTracker(10*time.Second, 200*time.Millisecond)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				s.Time = t0.Add(time.Duration(i) * 250 * time.Millisecond)
				if f := tr.Observe(s); len(f) != 0 {
					b.Fatalf("a cluster at rest has findings: %v", f)
				}
			}
		})
	}
}
