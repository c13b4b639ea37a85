package proxy

import (
	"io"
	"slices"
	"sync"
	"time"

	"github.com/strandlab/strandlab/internal/fault"
)

// delayedFrame is one watch event waiting for its release time.
type delayedFrame struct {
	data    []byte
	release time.Time
}

// delayedBody is a watch response body whose frames are released no earlier
// than their release time, in arrival order. A reader goroutine fills a
// bounded queue from the upstream body; when the queue is full it blocks,
// and so stops reading from the API server.
type delayedBody struct {
	upstream io.ReadCloser
	queue    chan delayedFrame
	done     chan struct{}
	closeErr sync.Once

	cur   []byte // the frame being read out
	err   error  // the upstream's end, once the queue is drained
	errMu sync.Mutex
	// taken records each frame's lag when the controller's side takes it.
	taken func(lag time.Duration)
}

// stream is the per-watch state the rules need.
type stream struct {
	p        *Proxy
	resource string
	protobuf bool
	// lastAttached is each node's volumesAttached as last seen on this watch.
	lastAttached map[string][]string
	lastRelease  time.Time
}

func (p *Proxy) newDelayedBody(upstream io.ReadCloser, st *stream, frames FrameReader) *delayedBody {
	d := &delayedBody{upstream: upstream, queue: make(chan delayedFrame, p.queueLimit), done: make(chan struct{}),
		taken: func(lag time.Duration) { p.metrics.lagged(st.resource, lag) }}
	go d.fill(st, frames)
	return d
}

func (d *delayedBody) fill(st *stream, frames FrameReader) {
	defer close(d.queue)
	for {
		frame, err := frames.Next()
		if err != nil {
			d.errMu.Lock()
			d.err = err
			d.errMu.Unlock()
			return
		}
		now := time.Now()
		delay, entry := st.delayFor(frame)
		// Never release before an earlier frame: no reordering, whatever the
		// draws.
		release := now.Add(delay)
		if release.Before(st.lastRelease) {
			release = st.lastRelease
		}
		st.lastRelease = release
		if entry != nil {
			entry.Time, entry.Release = now, release
			st.p.journal.add(*entry)
		}
		select {
		case d.queue <- delayedFrame{data: frame, release: release}:
			st.p.metrics.queued(len(d.queue))
		case <-d.done:
			return
		}
	}
}

// delayFor classifies a frame and draws its delay from the first matching
// rule; 0 when none matches or the frame cannot be decoded. A delayed
// event comes with its journal entry (times filled in by the caller).
func (st *stream) delayFor(frame []byte) (time.Duration, *fault.JournalEntry) {
	var rules []fault.Rule
	needNode := false
	for _, r := range st.p.profile.Rules {
		if r.Resource == st.resource {
			rules = append(rules, r)
			// Node names (and lists) go into the journal of delayed events.
			needNode = needNode || r.Predicate != "" || st.resource == "nodes"
		}
	}
	if len(rules) == 0 {
		return 0, nil
	}
	ev, err := decodeEvent(st.protobuf, frame, needNode)
	if err != nil {
		st.p.metrics.undecodable()
		return 0, nil
	}
	var removed, added bool
	if ev.Node != "" {
		prev, seen := st.lastAttached[ev.Node]
		if seen {
			for _, v := range prev {
				removed = removed || !slices.Contains(ev.VolumesAttached, v)
			}
			for _, v := range ev.VolumesAttached {
				added = added || !slices.Contains(prev, v)
			}
		}
		if ev.Type == "DELETED" {
			delete(st.lastAttached, ev.Node)
		} else {
			st.lastAttached[ev.Node] = ev.VolumesAttached
		}
	}
	for _, r := range rules {
		if len(r.EventTypes) > 0 && !slices.Contains(r.EventTypes, ev.Type) {
			continue
		}
		switch r.Predicate {
		case fault.PredicateVolumesAttachedRemoved:
			if !removed {
				continue
			}
		case fault.PredicateVolumesAttachedAdded:
			if !added {
				continue
			}
		}
		d := st.p.sampler.Draw(r.Delay)
		if d <= 0 {
			return 0, nil
		}
		st.p.metrics.delayed(st.resource, ev.Type, d)
		e := &fault.JournalEntry{Kind: fault.JournalEventDelayed, Resource: st.resource, Name: ev.Node, Verb: ev.Type}
		if ev.Node != "" {
			e.Body = attachedJSON(ev.VolumesAttached)
		}
		return d, e
	}
	return 0, nil
}

func (d *delayedBody) Read(b []byte) (int, error) {
	if len(d.cur) == 0 {
		f, ok := <-d.queue
		if !ok {
			d.errMu.Lock()
			defer d.errMu.Unlock()
			return 0, d.err
		}
		// Read is called again only once the previous frame has been
		// written to the controller's connection, so a frame taken after
		// it was due waited for the controller to read its watch.
		wait := time.Until(f.release)
		d.taken(max(-wait, 0))
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-d.done:
				t.Stop()
				return 0, io.ErrClosedPipe
			}
		}
		d.cur = f.data
	}
	n := copy(b, d.cur)
	d.cur = d.cur[n:]
	return n, nil
}

func (d *delayedBody) Close() error {
	var err error
	d.closeErr.Do(func() {
		close(d.done)
		err = d.upstream.Close()
	})
	return err
}
