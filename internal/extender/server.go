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
	"k8s.io/client-go/informers"
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
	e := &Extender{cfg: cfg, client: client, latency: fault.NewSampler(cfg.Seed, samplerStream), pins: map[Key]string{}}
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

// Run keeps sticky pins: it loads the recorded ones and records the first
// placement of every StatefulSet pod it sees bound. It returns when ctx ends.
func (e *Extender) Run(ctx context.Context) error {
	if !e.cfg.Sticky {
		<-ctx.Done()
		return nil
	}
	factory := informers.NewSharedInformerFactory(e.client, 0)
	cms := factory.Core().V1().ConfigMaps().Informer()
	pods := factory.Core().V1().Pods().Informer()
	_, _ = cms.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { e.loadPins(o.(*corev1.ConfigMap)) },
		UpdateFunc: func(_, o any) { e.loadPins(o.(*corev1.ConfigMap)) },
	})
	factory.Start(ctx.Done())
	// Recorded pins must be known before new placements are recorded.
	if !cache.WaitForCacheSync(ctx.Done(), cms.HasSynced) {
		return ctx.Err()
	}
	_, _ = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { e.record(ctx, o.(*corev1.Pod)) },
		UpdateFunc: func(_, o any) { e.record(ctx, o.(*corev1.Pod)) },
	})
	<-ctx.Done()
	factory.Shutdown()
	return nil
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
		e.mu.Unlock()
		return
	}
	e.pins[key] = pod.Spec.NodeName
	e.mu.Unlock()
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
		passed, failed := Filter(args.Pod, *args.NodeNames, e.Pinned)
		result.NodeNames, result.FailedNodes = &passed, failed
	} else if args.Nodes != nil {
		names := make([]string, 0, len(args.Nodes.Items))
		for _, n := range args.Nodes.Items {
			names = append(names, n.Name)
		}
		passed, failed := Filter(args.Pod, names, e.Pinned)
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
