package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/pki"
)

// certs are a CA and the identities of one proxy test.
type certs struct {
	pool                 *x509.CertPool
	caPEM                []byte
	server, kcm, someone tls.Certificate
}

func newCerts(t testing.TB) certs {
	dir := t.TempDir()
	ca, err := pki.NewCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	load := func(c, k string, err error) tls.Certificate {
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.LoadX509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
	var out certs
	out.pool = x509.NewCertPool()
	out.pool.AddCert(ca.Cert)
	out.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
	out.server = load(ca.ServingCert(dir, "server", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}))
	out.kcm = load(ca.ClientCert(dir, "kcm", pki.Identity{CommonName: "system:kube-controller-manager"}))
	out.someone = load(ca.ClientCert(dir, "someone", pki.Identity{CommonName: "someone-else"}))
	return out
}

// upstream is a fake API server: it records who called, and serves a watch
// stream of the frames written to its channel.
type upstream struct {
	srv    *httptest.Server
	frames chan []byte
	ct     string
	mu     sync.Mutex
	seen   []string // "cn|authorization" per request
	// encodings is each request's Accept-Encoding.
	encodings []string
}

func newUpstream(t testing.TB, c certs, contentType string) *upstream {
	u := &upstream{frames: make(chan []byte, 100), ct: contentType}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := ""
		if len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		u.mu.Lock()
		u.seen = append(u.seen, cn+"|"+r.Header.Get("Authorization"))
		u.encodings = append(u.encodings, r.Header.Get("Accept-Encoding"))
		u.mu.Unlock()
		if r.URL.Query().Get("watch") != "true" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("{}"))
			return
		}
		w.Header().Set("Content-Type", u.ct)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for f := range u.frames {
			if _, err := w.Write(f); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{c.server}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: c.pool}
	u.srv.StartTLS()
	t.Cleanup(func() { close(u.frames); u.srv.Close() })
	return u
}

func startProxy(t testing.TB, c certs, up *upstream, profile fault.Profile) (*Proxy, *httptest.Server) {
	target, _ := url.Parse(up.srv.URL)
	p, err := New(Config{Upstream: target, UpstreamCAs: c.pool, Identity: c.kcm, Profile: profile})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(p)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{c.server}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: c.pool, NextProtos: []string{"h2", "http/1.1"}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return p, srv
}

func clientWith(c certs, id *tls.Certificate) *http.Client { return clientProto(c, id, true) }

// clientProto speaks HTTP/2 or, with http2 false, HTTP/1.1 only.
func clientProto(c certs, id *tls.Certificate, http2 bool) *http.Client {
	cfg := &tls.Config{RootCAs: c.pool}
	if id != nil {
		cfg.Certificates = []tls.Certificate{*id}
	}
	if !http2 {
		cfg.NextProtos = []string{"http/1.1"}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: http2}}
}

func TestIdentityIsPreserved(t *testing.T) {
	c := newCerts(t)
	up := newUpstream(t, c, "application/json")
	_, srv := startProxy(t, c, up, fault.Profile{})
	tests := []struct {
		name     string
		id       *tls.Certificate
		token    string
		wantCode int
		wantSeen string
	}{
		{"controller certificate is forwarded as the controller", &c.kcm, "", 200, "system:kube-controller-manager|"},
		{"a service account token is forwarded alone", &c.kcm, "Bearer sa-token", 200, "|Bearer sa-token"},
		{"a token without a certificate is forwarded alone", nil, "Bearer sa-token", 200, "|Bearer sa-token"},
		{"anyone else is refused", &c.someone, "", 403, ""},
		{"no certificate and no token is refused", nil, "", 403, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up.mu.Lock()
			up.seen = nil
			up.mu.Unlock()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/x/secrets/y", nil)
			if tc.token != "" {
				req.Header.Set("Authorization", tc.token)
			}
			resp, err := clientWith(c, tc.id).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.wantCode)
			}
			up.mu.Lock()
			defer up.mu.Unlock()
			if tc.wantSeen == "" && len(up.seen) != 0 || tc.wantSeen != "" && (len(up.seen) != 1 || up.seen[0] != tc.wantSeen) {
				t.Errorf("upstream saw %q, want %q", up.seen, tc.wantSeen)
			}
		})
	}
}

