package apilatency

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

type fixed map[string]time.Duration

func (f fixed) APIRequest(method string) (time.Duration, bool) {
	d, ok := f[method]
	return d, ok
}

// A request is held by its drawn time less what requests of its method
// take here; a watch and a method with no histogram are not held.
func TestHold(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer server.Close()
	for _, tc := range []struct {
		name, method, path string
		own                time.Duration // what the method's round trips took so far
		want               time.Duration
	}{
		{"a status write", http.MethodPatch, "/api/v1/namespaces/a/pods/p/status", 0, 30 * time.Millisecond},
		{"less the time a request takes here", http.MethodPatch, "/api/v1/namespaces/a/pods/p/status", 10 * time.Millisecond, 20 * time.Millisecond},
		{"not below zero", http.MethodPatch, "/api/v1/namespaces/a/pods/p/status", time.Second, 0},
		{"a read", http.MethodGet, "/api/v1/namespaces/a/pods/p", 0, 40 * time.Millisecond},
		{"a watch", http.MethodGet, "/api/v1/pods?watch=true", 0, 0},
		{"an old-style watch", http.MethodGet, "/api/v1/watch/pods", 0, 0},
		{"a method not measured", http.MethodDelete, "/api/v1/namespaces/a/pods/p", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var held time.Duration
			tr := &Transport{Next: http.DefaultTransport, Draw: fixed{http.MethodPatch: 30 * time.Millisecond, http.MethodGet: 40 * time.Millisecond},
				Sleep: func(_ context.Context, d time.Duration) error { held += d; return nil }}
			if tc.own > 0 {
				tr.own = map[string]time.Duration{tc.method: tc.own}
			}
			req, _ := http.NewRequest(tc.method, server.URL+tc.path, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if held != tc.want {
				t.Errorf("held %v, want %v", held, tc.want)
			}
		})
	}
}

// The time a method takes here follows its round trips.
func TestOwnTimeFollowsRoundTrips(t *testing.T) {
	tr := &Transport{}
	tr.observe(http.MethodGet, 10*time.Millisecond)
	if got := tr.ownTime(http.MethodGet); got != 10*time.Millisecond {
		t.Errorf("after one round trip: %v, want 10ms", got)
	}
	for range 100 {
		tr.observe(http.MethodGet, 2*time.Millisecond)
	}
	if got := tr.ownTime(http.MethodGet); got < 2*time.Millisecond || got > 2100*time.Microsecond {
		t.Errorf("after 100 round trips of 2ms: %v", got)
	}
	if got := tr.ownTime(http.MethodPatch); got != 0 {
		t.Errorf("a method never seen: %v, want 0", got)
	}
}

// A request whose context ends while it is held is not sent.
func TestCancelledWhileHeld(t *testing.T) {
	sent := false
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent = true }))
	defer server.Close()
	tr := &Transport{Next: http.DefaultTransport, Draw: fixed{http.MethodGet: time.Hour}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, server.URL, nil)
	if _, err := tr.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
	if sent {
		t.Error("the cancelled request was sent")
	}
}
