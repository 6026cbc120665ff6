package workflowruns

import (
	"crypto/sha256"
	"fmt"
	"unicode/utf8"
)

// Long texts travel from node to node: a tool's answer becomes the input
// of the next node, the outputs of the end node, and so on. Each node's
// record would hold its own copy, so one 1 MiB tool answer cost several
// MiB of rows. A run's records keep such a text whole only where it first
// appears; later records of the run hold a short preview that says where
// the whole text is. (The run's own outputs and a chatflow's answer are
// not records of nodes and stay whole: the API returns them.)
const (
	// shareAbove is the length from which a string is kept once per run.
	shareAbove = 4 << 10
	// previewBytes is how much of a repeated string a later record keeps.
	previewBytes = 256
)

// textKey identifies a long string by its content.
type textKey [sha256.Size]byte

// onceStore remembers the long strings a run's records already hold
// whole, and where.
type onceStore struct {
	where map[textKey]string
}

// shorten returns v with every long string that an earlier record (or an
// earlier part of this one) holds whole replaced by its preview, and
// remembers the long strings it keeps whole as held by place. v itself is
// never changed (the same maps go out in the run's events): what differs
// is copied. changed reports whether anything was replaced.
func (o *onceStore) shorten(v any, place string) (out any, changed bool) {
	switch x := v.(type) {
	case string:
		if len(x) < shareAbove {
			return x, false
		}
		key := textKey(sha256.Sum256([]byte(x)))
		if at, ok := o.where[key]; ok {
			return preview(x, at), true
		}
		if o.where == nil {
			o.where = map[textKey]string{}
		}
		o.where[key] = place
		return x, false
	case map[string]any:
		var cp map[string]any
		for k, e := range x {
			ne, ch := o.shorten(e, place)
			if !ch {
				continue
			}
			if cp == nil {
				cp = make(map[string]any, len(x))
				for k2, e2 := range x {
					cp[k2] = e2
				}
			}
			cp[k] = ne
		}
		if cp == nil {
			return x, false
		}
		return cp, true
	case []any:
		var cp []any
		for i, e := range x {
			ne, ch := o.shorten(e, place)
			if !ch {
				continue
			}
			if cp == nil {
				cp = append([]any(nil), x...)
			}
			cp[i] = ne
		}
		if cp == nil {
			return x, false
		}
		return cp, true
	}
	return v, false
}

// shortenMap is shorten for a record's part (nil stays nil).
func (o *onceStore) shortenMap(m map[string]any, place string) map[string]any {
	if m == nil {
		return nil
	}
	out, _ := o.shorten(m, place)
	return out.(map[string]any)
}

// preview is the start of s and a note of its length and where it is
// stored whole.
func preview(s, at string) string {
	cut := previewBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("…[%d bytes; the same text is stored whole in the %s]", len(s), at)
}
