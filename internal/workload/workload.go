// Package workload creates the StatefulSets a scenario churns and watches
// their pods. It is the harness's view of the workload through the API.
package workload

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/strandlab/strandlab/manifests"
)

// LabelStatefulSet marks the pods of a strandlab StatefulSet.
const LabelStatefulSet = "strandlab.io/statefulset"

// StatefulSet describes one StatefulSet to create.
type StatefulSet struct {
	Namespace string
	Name      string
	Replicas  int32
	// VolumesPerPod is the number of PVCs (volumeClaimTemplates data-0..)
	// each pod mounts, from StorageClass.
	VolumesPerPod int
	StorageClass  string
	// NoService skips the headless Service: its endpoints churn on every
	// pod change costs CPU and has nothing to do with attach/detach.
	NoService bool
	// HostNetwork: the pods use their node's network namespace.
	HostNetwork bool
}

// CreateNamespace creates namespace (if needed) and waits until the service
// account controller has created its default ServiceAccount: pods are
// rejected before that, and the StatefulSet controller would back off.
func CreateNamespace(ctx context.Context, client kubernetes.Interface, namespace string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("default service account in %s not created: %w", namespace, err)
	}
	return nil
}

// Create creates the namespace (if needed), a headless Service (unless
// NoService) and the StatefulSet. Pods are managed in parallel so one slow pod does not hold
// back the others' replacements.
func Create(ctx context.Context, client kubernetes.Interface, s StatefulSet) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", s.Namespace, err)
	}
	labels := map[string]string{LabelStatefulSet: s.Name}
	if !s.NoService {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
			Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels, Ports: []corev1.ServicePort{{Name: "web", Port: 80}}},
		}
		if _, err := client.CoreV1().Services(s.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create service %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	sts, err := statefulSetFromManifest(s)
	if err != nil {
		return err
	}
	if _, err := client.AppsV1().StatefulSets(s.Namespace).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create statefulset %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// statefulSetFromManifest reads manifests/statefulset.yaml and applies s's
// name, namespace, replicas and selector label.
func statefulSetFromManifest(s StatefulSet) (*appsv1.StatefulSet, error) {
	var sts appsv1.StatefulSet
	if err := yaml.UnmarshalStrict(manifests.StatefulSet, &sts); err != nil {
		return nil, fmt.Errorf("manifests/statefulset.yaml: %w", err)
	}
	labels := map[string]string{LabelStatefulSet: s.Name}
	sts.Name, sts.Namespace = s.Name, s.Namespace
	sts.Spec.Replicas = &s.Replicas
	sts.Spec.ServiceName = s.Name
	sts.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
	sts.Spec.Template.Labels = labels
	sts.Spec.Template.Spec.HostNetwork = s.HostNetwork
	for i := 0; i < s.VolumesPerPod; i++ {
		name := fmt.Sprintf("data-%d", i)
		sc := s.StorageClass
		sts.Spec.VolumeClaimTemplates = append(sts.Spec.VolumeClaimTemplates, corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &sc,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
			},
		})
		for c := range sts.Spec.Template.Spec.Containers {
			sts.Spec.Template.Spec.Containers[c].VolumeMounts = append(sts.Spec.Template.Spec.Containers[c].VolumeMounts,
				corev1.VolumeMount{Name: name, MountPath: "/data/" + name})
		}
	}
	return &sts, nil
}

// PodName is the name of the StatefulSet's pod with the given ordinal.
func PodName(sts string, ordinal int) string { return sts + "-" + strconv.Itoa(ordinal) }

// Pods watches the pods of a namespace through an informer and lets callers
// wait for a condition without polling the API server. It is the harness's
// only watch of the namespace's pods: the detector shares its informer
// (Informer, Lister), so every pod event is decoded and cached once.
type Pods struct {
	informer cache.SharedIndexInformer
	all      corelisters.PodLister
	lister   corelisters.PodNamespaceLister

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every pod event
	// podChanged: by pod name, closed and removed on that pod's next event;
	// made by WaitForPod, so that a waiter for one pod is not woken by the
	// events of every other (48 cycles in flight each wait for their own).
	podChanged map[string]chan struct{}
	firstSeen  map[types.UID]time.Time
	// boundSeen: when the harness first saw the pod bound to a node
	// (spec.nodeName set), which splits a cycle's time between the
	// scheduler's part and the node's (cycle.Cycle.ReplacementBoundAt).
	boundSeen map[types.UID]time.Time
}

