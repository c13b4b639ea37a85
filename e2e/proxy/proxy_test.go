// Package proxy is the e2e suite of the throttling proxy on a local cluster
// whose kube-controller-manager talks to the API server through it, with
// every Node watch event held back 3 s.
package proxy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/workload"
)

const hold = 3 * time.Second

var s suite.Suite

func TestMain(m *testing.M) {
	os.Exit(suite.Run(m, "e2e-proxy", cluster.Spec{Nodes: 1, NodeStatusUpdateFrequency: time.Second,
		Proxy: &fault.Profile{Rules: []fault.Rule{{Resource: "nodes", Delay: fault.Delay{Fixed: fault.D(hold)}}},
			// A request the controller manager never makes (it PATCHes node
			// status and reads nodes, not their status subresource), so
			// only this suite's own probe meets it.
			APIErrors: []fault.APIError{{Resource: "nodes", Subresource: "status", Verbs: []string{"GET"}, Status: 503, Fraction: 1}}}}, &s))
}

// viaProxy is a client with the controller manager's own kubeconfig, the
// one that points at the proxy, speaking protobuf as the controller does.
func viaProxy(t *testing.T) kubernetes.Interface {
	dir := s.Provider.Cluster().(cluster.StateDirCluster).StateDir()
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "pki", "kube-controller-manager-via-proxy.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	return kubernetes.NewForConfigOrDie(rc)
}

// stepTimeout bounds each step: every request here is one round trip or
// one node event, so a step still waiting after it is stuck, and says so.
const stepTimeout = 2 * time.Minute

// arrival returns when the watch delivers a node event carrying the label
// value.
func arrival(ctx context.Context, w watch.Interface, value string) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && n.Labels["strandlab.io/probe"] == value {
				out <- time.Now()
				return
			}
		}
	}()
	return out
}

func TestProxy(t *testing.T) {
	f := features.New("throttling proxy").
		Assess("node events reach the controller's connection 3 s after the server sent them", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			step, cancel := context.WithTimeout(ctx, stepTimeout)
			defer cancel()
			d, p := suite.Clientset(t, cfg), viaProxy(t)
			dw, err := d.CoreV1().Nodes().Watch(step, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pw, err := p.CoreV1().Nodes().Watch(step, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			value := fmt.Sprint(time.Now().UnixNano())
			directAt, proxiedAt := arrival(step, dw, value), arrival(step, pw, value)
			patch := fmt.Sprintf(`{"metadata":{"labels":{"strandlab.io/probe":%q}}}`, value)
			if _, err := d.CoreV1().Nodes().Patch(step, "node-1", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			var dt, pt time.Time
			deliveryDeadline := time.After(30 * time.Second)
			for dt.IsZero() || pt.IsZero() {
				select {
				case dt = <-directAt:
				case pt = <-proxiedAt:
				case <-deliveryDeadline:
					t.Fatalf("event not delivered on both watches within 30 s (direct %v, proxied %v)", dt, pt)
				}
			}
			if lag := pt.Sub(dt); lag < hold-100*time.Millisecond || lag > hold+2*time.Second {
				t.Errorf("proxied node event arrived %v after the direct one, want about %v", lag, hold)
			}
			counters, err := cluster.InstrumentsOf(s.Provider.Cluster()).Proxy.ProxyCounters(step)
			if err != nil {
				t.Fatal(err)
			}
			if counters.EventsDelayed == 0 || counters.Requests["WATCH nodes"] == 0 {
				t.Errorf("counters %+v: no node watch or no delayed event", counters)
			}
			return ctx
		}).
		Assess("the controller works through the proxy", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			step, cancel := context.WithTimeout(ctx, stepTimeout)
			defer cancel()
			// The service account controller (running as its own service
			// account, through the proxy) must create the default account.
			if err := workload.CreateNamespace(step, suite.Clientset(t, cfg), "via-proxy"); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("an apiErrors rule answers the controller's matching request with its status", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			step, cancel := context.WithTimeout(ctx, stepTimeout)
			defer cancel()
			start := time.Now()
			_, err := viaProxy(t).CoreV1().RESTClient().Get().Resource("nodes").Name("node-1").SubResource("status").Do(step).Get()
			if !apierrors.IsServiceUnavailable(err) {
				t.Fatalf("GET nodes/node-1/status through the proxy: %v, want the rule's 503 ServiceUnavailable", err)
			}
			if _, err := suite.Clientset(t, cfg).CoreV1().RESTClient().Get().Resource("nodes").Name("node-1").SubResource("status").Do(step).Get(); err != nil {
				t.Fatalf("GET nodes/node-1/status directly: %v", err)
			}
			instruments := cluster.InstrumentsOf(s.Provider.Cluster()).Proxy
			journal, err := instruments.ProxyJournal(step, start)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range journal {
				found = found || e.Kind == fault.JournalAPIError && e.Resource == "nodes/status" && e.Name == "node-1" && e.Verb == "GET" && e.Code == 503
			}
			if !found {
				t.Errorf("the proxy's journal since the probe has no api_error for GET nodes/status node-1 503: %+v", journal)
			}
			counters, err := instruments.ProxyCounters(step)
			if err != nil {
				t.Fatal(err)
			}
			if counters.APIErrors == 0 {
				t.Errorf("counters %+v: no api error counted", counters)
			}
			return ctx
		}).
		Assess("what the controller may not do stays forbidden through the proxy", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			step, cancel := context.WithTimeout(ctx, stepTimeout)
			defer cancel()
			p := viaProxy(t)
			if _, err := p.CoreV1().Secrets("kube-system").List(step, metav1.ListOptions{}); err != nil {
				t.Errorf("listing secrets (allowed to system:kube-controller-manager): %v", err)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
			_, err := p.CoreV1().Pods("default").Create(step, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if !apierrors.IsForbidden(err) {
				t.Errorf("creating a pod as system:kube-controller-manager through the proxy: %v, want Forbidden", err)
			}
			if err := p.CoreV1().Nodes().Delete(step, "node-1", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
				t.Errorf("deleting a node through the proxy: %v, want Forbidden", err)
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}
