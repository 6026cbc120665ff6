// Package resumer continues workflow runs that paused for human input, and
// lets clients follow a run's events from another request (after a
// dropped stream, or once a form was answered). It knows nothing of HTTP;
// the handlers frame what it delivers.
package resumer

import (
	"context"
	"sync"
	"time"

	"appkb/internal/run/workflow"
)

// Defaults of Hub.
const (
	// DefaultRetain is how long the events of an ended segment stay
	// available to late followers.
	DefaultRetain = time.Minute
	// DefaultMaxRetained bounds the ended segments kept at once; the
	// oldest go first.
	DefaultMaxRetained = 1000
)

// Hub keeps the events of run segments: from a run's start, or its
// resumption, to its end or pause. Followers get the events so far, then
// the rest as they happen. An ended segment stays for a while (Retain) so
// that a client who comes a little late still sees it; after that what it
// left is in the run's stored record.
type Hub struct {
	Retain      time.Duration
	MaxRetained int
	// Record, when set, is given every segment as it begins (first says
	// that it is the run's first, begun by BeginRun), and then its events
	// and its end: on PostgreSQL the events are written where other
	// replicas can follow them.
	Record func(runID string, first bool) SegmentRecorder

	mu       sync.Mutex
	seq      int64
	segments map[string]*segment
	ended    []*segment // ended segments still kept, oldest first
	// next holds, per run, a channel closed when a new segment begins.
	next map[string]chan struct{}
}

type segment struct {
	runID  string
	seq    int64
	events []workflow.Event
	done   bool
	// changed is closed and replaced at every event and at the end.
	changed chan struct{}
}

// NewHub returns an empty hub with the default retention.
func NewHub() *Hub {
	return &Hub{Retain: DefaultRetain, MaxRetained: DefaultMaxRetained,
		segments: map[string]*segment{}, next: map[string]chan struct{}{}}
}

// SegmentRecorder keeps the events of one segment beyond this process.
type SegmentRecorder interface {
	Add(ev workflow.Event)
	// End records the end of the segment once every event is recorded.
	End()
}

// Segment is the publishing side of one run segment.
type Segment struct {
	h   *Hub
	seg *segment
	rec SegmentRecorder
}

// BeginRun starts the first segment of a new run runID; events go out
// through Publish until End.
func (h *Hub) BeginRun(runID string) *Segment { return h.begin(runID, true) }

// Begin starts a new segment of run runID, which resumes; events go out
// through Publish until End.
func (h *Hub) Begin(runID string) *Segment { return h.begin(runID, false) }

func (h *Hub) begin(runID string, first bool) *Segment {
	var rec SegmentRecorder
	if h.Record != nil {
		rec = h.Record(runID, first)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	seg := &segment{runID: runID, seq: h.seq, changed: make(chan struct{})}
	h.segments[runID] = seg
	if ch, ok := h.next[runID]; ok {
		close(ch)
		delete(h.next, runID)
	}
	return &Segment{h: h, seg: seg, rec: rec}
}

// Publish adds an event to the segment.
func (s *Segment) Publish(ev workflow.Event) {
	if s.rec != nil {
		s.rec.Add(ev)
	}
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.seg.events = append(s.seg.events, ev)
	close(s.seg.changed)
	s.seg.changed = make(chan struct{})
}

// End closes the segment: followers get what is left and return. With a
// recorder, End returns once the recorder has the whole segment.
func (s *Segment) End() {
	if s.rec != nil {
		s.rec.End()
	}
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	s.seg.done = true
	close(s.seg.changed)
	s.seg.changed = make(chan struct{})
	h.ended = append(h.ended, s.seg)
	for len(h.ended) > h.MaxRetained {
		h.forget(h.ended[0])
		h.ended = h.ended[1:]
	}
	time.AfterFunc(h.Retain, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.forget(s.seg)
		for i, e := range h.ended {
			if e == s.seg {
				h.ended = append(h.ended[:i], h.ended[i+1:]...)
				break
			}
		}
	})
}

// forget drops seg unless a newer segment of its run replaced it.
func (h *Hub) forget(seg *segment) {
	if h.segments[seg.runID] == seg {
		delete(h.segments, seg.runID)
	}
}

// Follow calls fn with every event of the run's latest segment newer than
// after (a sequence number Follow returned before; 0 for any), those
// already published first, until the segment ends, ctx ends or fn fails.
// found is false when there is no such segment.
func (h *Hub) Follow(ctx context.Context, runID string, after int64, fn func(workflow.Event) error) (seq int64, found bool, err error) {
	h.mu.Lock()
	seg := h.segments[runID]
	h.mu.Unlock()
	if seg == nil || seg.seq <= after {
		return after, false, nil
	}
	sent := 0
	for {
		h.mu.Lock()
		pending := seg.events[sent:]
		done, changed := seg.done, seg.changed
		h.mu.Unlock()
		for _, ev := range pending {
			if err := fn(ev); err != nil {
				return seg.seq, true, err
			}
		}
		sent += len(pending)
		switch {
		case len(pending) > 0:
			continue
		case done:
			return seg.seq, true, nil
		}
		select {
		case <-ctx.Done():
			return seg.seq, true, ctx.Err()
		case <-changed:
		}
	}
}

// Next returns a channel closed when the run has a segment newer than
// after: at once if it has one already.
func (h *Hub) Next(runID string, after int64) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if seg := h.segments[runID]; seg != nil && seg.seq > after {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	ch, ok := h.next[runID]
	if !ok {
		ch = make(chan struct{})
		h.next[runID] = ch
	}
	return ch
}
