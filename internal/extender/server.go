package extender

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/pinning"
)

// samplerStream keeps the extender's draws apart from the proxy's under the
// same scenario seed.
const samplerStream = 0x6578746e

// Extender serves the filter verb.
type Extender struct {
	cfg     pinning.Config
	client  kubernetes.Interface
	latency *fault.Sampler

	mu   sync.Mutex
	pins map[Key]string
	// pending: the ordinals that passed the filter unpinned, whose placement
	// the pod watch is still to record. The watch runs only while there are
	// any (and once at start): once every ordinal is pinned, pod events
	// carry nothing the extender needs, and the churn's are most of the
	// cluster's (decoding them was half of the extender's CPU).
	pending map[Key]types.UID
	// placing is signalled when an ordinal becomes pending.
	placing chan struct{}
}

// New returns an extender; client may be nil when Sticky is off.
func New(cfg pinning.Config, client kubernetes.Interface) (*Extender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ConfigMapName == "" {
		cfg.ConfigMapName = pinning.DefaultConfigMapName
	}
	if cfg.Sticky && client == nil {
		return nil, fmt.Errorf("sticky pinning needs an API client")
	}
	e := &Extender{cfg: cfg, client: client, latency: fault.NewSampler(cfg.Seed, samplerStream), pins: map[Key]string{},
		pending: map[Key]types.UID{}, placing: make(chan struct{}, 1)}
	for _, p := range cfg.Static {
		e.pins[Key{p.Namespace, p.StatefulSet, p.Ordinal}] = p.Node
	}
	return e, nil
}

// Pinned returns the node a StatefulSet ordinal is pinned to.
func (e *Extender) Pinned(k Key) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, ok := e.pins[k]
	return n, ok
}

// pinnedOrPending is Filter's lookup for pod: an ordinal not pinned yet
// becomes pending, so that the pod watch runs until its placement is
// recorded.
func (e *Extender) pinnedOrPending(pod types.UID) func(Key) (string, bool) {
	return func(k Key) (string, bool) {
		e.mu.Lock()
		defer e.mu.Unlock()
		n, ok := e.pins[k]
		if !ok && e.cfg.Sticky {
			e.pending[k] = pod
			select {
			case e.placing <- struct{}{}:
			default:
			}
		}
		return n, ok
	}
}

// placementsPending reports whether an ordinal's placement is still to be
// recorded.
func (e *Extender) placementsPending() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.pending) > 0
}

// Run keeps sticky pins: it loads the recorded ones and records the first
// placement of every StatefulSet pod it sees bound, watching pods at start
// and then only while a placement is pending. It returns when ctx ends.
func (e *Extender) Run(ctx context.Context) error {
	if !e.cfg.Sticky {
		<-ctx.Done()
		return nil
	}
	factory := informers.NewSharedInformerFactory(e.client, 0)
	cms := factory.Core().V1().ConfigMaps().Informer()
	_, _ = cms.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { e.loadPins(o.(*corev1.ConfigMap)) },
		UpdateFunc: func(_, o any) { e.loadPins(o.(*corev1.ConfigMap)) },
	})
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	// Recorded pins must be known before new placements are recorded.
	if !cache.WaitForCacheSync(ctx.Done(), cms.HasSynced) {
		return ctx.Err()
	}
	// At start the watch records the pods bound before the extender ran.
	for {
		e.watchPods(ctx)
		for !e.placementsPending() {
			select {
			case <-ctx.Done():
				return nil
			case <-e.placing:
			}
		}
	}
}

// watchPods records the placements of bound StatefulSet pods from a pod
// watch that runs until it has handled every pod listed at its start and
// no placement is pending, or ctx ends. A restart lists the pods again, so
// nothing bound while it was stopped is missed.
func (e *Extender) watchPods(ctx context.Context) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	handled := make(chan struct{}, 1)
	signal := func() {
		select {
		case handled <- struct{}{}:
		default:
		}
	}
	pods := coreinformers.NewPodInformer(e.client, metav1.NamespaceAll, 0, cache.Indexers{})
	reg, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { e.record(ctx, o.(*corev1.Pod)); signal() },
		UpdateFunc: func(_, o any) { e.record(ctx, o.(*corev1.Pod)); signal() },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if pod, ok := o.(*corev1.Pod); ok {
				e.forget(pod)
			}
			signal()
		},
	})
	if err != nil {
		return
	}
	go pods.Run(wctx.Done())
	if !cache.WaitForCacheSync(wctx.Done(), reg.HasSynced) {
		return
	}
	for e.placementsPending() {
		select {
		case <-wctx.Done():
			return
		case <-handled:
		}
	}
}

