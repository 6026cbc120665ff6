package tools

import (
	"fmt"
	"strconv"
	"strings"
)

// pathStep is one step of a JSONPath: a key, an index or a wildcard.
type pathStep struct {
	key   string
	index int
	kind  byte // 'k' key, 'i' index, '*' wildcard
}

// parsePath reads the JSONPath subset the JSON tools accept: an optional
// $, then .name, ['name'], [n] (negative counts from the end) and the
// wildcards .* and [*]. Recursive descent, filters and slices are refused.
func parsePath(p string) ([]pathStep, error) {
	s := strings.TrimSpace(p)
	s = strings.TrimPrefix(s, "$")
	var steps []pathStep
	bad := func(why string) ([]pathStep, error) {
		return nil, fmt.Errorf("the JSONPath %q %s", p, why)
	}
	first := true
	for len(s) > 0 {
		switch {
		case strings.HasPrefix(s, ".."):
			return bad("uses recursive descent (..), which is not supported")
		case s[0] == '.' || (first && s[0] != '['):
			if s[0] == '.' {
				s = s[1:]
			}
			end := strings.IndexAny(s, ".[")
			if end < 0 {
				end = len(s)
			}
			name := strings.TrimSpace(s[:end])
			s = s[end:]
			if name == "" {
				return bad("has an empty name")
			}
			if name == "*" {
				steps = append(steps, pathStep{kind: '*'})
			} else {
				steps = append(steps, pathStep{kind: 'k', key: name})
			}
		case s[0] == '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return bad("has an unclosed [")
			}
			inner := strings.TrimSpace(s[1:end])
			s = s[end+1:]
			switch {
			case inner == "*":
				steps = append(steps, pathStep{kind: '*'})
			case len(inner) >= 2 && (inner[0] == '\'' || inner[0] == '"') && inner[len(inner)-1] == inner[0]:
				steps = append(steps, pathStep{kind: 'k', key: inner[1 : len(inner)-1]})
			default:
				n, err := strconv.Atoi(inner)
				if err != nil {
					return bad(fmt.Sprintf("has [%s], which is not an index, a quoted name or *", inner))
				}
				steps = append(steps, pathStep{kind: 'i', index: n})
			}
		default:
			return bad("cannot be read")
		}
		first = false
	}
	return steps, nil
}

// pathMatch is a value found by a path, with its place in its parent.
type pathMatch struct {
	parent any // *jobject or *jarray; nil for the root
	key    string
	index  int
	value  any
}

func (m pathMatch) set(v any) {
	switch p := m.parent.(type) {
	case *jobject:
		p.set(m.key, v)
	case *jarray:
		p.items[m.index] = v
	}
}

// findPath gives every value steps reach from root.
func findPath(root any, steps []pathStep) []pathMatch {
	cur := []pathMatch{{value: root}}
	for _, st := range steps {
		var next []pathMatch
		for _, m := range cur {
			switch x := m.value.(type) {
			case *jobject:
				switch st.kind {
				case 'k':
					if v, ok := x.vals[st.key]; ok {
						next = append(next, pathMatch{parent: x, key: st.key, value: v})
					}
				case '*':
					for _, k := range x.keys {
						next = append(next, pathMatch{parent: x, key: k, value: x.vals[k]})
					}
				}
			case *jarray:
				switch st.kind {
				case 'i':
					i := st.index
					if i < 0 {
						i += len(x.items)
					}
					if i >= 0 && i < len(x.items) {
						next = append(next, pathMatch{parent: x, index: i, value: x.items[i]})
					}
				case '*':
					for i, v := range x.items {
						next = append(next, pathMatch{parent: x, index: i, value: v})
					}
				}
			}
		}
		cur = next
	}
	return cur
}
