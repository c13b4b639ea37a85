package proxy

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/strandlab/strandlab/internal/fault"
)

// controllerClient is a clientset that reaches srv as kube-controller-manager.
func controllerClient(t *testing.T, c certs, srv string) kubernetes.Interface {
	t.Helper()
	key, err := x509.MarshalPKCS8PrivateKey(c.kcm.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.kcm.Certificate[0]})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv, TLSClientConfig: rest.TLSClientConfig{CAData: c.caPEM, CertData: certPEM, KeyData: keyPEM},
		Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestAPIErrorsReachTheClient: the controller's client sees the error the
// rule names, as the apierrors predicates its callers use classify it, and
// the API server never sees the failed request.
func TestAPIErrorsReachTheClient(t *testing.T) {
	c := newCerts(t)
	tests := []struct {
		status int
		is     func(error) bool
		// retried: client-go retries a 429 that carries Retry-After (its
		// request.go checkWait), so the controller sees no error and the
		// API server sees the retry.
		retried bool
	}{
		{409, apierrors.IsConflict, false},
		{429, apierrors.IsTooManyRequests, true},
		{500, apierrors.IsInternalError, false},
		{503, apierrors.IsServiceUnavailable, false},
		{504, apierrors.IsTimeout, false},
	}
	for _, tc := range tests {
		t.Run(statusReason[tc.status], func(t *testing.T) {
			up := newUpstream(t, c, "application/json")
			rule := fault.APIError{Resource: "nodes", Subresource: "status", Verbs: []string{"PATCH"}, Status: tc.status, Nth: 1}
			p, srv := startProxy(t, c, up, fault.Profile{APIErrors: []fault.APIError{rule}})
			cs := controllerClient(t, c, srv.URL)
			ctx := context.Background()
			_, err := cs.CoreV1().Nodes().Patch(ctx, "node-1", types.StrategicMergePatchType, []byte(`{"status":{"volumesAttached":null}}`), metav1.PatchOptions{}, "status")
			switch {
			case tc.retried && err != nil:
				t.Fatalf("first status PATCH: %v, want client-go's retry to succeed", err)
			case !tc.retried && (err == nil || !tc.is(err)):
				t.Fatalf("first status PATCH: err = %v, want a %d error", err, tc.status)
			}
			wantUpstream := 0
			if tc.retried {
				wantUpstream = 1
			}
			if n := len(up.seenCopy()); n != wantUpstream {
				t.Errorf("upstream saw %d requests of the first PATCH, want %d (the failed one never reaches it)", n, wantUpstream)
			}
			// The next PATCH, and a GET of the same node, go through.
			if _, err := cs.CoreV1().Nodes().Patch(ctx, "node-1", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status"); err != nil {
				t.Fatalf("second status PATCH: %v", err)
			}
			if _, err := cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{}); err != nil {
				t.Fatalf("GET: %v", err)
			}
			if n := len(up.seenCopy()); n != wantUpstream+2 {
				t.Errorf("upstream saw %d requests in all, want %d", n, wantUpstream+2)
			}
			var injected []fault.JournalEntry
			for _, e := range p.journal.since(time.Time{}) {
				if e.Kind == fault.JournalAPIError {
					e.Time = time.Time{}
					injected = append(injected, e)
				}
			}
			want := fault.JournalEntry{Kind: fault.JournalAPIError, Resource: "nodes/status", Name: "node-1", Verb: "PATCH", Body: `{"status":{"volumesAttached":null}}`, Code: tc.status}
			if len(injected) != 1 || injected[0] != want {
				t.Errorf("journal's injected errors = %+v, want [%+v]", injected, want)
			}
			if n := p.metrics.counters().APIErrors; n != 1 {
				t.Errorf("counters: %d api errors, want 1", n)
			}
		})
	}
}

// TestAPIErrorSelection: which requests a rule fails — verbs, subresource,
// the n-th, a seeded fraction — and the first matching rule wins.
func TestAPIErrorSelection(t *testing.T) {
	patch := requestInfo{verb: "PATCH", resource: "nodes", subresource: "status", name: "n"}
	get := requestInfo{verb: "GET", resource: "nodes", name: "n"}
	vaDelete := requestInfo{verb: "DELETE", resource: "volumeattachments", name: "va"}
	failures := func(rules []fault.APIError, seed uint64, reqs ...requestInfo) []int {
		a := newAPIErrors(rules, seed)
		var out []int
		for _, r := range reqs {
			if rule, fail := a.decide(r); fail {
				out = append(out, rule.Status)
			} else {
				out = append(out, 0)
			}
		}
		return out
	}
	tests := []struct {
		name  string
		rules []fault.APIError
		reqs  []requestInfo
		want  []int
	}{
		{"nth fails that one only", []fault.APIError{{Resource: "nodes", Subresource: "status", Status: 500, Nth: 2}},
			[]requestInfo{patch, patch, patch}, []int{0, 500, 0}},
		{"the resource itself is not its status", []fault.APIError{{Resource: "nodes", Status: 503, Nth: 1}},
			[]requestInfo{patch, get, get}, []int{0, 503, 0}},
		{"verbs narrow the rule", []fault.APIError{{Resource: "volumeattachments", Verbs: []string{"DELETE"}, Status: 409, Fraction: 1}},
			[]requestInfo{get, vaDelete, vaDelete}, []int{0, 409, 409}},
		{"the first matching rule applies", []fault.APIError{
			{Resource: "nodes", Subresource: "status", Status: 429, Nth: 1},
			{Resource: "nodes", Subresource: "status", Status: 500, Fraction: 1}},
			[]requestInfo{patch, patch}, []int{429, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := failures(tc.rules, 1, tc.reqs...)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
	t.Run("a fraction is seeded and near its share", func(t *testing.T) {
		rules := []fault.APIError{{Resource: "nodes", Subresource: "status", Status: 500, Fraction: 0.25}}
		reqs := make([]requestInfo, 4000)
		for i := range reqs {
			reqs[i] = patch
		}
		a, b, other := failures(rules, 7, reqs...), failures(rules, 7, reqs...), failures(rules, 8, reqs...)
		n, same, differs := 0, true, false
		for i := range a {
			if a[i] != 0 {
				n++
			}
			same = same && a[i] == b[i]
			differs = differs || a[i] != other[i]
		}
		if !same || !differs {
			t.Errorf("same seed same failures: %v, another seed other failures: %v", same, differs)
		}
		// 4000 draws at 0.25: the standard deviation is 27, so ±150 is
		// more than 5 of them.
		if n < 850 || n > 1150 {
			t.Errorf("%d of 4000 failed, want about 1000", n)
		}
	})
}

// seenCopy is the requests the fake API server has seen so far.
func (u *upstream) seenCopy() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen...)
}
