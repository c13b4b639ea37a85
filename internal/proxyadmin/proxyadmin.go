// Package proxyadmin reads a running throttling proxy's admin server
// (tools/apiproxy --admin-bind): whether it serves (healthz), its counters
// and its journal. It is kept apart from internal/proxy so that the cluster
// providers, which start the proxy as a program and only read it, do not
// link the proxy server. It imports internal/fault and the standard library
// only.
package proxyadmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/strandlab/strandlab/internal/fault"
)

// Client reads a running proxy's admin server (tools/apiproxy
// --admin-bind): how a provider's cluster answers ProxyCounters and
// ProxyJournal, wherever the proxy runs.
type Client struct {
	// Base is the admin server's URL, e.g. http://127.0.0.1:6445; empty
	// when the cluster runs without the proxy.
	Base string
}

// Healthz is nil once the proxy serves.
func (a Client) Healthz(ctx context.Context) error {
	var ignored json.RawMessage
	return a.get(ctx, "/healthz", &ignored)
}

// Counters are the proxy's totals since it started.
func (a Client) Counters(ctx context.Context) (fault.Counters, error) {
	var out fault.Counters
	return out, a.get(ctx, "/strandlab/counters", &out)
}

// Journal is what the proxy delayed or saw the controller write since t.
func (a Client) Journal(ctx context.Context, since time.Time) ([]fault.JournalEntry, error) {
	var out []fault.JournalEntry
	return out, a.get(ctx, "/strandlab/journal?since="+url.QueryEscape(since.Format(time.RFC3339Nano)), &out)
}

// requestTimeout bounds every admin request: some callers read the
// counters with a background context (an interrupted run's last reading),
// and a proxy that stopped answering must not hang them.
const requestTimeout = time.Minute

func (a Client) get(ctx context.Context, path string, into any) error {
	if a.Base == "" {
		return errors.New("this cluster runs without the proxy")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Base+path, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: requestTimeout}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("proxy %s: %s", path, resp.Status)
	}
	if path == "/healthz" {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(into)
}