// WatchPods starts watching the pods of namespace until ctx ends.
func WatchPods(ctx context.Context, client kubernetes.Interface, namespace string) (*Pods, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods()
	p := &Pods{informer: inf.Informer(), all: inf.Lister(), lister: inf.Lister().Pods(namespace),
		changed: make(chan struct{}), podChanged: map[string]chan struct{}{},
		firstSeen: map[types.UID]time.Time{}, boundSeen: map[types.UID]time.Time{}}
	// Times are the stamps of when each version arrived, not when the
	// handler ran (StampSeen).
	if err := inf.Informer().SetTransform(StampSeen); err != nil {
		return nil, err
	}
	reg, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			pod := o.(*corev1.Pod)
			now := SeenAt(pod)
			p.mu.Lock()
			p.firstSeen[pod.UID] = now
			if pod.Spec.NodeName != "" {
				p.boundSeen[pod.UID] = now
			}
			p.mu.Unlock()
			p.notify(pod.Name)
		},
		UpdateFunc: func(_, o any) {
			pod := o.(*corev1.Pod)
			if pod.Spec.NodeName != "" {
				p.mu.Lock()
				if _, ok := p.boundSeen[pod.UID]; !ok {
					p.boundSeen[pod.UID] = SeenAt(pod)
				}
				p.mu.Unlock()
			}
			p.notify(pod.Name)
		},
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			name := ""
			if pod, ok := o.(*corev1.Pod); ok {
				p.mu.Lock()
				delete(p.firstSeen, pod.UID)
				delete(p.boundSeen, pod.UID)
				p.mu.Unlock()
				name = pod.Name
			}
			p.notify(name)
		},
	})
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	// The handler's own sync: the listed pods' Add events have been handled
	// (FirstSeen set, no late wake-ups from them) when WatchPods returns.
	if !cache.WaitForCacheSync(ctx.Done(), p.informer.HasSynced, reg.HasSynced) {
		return nil, fmt.Errorf("pod informer for %s did not sync: %w", namespace, ctx.Err())
	}
	return p, nil
}

// notify wakes WaitFor's waiters and WaitForPod's for the pod name ("":
// an unknown object, which wakes WaitFor's only).
func (p *Pods) notify(name string) {
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	if ch, ok := p.podChanged[name]; ok {
		close(ch)
		delete(p.podChanged, name)
	}
	p.mu.Unlock()
}

// Informer is the pod informer behind Pods, for the harness's other
// watchers of the namespace's pods (their handlers get its events).
func (p *Pods) Informer() cache.SharedIndexInformer { return p.informer }

// Lister lists the cached pods (of the namespace watched only).
func (p *Pods) Lister() corelisters.PodLister { return p.all }

// FirstSeen is when the harness first saw the pod with uid (zero if never
// or already deleted).
func (p *Pods) FirstSeen(uid types.UID) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.firstSeen[uid]
}

// BoundSeen is when the harness first saw the pod with uid bound to a node
// (zero if never or already deleted).
func (p *Pods) BoundSeen(uid types.UID) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.boundSeen[uid]
}

// Get returns the cached pod, or nil.
func (p *Pods) Get(name string) *corev1.Pod {
	pod, err := p.lister.Get(name)
	if err != nil {
		return nil
	}
	return pod
}

// List returns the cached pods matching selector.
func (p *Pods) List(selector labels.Selector) []*corev1.Pod {
	pods, _ := p.lister.List(selector)
	return pods
}

// WaitFor blocks until cond holds on the cached pods, re-evaluating it on
// every pod event, or until ctx ends.
func (p *Pods) WaitFor(ctx context.Context, cond func(*Pods) bool) error {
	for {
		p.mu.Lock()
		ch := p.changed
		p.mu.Unlock()
		if cond(p) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// WaitForPod blocks until cond holds on the cached pod name (nil while
// there is none), re-evaluating it on that pod's events only, or until ctx
// ends.
func (p *Pods) WaitForPod(ctx context.Context, name string, cond func(*corev1.Pod) bool) error {
	for {
		p.mu.Lock()
		ch, ok := p.podChanged[name]
		if !ok {
			ch = make(chan struct{})
			p.podChanged[name] = ch
		}
		p.mu.Unlock()
		if cond(p.Get(name)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// IsRunning reports whether pod is Running, Ready and not terminating.
func IsRunning(pod *corev1.Pod) bool {
	if pod == nil || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// RunningSince returns when pod became Ready (its Ready condition's
// transition time), or zero.
func RunningSince(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