// forget drops a pending ordinal whose pod was deleted before it was bound
// (its replacement passes the filter again), unless a newer pod of the
// ordinal made it pending.
func (e *Extender) forget(pod *corev1.Pod) {
	key, ok := KeyOf(pod)
	if !ok || pod.Spec.NodeName != "" {
		return
	}
	e.mu.Lock()
	if e.pending[key] == pod.UID {
		delete(e.pending, key)
	}
	e.mu.Unlock()
}

func (e *Extender) loadPins(cm *corev1.ConfigMap) {
	if cm.Name != e.cfg.ConfigMapName {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, node := range cm.Data {
		key, ok := parseConfigMapKey(cm.Namespace, k)
		if !ok {
			continue
		}
		if _, known := e.pins[key]; !known {
			e.pins[key] = node
		}
	}
}

// record pins a bound StatefulSet pod's ordinal to its node if it is not
// pinned yet, persisting the pin in the namespace's ConfigMap.
func (e *Extender) record(ctx context.Context, pod *corev1.Pod) {
	key, ok := KeyOf(pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	e.mu.Lock()
	if _, pinned := e.pins[key]; pinned {
		delete(e.pending, key)
		e.mu.Unlock()
		return
	}
	e.pins[key] = pod.Spec.NodeName
	e.mu.Unlock()
	// Pending until the pin is persisted: the watch (and ctx) outlive the write.
	defer func() {
		e.mu.Lock()
		delete(e.pending, key)
		e.mu.Unlock()
	}()
	klog.FromContext(ctx).V(2).Info("Pinned", "ordinal", key.String(), "node", pod.Spec.NodeName)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cms := e.client.CoreV1().ConfigMaps(key.Namespace)
		cm, err := cms.Get(ctx, e.cfg.ConfigMapName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: e.cfg.ConfigMapName, Namespace: key.Namespace},
				Data: map[string]string{key.configMapKey(): pod.Spec.NodeName}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), e.cfg.ConfigMapName, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if _, ok := cm.Data[key.configMapKey()]; ok {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[key.configMapKey()] = pod.Spec.NodeName
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Error(err, "Recording a pin failed; it holds in memory only", "ordinal", key.String())
	}
}

// Handler serves POST /filter (the extender filter verb) and GET /healthz.
func (e *Extender) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("POST /filter", e.filter)
	return mux
}

func (e *Extender) filter(w http.ResponseWriter, r *http.Request) {
	var args extenderv1.ExtenderArgs
	var result extenderv1.ExtenderFilterResult
	if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.Pod == nil {
		result.Error = fmt.Sprintf("bad filter request: %v", err)
		writeJSON(w, result)
		return
	}
	if d := e.latency.Draw(e.cfg.Latency); d > 0 {
		t := time.NewTimer(d) // the modelled slowness itself
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if args.NodeNames != nil {
		passed, failed := Filter(args.Pod, *args.NodeNames, e.pinnedOrPending(args.Pod.UID))
		result.NodeNames, result.FailedNodes = &passed, failed
	} else if args.Nodes != nil {
		names := make([]string, 0, len(args.Nodes.Items))
		for _, n := range args.Nodes.Items {
			names = append(names, n.Name)
		}
		passed, failed := Filter(args.Pod, names, e.pinnedOrPending(args.Pod.UID))
		list := &corev1.NodeList{}
		for _, n := range args.Nodes.Items {
			for _, p := range passed {
				if n.Name == p {
					list.Items = append(list.Items, n)
				}
			}
		}
		result.Nodes, result.FailedNodes = list, failed
	}
	writeJSON(w, result)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
