package textsplit

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

func isSpace(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' }

// isHorizontalSpace reports white space other than line breaks.
func isHorizontalSpace(r rune) bool {
	return r != '\n' && unicode.IsSpace(r) || r == '\uFEFF'
}

var (
	// A Markdown image or link, keeping its text: ![alt](url) and
	// [text](url "title").
	markdownLinkRE = regexp.MustCompile(`!?\[([^\]\n]*)\]\(\s*<?[^)\s>]*>?(?:\s+(?:"[^"\n]*"|'[^'\n]*'))?\s*\)`)
	// A bare URL: a scheme and everything up to white space or a bracket or
	// quote, or a www. address.
	urlRE = regexp.MustCompile(`(?i)\b(?:https?|ftp)://[^\s<>"'\x60\[\]]+|\bwww\.[^\s<>"'\x60\[\]]+`)
	// An e-mail address.
	emailRE = regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+`)
)

// Clean prepares text for splitting. Always: the text becomes valid UTF-8
// (invalid bytes are dropped), "\r\n" and "\r" become "\n", form feeds and
// vertical tabs become "\n", and other control characters (except tab),
// byte order marks and the non-characters U+FFFE and U+FFFF are removed.
//
// With RemoveURLsEmails, Markdown links and images are replaced by their
// text ([text](url) → text), then bare URLs (http://, https://, ftp:// and
// www. addresses, without trailing punctuation) and e-mail addresses are
// deleted.
//
// With RemoveExtraSpaces, every run of two or more horizontal white-space
// characters (spaces, tabs, no-break and other Unicode spaces) becomes one
// space, white space at the end of a line is removed, and three or more
// consecutive line breaks (blank lines) become two.
//
// remove_stopwords changes nothing.
func (c Config) Clean(text string) string {
	text = normalize(text)
	if c.RemoveURLsEmails {
		text = removeURLsEmails(text)
	}
	if c.RemoveExtraSpaces {
		text = removeExtraSpaces(text)
	}
	return text
}

func normalize(text string) string {
	var b strings.Builder
	b.Grow(len(text))
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			// invalid byte: dropped
		case r == '\r':
			if i < len(text) && text[i] == '\n' {
				i++
			}
			b.WriteByte('\n')
		case r == '\f' || r == '\v':
			b.WriteByte('\n')
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7F || (r >= 0x80 && r < 0xA0), r == '\uFEFF', r == '\uFFFE', r == '\uFFFF':
			// control character or non-character: dropped
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func removeURLsEmails(text string) string {
	text = markdownLinkRE.ReplaceAllString(text, "$1")
	text = urlRE.ReplaceAllStringFunc(text, func(u string) string {
		// Punctuation that ends a sentence or closes a bracket is kept.
		trimmed := strings.TrimRight(u, ".,;:!?)}'\"")
		return u[len(trimmed):]
	})
	return emailRE.ReplaceAllString(text, "")
}

func removeExtraSpaces(text string) string {
	var b strings.Builder
	b.Grow(len(text))
	newlines := 0 // line breaks since the last other character
	run := 0      // horizontal spaces pending
	var pending rune
	for _, r := range text {
		switch {
		case r == '\n':
			run = 0 // spaces at the end of a line are dropped
			newlines++
			if newlines <= 2 {
				b.WriteByte('\n')
			}
		case isHorizontalSpace(r):
			if run == 0 {
				pending = r
			}
			run++
		default:
			if run == 1 {
				b.WriteRune(pending)
			} else if run > 1 {
				b.WriteByte(' ')
			}
			run, newlines = 0, 0
			b.WriteRune(r)
		}
	}
	return b.String()
}
