package local

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/apfcount"
)

// The API server's requests per client (docs/performance.md): one
// FlowSchema per client identity and default schema it matches, planned
// by apfcount so that every request keeps its priority level, and the
// API server's dispatched-requests counter read from /metrics. The
// schema "exempt" (system:masters: the harness and the API server's own
// loopback client) cannot be copied; the harness counts its own requests
// (harnessCounter), and the API server's are the rest of "exempt"'s.

// Clients of the requests that only the schema "exempt" takes.
const (
	harnessClient   = "harness"
	apiserverClient = "kube-apiserver"
	// mastersClient is what APIRequestsByClient splits into the two.
	mastersClient = "system:masters"
)

// apfIdentities are the cluster's client identities: those writePKI
// issues, the controllers' service accounts (--use-service-account-credentials:
// kube-controller-manager's requests are mostly theirs), and the API
// server's own loopback client.
func apfIdentities(cfg *clusterPKI) []apfcount.Identity {
	return slices.Concat(cfg.identities, []apfcount.Identity{
		apfcount.ServiceAccounts("kube-controller-manager", "kube-controller-manager-sa", metav1.NamespaceSystem),
		// k8s.io/apiserver's loopback client: user.APIServerUser in
		// user.SystemPrivilegedGroup.
		apfcount.User("kube-apiserver", "kube-apiserver", "system:apiserver", "system:masters"),
	})
}

// startFlowSchemas creates the per-client FlowSchemas; they are ready when
// the API server's APF controller has taken every one in (it sets their
// Dangling condition, after installing them). A plan the API server's
// schemas refuse is logged, and the cluster runs without per-client
// counts: they are a measurement, not what the cluster is for.
func (st *starting) startFlowSchemas(ctx context.Context) ([]readiness, error) {
	client := st.admin.FlowcontrolV1().FlowSchemas()
	existing, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list FlowSchemas: %w", err)
	}
	plan, err := apfcount.Plan(existing.Items, apfIdentities(st.cfg))
	if err != nil {
		klog.ErrorS(err, "No API requests per client: the API server's FlowSchemas cannot be copied per client")
		return nil, nil
	}
	for i := range plan.Schemas {
		if _, err := client.Create(ctx, &plan.Schemas[i], metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create FlowSchema %s: %w", plan.Schemas[i].Name, err)
		}
	}
	plan.Clients[flowcontrolv1.FlowSchemaNameExempt] = mastersClient
	st.c.apfClients = plan.Clients
	selector := apfcount.LabelManagedBy + "=strandlab"
	return []readiness{{proc: st.apiserver, check: func(ctx context.Context) error {
		list, err := client.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		done := 0
		for i := range list.Items {
			if _, ours := plan.Clients[list.Items[i].Name]; ours && digested(&list.Items[i]) {
				done++
			}
		}
		if done < len(plan.Schemas) {
			return fmt.Errorf("the API server has taken in %d of %d per-client FlowSchemas", done, len(plan.Schemas))
		}
		return nil
	}}}, nil
}

// digested reports whether the APF controller has processed fs: it writes
// the Dangling condition of every schema it takes in, False when the
// priority level exists.
func digested(fs *flowcontrolv1.FlowSchema) bool {
	for _, c := range fs.Status.Conditions {
		if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
			return c.Status == flowcontrolv1.ConditionFalse
		}
	}
	return false
}

// APIRequestsByClient reads the API server's dispatched requests and sums
// them by client.
func (c *Cluster) APIRequestsByClient(ctx context.Context) (map[string]float64, error) {
	if c.apfClients == nil {
		return nil, fmt.Errorf("the cluster has no per-client FlowSchemas (see its start's warning)")
	}
	admin, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return nil, err
	}
	body, err := admin.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the API server serves no /metrics: %w", err)
		}
		return nil, fmt.Errorf("read the API server's /metrics: %w", err)
	}
	dispatched, err := apfcount.ParseDispatched(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	// The harness's count is read after the API server's, so that the
	// rest of "exempt" never counts a harness request the harness has not
	// counted yet (a request is dispatched before its response arrives).
	counts := apfcount.ByClient(dispatched, c.apfClients)
	harness := float64(c.harnessRequests.Load())
	counts[harnessClient] = harness
	counts[apiserverClient] = max(counts[mastersClient]-harness, 0)
	delete(counts, mastersClient)
	return counts, nil
}

// harnessCounter counts the requests of the harness's clients (every
// client made from the cluster's admin configuration) that the API server
// answered: those it dispatched, as it counts them (a watch once, when it
// starts). Connections that fail before a response are not requests it
// saw.
type harnessCounter struct {
	next  http.RoundTripper
	count *atomic.Int64
}

func (h harnessCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(r)
	if err == nil {
		h.count.Add(1)
	}
	return resp, err
}
