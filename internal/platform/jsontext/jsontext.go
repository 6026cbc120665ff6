// Package jsontext scans JSON text without decoding it.
package jsontext

// StringEnd returns the index just past the string literal that starts at
// s[i] (a '"'), a backslash escaping the byte after it, or len(s) when the
// literal never closes.
func StringEnd(s string, i int) int {
	esc := false
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case esc:
			esc = false
		case c == '\\':
			esc = true
		case c == '"':
			return j + 1
		}
	}
	return len(s)
}
