// Package pinning is the e2e suite of the pinning scheduler extender on a
// local cluster whose kube-scheduler calls it: static pins are obeyed, a pin
// to a missing node leaves the pod Pending with the reason, and sticky pins
// hold across delete/recreate.
package pinning

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/pinning"
	"github.com/strandlab/strandlab/internal/workload"
)

const ns = "pin"

var s suite.Suite

func TestMain(m *testing.M) {
	os.Exit(suite.Run(m, "e2e-pinning", cluster.Spec{Nodes: 3, NodeStatusUpdateFrequency: time.Second,
		Pinning: &pinning.Config{Sticky: true, Static: []pinning.StaticPin{
			{Namespace: ns, StatefulSet: "web", Ordinal: 0, Node: "node-3"},
			{Namespace: ns, StatefulSet: "web", Ordinal: 1, Node: "node-9"}, // no such node
		}}}, &s))
}

func TestPinning(t *testing.T) {
	var c kubernetes.Interface
	var pods *workload.Pods
	f := features.New("pinning extender").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c = suite.Clientset(t, cfg)
			if err := workload.CreateNamespace(ctx, c, ns); err != nil {
				t.Fatal(err)
			}
			if err := workload.Create(ctx, c, workload.StatefulSet{Namespace: ns, Name: "web", Replicas: 3}); err != nil {
				t.Fatal(err)
			}
			var err error
			if pods, err = workload.WatchPods(ctx, c, ns); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("a static pin is obeyed", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			if err := pods.WaitFor(wctx, func(p *workload.Pods) bool { return workload.IsRunning(p.Get("web-0")) }); err != nil {
				t.Fatal(err)
			}
			if node := pods.Get("web-0").Spec.NodeName; node != "node-3" {
				t.Errorf("web-0 on %s, pinned to node-3", node)
			}
			return ctx
		}).
		Assess("a pin to a missing node leaves the pod Pending and says why", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			var msg string
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
					fields.OneTermEqualSelector("involvedObject.name", "web-1"), fields.OneTermEqualSelector("reason", "FailedScheduling")).String()})
				if err != nil || len(evs.Items) == 0 {
					return false, nil
				}
				msg = evs.Items[0].Message
				return true, nil
			})
			if err != nil {
				t.Fatal("no FailedScheduling event for web-1")
			}
			if !strings.Contains(msg, "pinned to node node-9") {
				t.Errorf("FailedScheduling does not name the pin: %q", msg)
			}
			if pod := pods.Get("web-1"); pod == nil || pod.Spec.NodeName != "" {
				t.Errorf("web-1 was scheduled despite its pin to a missing node: %+v", pod)
			}
			return ctx
		}).
		Assess("a sticky pin holds across delete/recreate and is recorded", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			for i := 0; i < 3; i++ {
				if err := pods.WaitFor(wctx, func(p *workload.Pods) bool { return workload.IsRunning(p.Get("web-2")) }); err != nil {
					t.Fatal(err)
				}
				old := pods.Get("web-2")
				if i == 0 {
					err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
						cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, pinning.DefaultConfigMapName, metav1.GetOptions{})
						return err == nil && cm.Data["web.2"] == old.Spec.NodeName, nil
					})
					if err != nil {
						t.Errorf("pin of web-2 to %s not recorded in ConfigMap %s", old.Spec.NodeName, pinning.DefaultConfigMapName)
					}
				}
				if err := c.CoreV1().Pods(ns).Delete(ctx, "web-2", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := pods.WaitFor(wctx, func(p *workload.Pods) bool {
					pod := p.Get("web-2")
					return pod != nil && pod.UID != old.UID && pod.Spec.NodeName != ""
				}); err != nil {
					t.Fatal(err)
				}
				if now := pods.Get("web-2").Spec.NodeName; now != old.Spec.NodeName {
					t.Fatalf("cycle %d: web-2 moved from %s to %s", i, old.Spec.NodeName, now)
				}
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}
