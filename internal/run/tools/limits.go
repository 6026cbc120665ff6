package tools

import (
	"fmt"
	"io"
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
// sets tripped (when not nil).
type limitedBody struct {
	io.ReadCloser
	left    int64
	tripped *atomic.Bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body at the limit from one over it.
		var one [1]byte
		if n, _ := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		if b.tripped != nil {
			b.tripped.Store(true)
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

// limitAnswers wraps a transport so that no response body it gives may be
// longer than MaxAnswerBytes; tripped (when not nil) is set when one was.
type limitAnswers struct {
	base    http.RoundTripper
	tripped *atomic.Bool
}

func (t limitAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err == nil && res.Body != nil {
		res.Body = &limitedBody{ReadCloser: res.Body, left: MaxAnswerBytes, tripped: t.tripped}
	}
	return res, err
}