func nodeWith(volumes ...string) *corev1.Node {
	n := &corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	for _, v := range volumes {
		n.Status.VolumesAttached = append(n.Status.VolumesAttached, corev1.AttachedVolume{Name: corev1.UniqueVolumeName(v)})
	}
	return n
}

func jsonFrame(t testing.TB, typ string, obj runtime.Object) []byte {
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"type": typ, "object": json.RawMessage(raw)})
	return append(b, '\n')
}

func protoFrameOf(t testing.TB, typ string, obj runtime.Object) []byte {
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	var buf bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	we := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: buf.Bytes()}}
	payload, err := we.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(out, uint32(len(payload)))
	copy(out[4:], payload)
	return out
}

// The removal of a volume from a node's status is held back; the event after
// it, which matches no rule, still comes after it; every frame arrives
// byte for byte.
func TestWatchEventsAreDelayedInOrder(t *testing.T) {
	const hold = 400 * time.Millisecond
	profile := fault.Profile{Rules: []fault.Rule{{Resource: "nodes", EventTypes: []string{"MODIFIED"}, Predicate: fault.PredicateVolumesAttachedRemoved, Delay: fault.Delay{Fixed: fault.D(hold)}}}}
	encodings := []struct {
		name  string
		ct    string
		frame func(testing.TB, string, runtime.Object) []byte
		split func(io.Reader) FrameReader
	}{
		{"JSON", "application/json", jsonFrame, NewJSONFrameReader},
		{"protobuf", "application/vnd.kubernetes.protobuf;stream=watch", protoFrameOf, NewProtobufFrameReader},
	}
	for _, enc := range encodings {
		for _, proto := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s over HTTP/%d", enc.name, proto), func(t *testing.T) {
				c := newCerts(t)
				up := newUpstream(t, c, enc.ct)
				p, srv := startProxy(t, c, up, profile)
				resp, err := clientProto(c, &c.kcm, proto == 2).Get(srv.URL + "/api/v1/nodes?watch=true")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.ProtoMajor != proto {
					t.Errorf("client spoke HTTP/%d, want HTTP/%d", resp.ProtoMajor, proto)
				}
				sent := [][]byte{
					enc.frame(t, "ADDED", nodeWith("v1")),
					enc.frame(t, "MODIFIED", nodeWith()),     // v1 removed: held
					enc.frame(t, "MODIFIED", nodeWith("v2")), // no removal: must not overtake
					enc.frame(t, "MODIFIED", nodeWith("v2")), // nor this one
				}
				frames := enc.split(bufio.NewReader(resp.Body))
				// A burst: every frame is upstream before the held one is
				// due, so the later ones could overtake it if the proxy let
				// them.
				start := time.Now()
				for _, f := range sent {
					up.frames <- f
				}
				var at []time.Duration
				for i, f := range sent {
					got, err := frames.Next()
					if err != nil {
						t.Fatalf("frame %d: %v", i, err)
					}
					at = append(at, time.Since(start))
					if !bytes.Equal(got, f) {
						t.Fatalf("frame %d: got another frame or a changed one (order or bytes broken)", i)
					}
				}
				if at[0] > hold/2 {
					t.Errorf("unmatched first event took %v", at[0])
				}
				if at[1] < hold {
					t.Errorf("removal event arrived after %v, want at least %v", at[1], hold)
				}
				if at[2] < hold || at[3] < hold {
					t.Errorf("events after the held one arrived after %v and %v, before its release at %v", at[2], at[3], hold)
				}
				cnt := p.metrics.counters()
				if cnt.EventsDelayed != 1 || cnt.Undecodable != 0 {
					t.Errorf("counters %+v, want exactly one delayed event", cnt)
				}
				// The journal names the held event, its node and its list.
				j := p.journal.since(time.Time{})
				if len(j) != 1 || j[0].Kind != fault.JournalEventDelayed || j[0].Verb != "MODIFIED" || j[0].Name != "node-1" ||
					j[0].Body != "[]" || j[0].Release.Sub(j[0].Time) < hold {
					t.Errorf("journal %+v, want the one held MODIFIED event of node-1 with volumesAttached []", j)
				}
			})
		}
	}
}

