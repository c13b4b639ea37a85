package proxyadmin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/fault"
)

func TestClient(t *testing.T) {
	since := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	var gotSince string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.Write([]byte("ok"))
		case "/strandlab/counters":
			json.NewEncoder(w).Encode(fault.Counters{Requests: map[string]int64{"GET nodes": 3}, EventsDelayed: 2})
		case "/strandlab/journal":
			gotSince = r.URL.Query().Get("since")
			json.NewEncoder(w).Encode([]fault.JournalEntry{{Kind: fault.JournalEventDelayed, Resource: "nodes", Name: "n1"}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	c := Client{Base: srv.URL}

	if err := c.Healthz(ctx); err != nil {
		t.Errorf("Healthz: %v", err)
	}
	counters, err := c.Counters(ctx)
	if err != nil || counters.Requests["GET nodes"] != 3 || counters.EventsDelayed != 2 {
		t.Errorf("Counters = %+v, %v", counters, err)
	}
	journal, err := c.Journal(ctx, since)
	if err != nil || len(journal) != 1 || journal[0].Name != "n1" {
		t.Errorf("Journal = %+v, %v", journal, err)
	}
	if want := since.Format(time.RFC3339Nano); gotSince != want {
		t.Errorf("journal since = %q, want %q", gotSince, want)
	}
}

func TestClientErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := (Client{}).Counters(ctx); err == nil || !strings.Contains(err.Error(), "without the proxy") {
		t.Errorf("Counters without a proxy: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	if err := (Client{Base: srv.URL}).Healthz(ctx); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("Healthz of a failing proxy: %v", err)
	}
}
