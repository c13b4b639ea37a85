package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/fault"
)

// Config wires a proxy to its upstream.
type Config struct {
	// Upstream is the API server, e.g. https://127.0.0.1:6443.
	Upstream *url.URL
	// UpstreamCAs verify the API server.
	UpstreamCAs *x509.CertPool
	// Identity is the controller's own client certificate. Requests that
	// carry no bearer token are forwarded with it; requests with a bearer
	// token (the controllers' service accounts) are forwarded with the token
	// alone, so the API server sees exactly who the controller is.
	Identity tls.Certificate
	Profile  fault.Profile
}

// samplerStream keeps the proxy's draws apart from the extender's under the
// same scenario seed.
const samplerStream = 0x70726f78

// Proxy is the throttling proxy.
type Proxy struct {
	profile    fault.Profile
	errors     *apiErrors
	queueLimit int
	sampler    *fault.Sampler
	limiter    *rate.Limiter
	metrics    *metrics
	journal    journal
	withCert   *httputil.ReverseProxy
	tokenOnly  *httputil.ReverseProxy
	identityCN string
}

// New returns a proxy for cfg.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.Profile.Validate(); err != nil {
		return nil, fmt.Errorf("proxy profile: %w", err)
	}
	if len(cfg.Identity.Certificate) == 0 {
		return nil, fmt.Errorf("proxy: no client identity")
	}
	leaf, err := x509.ParseCertificate(cfg.Identity.Certificate[0])
	if err != nil {
		return nil, err
	}
	p := &Proxy{profile: cfg.Profile, queueLimit: cfg.Profile.QueueLimit, sampler: fault.NewSampler(cfg.Profile.Seed, samplerStream),
		metrics: newMetrics(), identityCN: leaf.Subject.CommonName,
		errors: newAPIErrors(cfg.Profile.APIErrors, cfg.Profile.Seed)}
	if p.queueLimit == 0 {
		p.queueLimit = 10000
	}
	if cfg.Profile.QPS > 0 {
		burst := cfg.Profile.Burst
		if burst == 0 {
			burst = 1
		}
		p.limiter = rate.NewLimiter(rate.Limit(cfg.Profile.QPS), burst)
	}
	p.withCert = p.reverseProxy(cfg, &tls.Config{RootCAs: cfg.UpstreamCAs, Certificates: []tls.Certificate{cfg.Identity}, MinVersion: tls.VersionTLS12})
	p.tokenOnly = p.reverseProxy(cfg, &tls.Config{RootCAs: cfg.UpstreamCAs, MinVersion: tls.VersionTLS12})
	return p, nil
}

func (p *Proxy) reverseProxy(cfg Config, tlsConfig *tls.Config) *httputil.ReverseProxy {
	// DisableCompression: a request goes upstream with the controller's own
	// Accept-Encoding (kube-controller-manager asks for none); otherwise the
	// transport asks for gzip and the API server compresses every watch
	// event for us to unzip (docs/proxy.md, Identity).
	transport := &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 100, IdleConnTimeout: 90 * time.Second,
		DisableCompression: true}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(cfg.Upstream)
			r.Out.Host = cfg.Upstream.Host
		},
		Transport:      transport,
		FlushInterval:  -1, // watch streams: every frame goes out as soon as it is released
		ModifyResponse: p.modifyResponse,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				klog.V(2).InfoS("Upstream request failed", "path", r.URL.Path, "err", err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return rp
}

// ServeHTTP checks the caller, applies throttling and latency, counts the
// request and forwards it, or answers it with an injected error.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A request with a bearer token (a controller's service account: the
	// controller manager builds those clients without its certificate) goes
	// upstream with the token alone, so it can never gain anything. Any other
	// request borrows the controller's certificate upstream, which only the
	// controller itself, proven by the same certificate, may do.
	token := strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !token && (r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != p.identityCN) {
		http.Error(w, "strandlab proxy: only "+p.identityCN+" (or a bearer token) may use this proxy", http.StatusForbidden)
		return
	}
	info := requestInfoOf(r)
	// Counted when it starts: a watch may last for the cluster's lifetime.
	p.metrics.started(info.key())
	if p.limiter != nil {
		if err := p.limiter.Wait(r.Context()); err != nil {
			return
		}
	}
	if !sleep(r.Context(), p.sampler.Draw(p.profile.RequestLatency)) {
		return
	}
	if rule, fail := p.errors.decide(info); fail {
		entry := fault.JournalEntry{Time: time.Now(), Kind: fault.JournalAPIError, Resource: info.key()[len(info.verb)+1:], Name: info.name, Verb: info.verb, Code: rule.Status}
		if journaled(info) {
			entry.Body = readBody(r)
		}
		// Journaled and counted before the answer: the request never reaches
		// the API server, whatever happens to the answer.
		p.journal.add(entry)
		p.metrics.failed(info.key(), rule.Status)
		writeAPIError(w, r, rule, p.errors.sampler)
		return
	}
	var entry *fault.JournalEntry
	if journaled(info) {
		entry = &fault.JournalEntry{Time: time.Now(), Kind: fault.JournalRequest, Resource: info.key()[len(info.verb)+1:], Name: info.name, Verb: info.verb, Body: readBody(r)}
	}
	rw := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	ctx := context.WithValue(r.Context(), infoKey{}, info)
	if token {
		p.tokenOnly.ServeHTTP(rw, r.WithContext(ctx))
	} else {
		p.withCert.ServeHTTP(rw, r.WithContext(ctx))
	}
	p.metrics.finished(info.key(), rw.code)
	if entry != nil {
		entry.Code = rw.code
		p.journal.add(*entry)
	}
}

// sleep waits d, or less if ctx ends first; it reports whether the wait
// ran its course.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type infoKey struct{}