// TestJournalRecordsControllerWrites: the body of the controller's node
// status patch reaches the journal (an empty patch shows as {}), reads do
// not, and the upstream still receives the whole body.
func TestJournalRecordsControllerWrites(t *testing.T) {
	c := newCerts(t)
	up := newUpstream(t, c, "application/json")
	p, srv := startProxy(t, c, up, fault.Profile{})
	client := clientWith(c, &c.kcm)
	requests := []struct{ method, path, body string }{
		{http.MethodPatch, "/api/v1/nodes/node-1/status", "{}"},
		{http.MethodGet, "/api/v1/nodes/node-1", ""},
		{http.MethodDelete, "/apis/storage.k8s.io/v1/volumeattachments/csi-abc", ""},
		{http.MethodPatch, "/api/v1/namespaces/ns/pods/p/status", `{"status":{}}`},
	}
	for _, r := range requests {
		req, _ := http.NewRequest(r.method, srv.URL+r.path, strings.NewReader(r.body))
		req.Header.Set("Content-Type", "application/strategic-merge-patch+json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := []fault.JournalEntry{
		{Kind: "request", Resource: "nodes/status", Name: "node-1", Verb: "PATCH", Body: "{}", Code: 200},
		{Kind: "request", Resource: "volumeattachments", Name: "csi-abc", Verb: "DELETE", Code: 200},
	}
	// The proxy journals a request (with its status code) once the
	// response has been written, so the client can see the response a
	// moment before the entry exists: poll with a deadline.
	var j []fault.JournalEntry
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if j = p.journal.since(time.Time{}); len(j) >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	if len(j) != len(want) {
		t.Fatalf("journal has %d entries %+v, want %d", len(j), j, len(want))
	}
	for i := range want {
		got := j[i]
		got.Time = time.Time{}
		if got != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got, want[i])
		}
	}
	if later := p.journal.since(time.Now()); len(later) != 0 {
		t.Errorf("since(now) = %+v, want nothing", later)
	}
}

