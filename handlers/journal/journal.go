// Package journal keeps the last requests the server answered, so that a
// client's test can check what it sent (GET /admin/v1/requests).
package journal

import (
	"strings"
	"sync"
	"time"
)

// Entry is one answered request. It holds no body and no key, only the
// key's id.
type Entry struct {
	Seq        int64     `json:"seq"`
	Time       time.Time `json:"time"`
	Method     string    `json:"method"`
	Path       string    `json:"path"`
	Route      string    `json:"route"`
	Status     int       `json:"status"`
	KeyID      string    `json:"key_id,omitempty"`
	BodyBytes  int64     `json:"body_bytes"`
	DurationMS float64   `json:"duration_ms"`
	// Fault is the X-Appkb-Fault header the request carried, if any.
	Fault string `json:"fault,omitempty"`
}

// Filter picks entries; zero fields match everything.
type Filter struct {
	Method string
	// Route matches the route pattern (/v1/chat-messages) or the path.
	Route  string
	Status int
	KeyID  string
	// Limit is the most entries answered, the newest; 0 means all.
	Limit int
}

// Journal is a ring of the last entries. It is safe for concurrent use.
type Journal struct {
	mu   sync.Mutex
	ring []Entry
	next int // where the next entry goes
	full bool
	seq  int64
}

// New keeps the last size entries (at least 1).
func New(size int) *Journal {
	if size < 1 {
		size = 1
	}
	return &Journal{ring: make([]Entry, size)}
}

// Add records one request.
func (j *Journal) Add(e Entry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	e.Seq = j.seq
	j.ring[j.next] = e
	j.next = (j.next + 1) % len(j.ring)
	if j.next == 0 {
		j.full = true
	}
}

// List answers the matching entries, oldest first.
func (j *Journal) List(f Filter) []Entry {
	j.mu.Lock()
	var all []Entry
	if j.full {
		all = append(all, j.ring[j.next:]...)
	}
	all = append(all, j.ring[:j.next]...)
	j.mu.Unlock()
	out := make([]Entry, 0, len(all))
	for _, e := range all {
		if f.matches(e) {
			out = append(out, e)
		}
	}
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[len(out)-f.Limit:]
	}
	return out
}

// Clear forgets every entry; numbering goes on.
func (j *Journal) Clear() {
	j.mu.Lock()
	defer j.mu.Unlock()
	clear(j.ring)
	j.next, j.full = 0, false
}

func (f Filter) matches(e Entry) bool {
	switch {
	case f.Method != "" && !strings.EqualFold(f.Method, e.Method):
		return false
	case f.Route != "" && f.Route != e.Route && f.Route != e.Path:
		return false
	case f.Status != 0 && f.Status != e.Status:
		return false
	case f.KeyID != "" && f.KeyID != e.KeyID:
		return false
	}
	return true
}