// modifyResponse wraps watch bodies in a delaying body.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	info, _ := resp.Request.Context().Value(infoKey{}).(requestInfo)
	if info.verb != "WATCH" || resp.StatusCode != http.StatusOK {
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	var frames FrameReader
	switch {
	case isProtobuf(ct):
		frames = NewProtobufFrameReader(resp.Body)
	case isJSON(ct):
		frames = NewJSONFrameReader(resp.Body)
	default:
		return nil // an encoding we do not parse: forwarded as it is
	}
	st := &stream{p: p, resource: info.resource, protobuf: isProtobuf(ct), lastAttached: map[string][]string{}}
	resp.Body = p.newDelayedBody(resp.Body, st, frames)
	return nil
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) { s.code = code; s.ResponseWriter.WriteHeader(code) }
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// requestInfo is the Kubernetes verb and resource of a request path
// (a small subset of k8s.io/apiserver's RequestInfoFactory).
type requestInfo struct {
	verb, resource, subresource string
	name                        string // not part of the counters' key
}

func (i requestInfo) key() string {
	if i.resource == "" {
		return i.verb + " " + "nonresource"
	}
	if i.subresource != "" {
		return i.verb + " " + i.resource + "/" + i.subresource
	}
	return i.verb + " " + i.resource
}

func requestInfoOf(r *http.Request) requestInfo {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return requestInfo{verb: r.Method}
	}
	watchPath := len(rest) > 0 && rest[0] == "watch"
	if watchPath {
		rest = rest[1:]
	}
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) != 2 {
		rest = rest[2:] // namespaced resource, not the namespace object itself
	}
	var info requestInfo
	if len(rest) > 0 {
		info.resource = rest[0]
	}
	if len(rest) > 1 {
		info.name = rest[1]
	}
	name := info.name
	if len(rest) > 2 {
		info.subresource = rest[2]
	}
	q := r.URL.Query()
	switch r.Method {
	case http.MethodGet:
		switch {
		case watchPath || q.Get("watch") == "true" || q.Get("watch") == "1":
			info.verb = "WATCH"
		case name == "":
			info.verb = "LIST"
		default:
			info.verb = "GET"
		}
	case http.MethodPost:
		info.verb = "CREATE"
	case http.MethodPut:
		info.verb = "UPDATE"
	case http.MethodPatch:
		info.verb = "PATCH"
	case http.MethodDelete:
		if name == "" {
			info.verb = "DELETECOLLECTION"
		} else {
			info.verb = "DELETE"
		}
	default:
		info.verb = r.Method
	}
	return info
}

// CountersHandler serves the counters as JSON (GET /strandlab/counters).
func (p *Proxy) CountersHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.metrics.counters())
	})
}

// metrics keeps the counters and the Prometheus collectors.
type metrics struct {
	mu       sync.Mutex
	requests map[string]int64
	delayedN int64
	maxDepth int64
	badN     int64
	errorsN  int64
	// lag counts each watched resource's frames by watchLagBounds bucket.
	lag  map[string][]uint64
	prom *promMetrics
}

// watchLagBounds are the buckets (seconds) of the watch lag histograms:
// from the 1 ms the proxy's own hand-over takes to the 30 s past which an
// informer is broken rather than behind.
var watchLagBounds = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30}

func newMetrics() *metrics {
	return &metrics{requests: map[string]int64{}, lag: map[string][]uint64{}, prom: newPromMetrics()}
}

func (m *metrics) started(key string) {
	m.mu.Lock()
	m.requests[key]++
	m.mu.Unlock()
}

func (m *metrics) finished(key string, code int) {
	verb, resource, _ := strings.Cut(key, " ")
	m.prom.requests.WithLabelValues(verb, resource, fmt.Sprint(code)).Inc()
}

// failed counts a request the proxy answered with an injected error.
func (m *metrics) failed(key string, code int) {
	m.mu.Lock()
	m.errorsN++
	m.mu.Unlock()
	m.finished(key, code)
}

func (m *metrics) delayed(resource, eventType string, d time.Duration) {
	m.mu.Lock()
	m.delayedN++
	m.mu.Unlock()
	m.prom.eventsDelayed.WithLabelValues(resource, eventType).Inc()
	m.prom.delay.Observe(d.Seconds())
}

func (m *metrics) queued(depth int) {
	m.mu.Lock()
	m.maxDepth = max(m.maxDepth, int64(depth))
	m.mu.Unlock()
	m.prom.queueDepth.Set(float64(depth))
}

// lagged counts one watch frame of resource taken lag after it was due.
func (m *metrics) lagged(resource string, lag time.Duration) {
	i := sort.SearchFloat64s(watchLagBounds, lag.Seconds())
	m.mu.Lock()
	counts, ok := m.lag[resource]
	if !ok {
		counts = make([]uint64, len(watchLagBounds)+1)
		m.lag[resource] = counts
	}
	counts[i]++
	m.mu.Unlock()
	m.prom.watchLag.WithLabelValues(resource).Observe(lag.Seconds())
}

func (m *metrics) undecodable() {
	m.mu.Lock()
	m.badN++
	m.mu.Unlock()
}

func (m *metrics) counters() fault.Counters {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := fault.Counters{Requests: map[string]int64{}, EventsDelayed: m.delayedN, MaxQueueDepth: m.maxDepth, Undecodable: m.badN, APIErrors: m.errorsN}
	keys := make([]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.Requests[k] = m.requests[k]
	}
	if len(m.lag) > 0 {
		c.WatchLag = map[string]fault.Histogram{}
		for r, counts := range m.lag {
			c.WatchLag[r] = fault.Histogram{Bounds: slices.Clone(watchLagBounds), Counts: slices.Clone(counts)}
		}
	}
	return c
}