func TestRequestInfo(t *testing.T) {
	tests := []struct{ method, path, want string }{
		{"GET", "/api/v1/nodes?watch=true", "WATCH nodes"},
		{"GET", "/api/v1/nodes", "LIST nodes"},
		{"GET", "/api/v1/nodes/node-1", "GET nodes"},
		{"PATCH", "/api/v1/nodes/node-1/status", "PATCH nodes/status"},
		{"GET", "/apis/storage.k8s.io/v1/volumeattachments?watch=1", "WATCH volumeattachments"},
		{"POST", "/api/v1/namespaces/ns/pods", "CREATE pods"},
		{"DELETE", "/apis/storage.k8s.io/v1/volumeattachments/csi-1", "DELETE volumeattachments"},
		{"PUT", "/api/v1/namespaces/ns/pods/p/status", "UPDATE pods/status"},
		{"GET", "/api/v1/namespaces/ns", "GET namespaces"},
		{"GET", "/healthz", "GET nonresource"},
	}
	for _, tc := range tests {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		if got := requestInfoOf(r).key(); got != tc.want {
			t.Errorf("%s %s = %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}

// TestDelayedQueueIsBounded: with every event held far longer than the test
// runs, the proxy holds at most QueueLimit events per watch and then stops
// reading from the API server (backpressure), so its memory is bounded by
// QueueLimit x frame size however fast the upstream writes. The benchmark
// BenchmarkDelayedWatchMemory measures the heap that bound allows.
func TestDelayedQueueIsBounded(t *testing.T) {
	const limit = 20
	c := newCerts(t)
	up := newUpstream(t, c, "application/json")
	p, srv := startProxy(t, c, up, fault.Profile{QueueLimit: limit, Rules: []fault.Rule{{Resource: "nodes", Delay: fault.Delay{Fixed: fault.D(fault.MaxDelay)}}}})
	resp, err := clientWith(c, &c.kcm).Get(srv.URL + "/api/v1/nodes?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// 100 frames of 512 KiB: far more than the limit and than the socket
	// buffers between upstream and proxy can absorb. The upstream channel
	// holds them all, so taken (frames the upstream handler took to write)
	// counts what the proxy let through.
	big := strings.Repeat("x", 512<<10)
	frame := jsonFrame(t, "MODIFIED", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Annotations: map[string]string{"pad": big}}})
	const total = 100
	for i := 0; i < total; i++ {
		up.frames <- frame
	}
	taken := func() int { return total - len(up.frames) }
	// Poll until the queue is full and the upstream has stopped making
	// progress (unchanged for half a second), or everything went through.
	deadline := time.Now().Add(20 * time.Second)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) && taken() < total {
		if n := taken(); n != last {
			last, since = n, time.Now()
		} else if p.metrics.counters().MaxQueueDepth >= limit && time.Since(since) > 500*time.Millisecond {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cnt := p.metrics.counters()
	if cnt.MaxQueueDepth != limit {
		t.Errorf("deepest queue %d, want exactly the limit %d", cnt.MaxQueueDepth, limit)
	}
	if n := taken(); n >= total {
		t.Errorf("the upstream wrote all %d frames of %d KiB: the proxy kept reading with its queue full (no backpressure)", n, len(frame)>>10)
	} else {
		t.Logf("upstream stopped after %d of %d frames (queue limit %d; the rest sat in socket buffers)", n, total, limit)
	}
}

// TestAcceptEncodingIsTheClients: a request reaches the API server with
// the Accept-Encoding its client sent, none when it sent none (as
// kube-controller-manager, whose client turns compression off), so the
// proxy never has the API server gzip what the controller did not ask to
// be gzipped.
func TestAcceptEncodingIsTheClients(t *testing.T) {
	c := newCerts(t)
	for _, tc := range []struct {
		name         string
		clientGzip   bool // the client's transport asks for gzip itself
		wantUpstream string
	}{
		{"client without compression", false, ""},
		{"client asking for gzip", true, "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, c, "application/json")
			_, srv := startProxy(t, c, up, fault.Profile{})
			client := clientWith(c, &c.kcm)
			client.Transport.(*http.Transport).DisableCompression = !tc.clientGzip
			resp, err := client.Get(srv.URL + "/api/v1/namespaces/default")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			up.mu.Lock()
			defer up.mu.Unlock()
			if len(up.encodings) != 1 || up.encodings[0] != tc.wantUpstream {
				t.Errorf("Accept-Encoding upstream %q, want one request with %q", up.encodings, tc.wantUpstream)
			}
		})
	}
}

// TestWatchLag: the proxy counts how long each watch event waited, after it
// was due, for the controller to read it. A controller that reads at once
// leaves its events no lag worth the name; one that stops reading for a
// second while large events arrive leaves some of them waiting for about
// that long, and the proxy's histogram shows it.
func TestWatchLag(t *testing.T) {
	const stall = time.Second
	tests := []struct {
		name   string
		frames int
		size   int           // padding per frame
		stall  time.Duration // the controller reads nothing for this long
		// want: the share of events that waited at least atLeast.
		atLeast    time.Duration
		minEvents  uint64
		maxLagging uint64
	}{
		{name: "a controller that reads at once", frames: 50, size: 1 << 10, atLeast: 200 * time.Millisecond, maxLagging: 0},
		// 48 MiB: more than the socket buffers between proxy and client
		// hold, so the proxy's writes block and later events queue there.
		{name: "a controller that stops reading", frames: 12, size: 4 << 20, stall: stall, atLeast: stall / 2, minEvents: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCerts(t)
			up := newUpstream(t, c, "application/json")
			p, srv := startProxy(t, c, up, fault.Profile{})
			resp, err := clientProto(c, &c.kcm, false).Get(srv.URL + "/api/v1/nodes?watch=true")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			pad := strings.Repeat("x", tt.size)
			frame := jsonFrame(t, "MODIFIED", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Annotations: map[string]string{"pad": pad}}})
			for i := 0; i < tt.frames; i++ {
				up.frames <- frame
			}
			if tt.stall > 0 {
				time.Sleep(tt.stall) // the stimulus: the controller not reading
			}
			frames := NewJSONFrameReader(bufio.NewReader(resp.Body))
			for i := 0; i < tt.frames; i++ {
				if _, err := frames.Next(); err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
			}
			h, ok := p.metrics.counters().WatchLag["nodes"]
			var total uint64
			for _, n := range h.Counts {
				total += n
			}
			if !ok || total != uint64(tt.frames) {
				t.Fatalf("watch lag %+v: want all %d events counted", h, tt.frames)
			}
			var lagging uint64
			for i, n := range h.Counts {
				if i > 0 && h.Bounds[i-1] >= tt.atLeast.Seconds() {
					lagging += n
				}
			}
			if lagging < tt.minEvents || (tt.stall == 0 && lagging > tt.maxLagging) {
				t.Errorf("%d of %d events waited %v or more (histogram %v over %v)", lagging, tt.frames, tt.atLeast, h.Counts, h.Bounds)
			}
		})
	}
}
