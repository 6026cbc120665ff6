package tools

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync/atomic"
	"unicode/utf8"
)

// MaxAnswerBytes bounds what a tool reads from outside the server in one
// answer: a scraped page, an OpenAPI schema or response, an MCP server's
// response. Reading stops there, so a huge answer costs no more memory
// than this.
const MaxAnswerBytes = 5 << 20

// MaxToolText bounds the text a tool that asks outside the server hands
// back (and so what a run stores of it); longer text is cut, with a note
// saying so.
const MaxToolText = 1 << 20

// ErrAnswerTooLarge is the error of an answer over MaxAnswerBytes.
var ErrAnswerTooLarge = fmt.Errorf("the answer is larger than %d bytes", MaxAnswerBytes)

// capText cuts s to at most MaxToolText bytes (on a character boundary)
// and says how much was left out.
func capText(s string) string {
	if len(s) <= MaxToolText {
		return s
	}
	cut := MaxToolText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[truncated: %d of %d bytes shown]", cut, len(s))
}

// capOutput applies MaxToolText to an output's text and to its
// structured part, whose encoding took jsonBytes: a structured answer
// longer than that is left out (a part of it would not be valid), and the
// text says so. The text, cut, still carries the answer's start.
func capOutput(out *Output, jsonBytes int) *Output {
	if out == nil {
		return out
	}
	out.Text = capText(out.Text)
	if len(out.JSON) > 0 && jsonBytes > MaxToolText {
		out.JSON = nil
		out.Text += fmt.Sprintf("\n[structured answer of %d bytes left out: more than %d]", jsonBytes, MaxToolText)
	}
	return out
}

// limitedBody fails a read once more than its limit has been read, and
// counts the failure in tripped (when not nil).
type limitedBody struct {
	io.ReadCloser
	left    int64
	tripped *atomic.Int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body at the limit from one over it.
		var one [1]byte
		if n, _ := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		if b.tripped != nil {
			b.tripped.Add(1)
		}
		return 0, ErrAnswerTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// eventLimitedBody is limitedBody for a stream of server-sent events,
// which may carry any number of answers (an SSE session's stream serves
// every call of the session): the limit holds for each event, the byte
// count starting again after the blank line that ends one.
type eventLimitedBody struct {
	io.ReadCloser
	limit   int64
	tripped *atomic.Int64
	// inEvent counts the bytes of the event being read; newline says the
	// last byte that was not a carriage return ended a line.
	inEvent int64
	newline bool
	failed  bool
}

func (b *eventLimitedBody) Read(p []byte) (int, error) {
	if b.failed {
		return 0, ErrAnswerTooLarge
	}
	n, err := b.ReadCloser.Read(p)
	for _, c := range p[:n] {
		switch {
		case c == '\n' && b.newline:
			// A blank line: the event is over.
			b.inEvent, b.newline = 0, false
			continue
		case c == '\n':
			b.newline = true
		case c != '\r':
			b.newline = false
		}
		b.inEvent++
		if b.inEvent > b.limit {
			b.failed = true
			if b.tripped != nil {
				b.tripped.Add(1)
			}
			return 0, ErrAnswerTooLarge
		}
	}
	return n, err
}

// limitAnswers wraps a transport so that no answer it gives may be longer
// than MaxAnswerBytes: a plain body as a whole, an event stream event by
// event. tripped (when not nil) counts the answers refused.
type limitAnswers struct {
	base    http.RoundTripper
	tripped *atomic.Int64
}

func (t limitAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil || res.Body == nil {
		return res, err
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "text/event-stream" {
		res.Body = &eventLimitedBody{ReadCloser: res.Body, limit: MaxAnswerBytes, tripped: t.tripped}
	} else {
		res.Body = &limitedBody{ReadCloser: res.Body, left: MaxAnswerBytes, tripped: t.tripped}
	}
	return res, err
}
