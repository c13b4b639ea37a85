package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/strandlab/strandlab/internal/fault"
)

// journal is a bounded ring of entries; the oldest are dropped first, so a
// long soak keeps only the recent past (timelines look back seconds).
type journal struct {
	mu      sync.Mutex
	entries []fault.JournalEntry
	next    int
	full    bool
}

const (
	journalSize    = 20000
	maxJournalBody = 2048
)

func (j *journal) add(e fault.JournalEntry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.entries == nil {
		j.entries = make([]fault.JournalEntry, journalSize)
	}
	j.entries[j.next] = e
	j.next = (j.next + 1) % journalSize
	j.full = j.full || j.next == 0
}

// since returns the entries at or after t, oldest first. A request is
// added when its response has been written, so the ring holds entries in
// completion order; sorting by Time (when the request arrived) puts two
// overlapping requests back in the order they were made.
func (j *journal) since(t time.Time) []fault.JournalEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	var ordered []fault.JournalEntry
	if j.full {
		ordered = append(append(ordered, j.entries[j.next:]...), j.entries[:j.next]...)
	} else {
		ordered = j.entries[:j.next]
	}
	out := []fault.JournalEntry{}
	for _, e := range ordered {
		if !e.Time.Before(t) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Time.Before(out[b].Time) })
	return out
}

// journaled tells whether a request's body belongs in the journal: the
// controller's writes to node status and VolumeAttachments.
func journaled(info requestInfo) bool {
	if info.verb == "GET" || info.verb == "LIST" || info.verb == "WATCH" {
		return false
	}
	return (info.resource == "nodes" && info.subresource == "status") || info.resource == "volumeattachments"
}

// readBody returns up to maxJournalBody bytes of r's body and puts the whole
// body back for forwarding.
func readBody(r *http.Request) string {
	if r.Body == nil || r.Body == http.NoBody {
		return ""
	}
	data, err := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(data))
	if err != nil || len(data) == 0 {
		return ""
	}
	// Patches are JSON whatever the client's encoding; protobuf bodies
	// (creates, delete options) are summarised.
	if ct := r.Header.Get("Content-Type"); !strings.Contains(ct, "json") && !strings.Contains(ct, "yaml") {
		return fmt.Sprintf("(%d bytes of %s)", len(data), ct)
	}
	if len(data) > maxJournalBody {
		data = append(data[:maxJournalBody:maxJournalBody], "..."...)
	}
	return string(data)
}

// JournalHandler serves the entries since ?since= (RFC 3339, default all) as
// JSON (GET /strandlab/journal).
func (p *Proxy) JournalHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var since time.Time
		if s := r.URL.Query().Get("since"); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				http.Error(w, "since: "+err.Error(), http.StatusBadRequest)
				return
			}
			since = t
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.journal.since(since))
	})
}

func attachedJSON(names []string) string {
	data, _ := json.Marshal(names)
	return string(data)
}
