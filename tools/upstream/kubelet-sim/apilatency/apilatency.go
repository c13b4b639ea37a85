// Package apilatency makes kubelet-sim's API requests take as long as a
// real kubelet's took on kind. On a loaded 2-core machine a kind kubelet's
// requests took 29-71 ms at the median (its client's
// rest_client_request_duration_seconds, by verb) where kubelet-sim's took a
// few: every status write, read and delete of a pod's life was that much
// sooner on local. The transport draws each request's time from the
// measured histogram of its method and holds the request back by the part
// of it that the request itself does not already take here.
package apilatency

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/strandlab/strandlab/tools/upstream/kubelet-sim/containerruntime"
)

// Drawer draws one request's time for an HTTP method; ok is false when it
// has none for the method (the request is not held).
type Drawer interface {
	APIRequest(method string) (d time.Duration, ok bool)
}

// Wrap is a rest.Config WrapTransport that holds requests back as drawn.
func Wrap(draw Drawer) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return &Transport{Next: next, Draw: draw}
	}
}

// Transport holds each request (watches excepted) back before sending it,
// by the drawn time less what a request of its method takes here (a
// moving average of the round trips it has seen): the real kubelet's
// time was spent before the server saw the request as much as after
// (client-side queueing for the CPU, the server's own slower handling), and
// holding it before keeps the write's effect as late as it was on kind.
type Transport struct {
	Next http.RoundTripper
	Draw Drawer
	// Sleep waits d or until ctx ends (tests record instead).
	Sleep func(ctx context.Context, d time.Duration) error

	mu  sync.Mutex
	own map[string]time.Duration
}

// ownWeight is the weight of the newest round trip in the moving average.
const ownWeight = 0.1

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		return t.Next.RoundTrip(req)
	}
	if d, ok := t.Draw.APIRequest(req.Method); ok {
		if hold := d - t.ownTime(req.Method); hold > 0 {
			sleep := t.Sleep
			if sleep == nil {
				sleep = containerruntime.Sleep
			}
			if err := sleep(req.Context(), hold); err != nil {
				return nil, err
			}
		}
	}
	start := time.Now()
	resp, err := t.Next.RoundTrip(req)
	if err == nil {
		t.observe(req.Method, time.Since(start))
	}
	return resp, err
}

func (t *Transport) ownTime(method string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.own[method]
}

func (t *Transport) observe(method string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.own == nil {
		t.own = map[string]time.Duration{}
	}
	old, seen := t.own[method]
	if !seen {
		t.own[method] = d
		return
	}
	t.own[method] = old + time.Duration(ownWeight*float64(d-old))
}

// isWatch is whether the request opens a watch: client-go's histogram of
// request times leaves watches out (rest.Request.Watch does not go through
// rest.Request.request), and a watch's time is its life.
func isWatch(req *http.Request) bool {
	return req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1" ||
		strings.Contains(req.URL.Path, "/watch/")
}
