// Package docparse turns uploaded documents into plain text for indexing.
//
// It reads txt, md/markdown, html/htm, csv, json, pdf, docx and xlsx files
// with real parsers and returns their text and, where the format records one
// cheaply, a title. It touches no database and no network.
//
// Every entry point enforces Limits: the input size, the bytes a compressed
// format (docx and xlsx zip parts, pdf streams) may expand to, the size of
// the extracted text, how deeply elements nest, the cells of a workbook and
// the time spent on one document. Errors are *Error values that match one of
// ErrUnsupported, ErrCorrupt or ErrTooLarge with errors.Is, so that the HTTP
// layer can answer 415 unsupported_file_type, 400 or 413 file_too_large.
//
// What each format yields:
//
//   - txt, md, markdown: the text as it is. UTF-8 (with or without a byte
//     order mark) and UTF-16 with a byte order mark are decoded; any other
//     byte sequence that is not valid UTF-8 is read as Windows-1252. Text
//     containing NUL characters is refused as corrupt (it is binary). The
//     title of a Markdown file is its first level-one heading, or the
//     "title:" of a YAML front matter block.
//   - html, htm: the visible text. script, style, noscript, template, svg,
//     iframe, object, canvas and select elements and comments are dropped;
//     block elements (paragraphs, headings, list items, table rows, divs…)
//     start new lines, list items start with "- ", table cells in a row are
//     joined with " | ", whitespace is collapsed outside pre and textarea.
//     The character set comes from the byte order mark or the meta tags. The
//     title is the <title>, else the first <h1>.
//   - csv: see FormatRow. The delimiter is the one of , ; tab | that occurs
//     most often on the first line (comma on a tie).
//   - json: the values written as indented "key: value" lines, arrays as
//     "- item" lines, in document order (see the json.go comment). Several
//     concatenated JSON values (JSON Lines) are read one after another.
//   - pdf: the text of each page in page order, pages separated by a blank
//     line; see pdf.go for how lines and spaces are recovered. The title is
//     the document information dictionary's Title.
//   - docx: the paragraphs of the main document in order, each table row on
//     one line with its cells joined by " | ". Headers, footers, footnotes and
//     comments are not read. The title is the core properties' title, else
//     the first paragraph styled Title, else the first styled Heading1.
//   - xlsx: every sheet in workbook order, each row formatted as FormatRow
//     does with the first non-empty row of the sheet as the header; when the
//     workbook has more than one non-empty sheet each starts with a
//     "Sheet: NAME" line. Cell values are the formatted (displayed) values.
//     The title is the core properties' title.
//
// In every format line breaks are normalised to "\n", NUL characters are
// dropped, and leading and trailing blank space is trimmed. A document with
// no text (a scanned PDF, an empty sheet) yields an empty Text and no error.
package docparse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Document is the text of a parsed file.
type Document struct {
	// Text is the extracted plain text.
	Text string
	// Title is the document's own title when the format records one and it
	// is set, otherwise "".
	Title string
}

// The kinds of failure. An *Error matches exactly one of them with errors.Is.
var (
	// ErrUnsupported: the file type is not one this package reads (415).
	ErrUnsupported = errors.New("unsupported file type")
	// ErrCorrupt: the file does not parse as its type says (400).
	ErrCorrupt = errors.New("file cannot be read")
	// ErrTooLarge: the file, what it unpacks to, or its text exceeds Limits (413).
	ErrTooLarge = errors.New("file too large")
)

// Error describes why a file could not be parsed. Its message is written for
// the person who uploaded the file.
type Error struct {
	Kind   error  // ErrUnsupported, ErrCorrupt or ErrTooLarge
	Format string // the extension the file was read as, e.g. "pdf"; may be ""
	Detail string // what went wrong, in a few words
	Err    error  // the underlying error, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	switch e.Kind {
	case ErrUnsupported:
		if e.Format == "" {
			b.WriteString("files without an extension are not supported")
		} else {
			fmt.Fprintf(&b, "files of type .%s are not supported", e.Format)
		}
	case ErrTooLarge:
		b.WriteString("the file is too large")
	default:
		if e.Format != "" {
			fmt.Fprintf(&b, "the file cannot be read as %s", e.Format)
		} else {
			b.WriteString("the file cannot be read")
		}
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Is reports whether target is the kind of this error.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

func corrupt(format, detail string, err error) *Error {
	return &Error{Kind: ErrCorrupt, Format: format, Detail: detail, Err: err}
}

func tooLarge(format, detail string) *Error {
	return &Error{Kind: ErrTooLarge, Format: format, Detail: detail}
}

// Limits bounds the work one Parse call may do. A zero field takes its value
// from DefaultLimits.
type Limits struct {
	// MaxFileSize is the largest input accepted, in bytes.
	MaxFileSize int64
	// MaxUnpackedSize bounds what a compressed format may expand to, in
	// bytes: the declared sizes of all zip entries of a docx or xlsx file
	// together, and the decoded content and ToUnicode streams of a pdf.
	MaxUnpackedSize int64
	// MaxZipEntries bounds the number of entries of a docx or xlsx file.
	MaxZipEntries int
	// MaxTextSize bounds the extracted text, in bytes. It matters for csv and
	// xlsx (where a header is repeated on every row) and for inputs that
	// unpack to far more text than their size.
	MaxTextSize int64
	// MaxDepth bounds how deeply the elements of a docx or xlsx part, or the
	// values of a JSON document, may nest.
	MaxDepth int
	// MaxCells bounds the cells of all sheets of an xlsx file together,
	// counting the empty cells before the last cell of each row (a row with
	// one cell in column XFD counts 16,384).
	MaxCells int64
	// MaxDuration bounds the time one document may take to read. Parsers
	// check the clock as they go; a document that takes longer is refused
	// with ErrTooLarge.
	MaxDuration time.Duration

	deadline time.Time // set by Parse from MaxDuration
}

// DefaultLimits are the limits Parse uses. MaxFileSize is 15 MiB, the upload
// size Dify allows by default.
var DefaultLimits = Limits{
	MaxFileSize:     15 << 20,
	MaxUnpackedSize: 100 << 20,
	MaxZipEntries:   10000,
	MaxTextSize:     20 << 20,
	MaxDepth:        256,
	MaxCells:        4_000_000,
	MaxDuration:     60 * time.Second,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	orDefault(&l.MaxFileSize, d.MaxFileSize)
	orDefault(&l.MaxUnpackedSize, d.MaxUnpackedSize)
	orDefault(&l.MaxZipEntries, d.MaxZipEntries)
	orDefault(&l.MaxTextSize, d.MaxTextSize)
	orDefault(&l.MaxDepth, d.MaxDepth)
	orDefault(&l.MaxCells, d.MaxCells)
	orDefault(&l.MaxDuration, d.MaxDuration)
	return l
}

// orDefault sets *v to def when *v is zero or negative (not set).
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// parser reads one format from the whole file in memory.
type parser func(data []byte, lim Limits) (*Document, error)

// parsers maps each supported extension (lower case, no dot) to its parser.
var parsers = map[string]parser{
	"txt":      parseText,
	"md":       parseMarkdown,
	"markdown": parseMarkdown,
	"html":     parseHTML,
	"htm":      parseHTML,
	"csv":      parseCSV,
	"json":     parseJSON,
	"pdf":      parsePDF,
	"docx":     parseDOCX,
	"xlsx":     parseXLSX,
}

// Extensions returns the supported extensions, lower case, without dots,
// sorted.
func Extensions() []string {
	exts := make([]string, 0, len(parsers))
	for ext := range parsers {
		exts = append(exts, ext)
	}
	slices.Sort(exts)
	return exts
}

// Supported reports whether files with extension ext can be parsed. ext may
// have a leading dot and is compared without regard to case ("PDF", ".pdf").
func Supported(ext string) bool {
	_, ok := parsers[normExt(ext)]
	return ok
}

// Ext returns the extension of filename as Supported and Parse see it: lower
// case, without the dot ("Report.PDF" → "pdf"); "" when there is none.
func Ext(filename string) string {
	return normExt(filepath.Ext(filename))
}

func normExt(ext string) string {
	return strings.ToLower(strings.TrimPrefix(strings.TrimSpace(ext), "."))
}

// Parse reads a file named filename from r with DefaultLimits. The type is
// chosen by the extension of filename. size is the length of the file when
// known, or -1; a size over the limit is refused before anything is read.
func Parse(filename string, r io.Reader, size int64) (*Document, error) {
	return DefaultLimits.Parse(filename, r, size)
}

// Parse is the package-level Parse with these limits.
func (l Limits) Parse(filename string, r io.Reader, size int64) (*Document, error) {
	lim := l.withDefaults()
	ext := Ext(filename)
	p, ok := parsers[ext]
	if !ok {
		return nil, &Error{Kind: ErrUnsupported, Format: ext}
	}
	if size > lim.MaxFileSize {
		return nil, tooLarge(ext, fmt.Sprintf("the limit is %s", humanBytes(lim.MaxFileSize)))
	}
	data, err := io.ReadAll(io.LimitReader(r, lim.MaxFileSize+1))
	if err != nil {
		return nil, corrupt(ext, "reading it failed", err)
	}
	if int64(len(data)) > lim.MaxFileSize {
		return nil, tooLarge(ext, fmt.Sprintf("the limit is %s", humanBytes(lim.MaxFileSize)))
	}
	lim.deadline = time.Now().Add(lim.MaxDuration)
	return parseBytes(p, ext, data, lim)
}

// late reports whether the time for the document is up.
func (l Limits) late() bool {
	return !l.deadline.IsZero() && time.Now().After(l.deadline)
}

func tooSlow(format string, lim Limits) *Error {
	return tooLarge(format, "reading it takes longer than "+lim.MaxDuration.String())
}

func tooDeep(format string, lim Limits) *Error {
	return tooLarge(format, fmt.Sprintf("it nests more than %d levels deep", lim.MaxDepth))
}

// recoverPanics is switched off by fuzz tests of the parsers written here,
// so that a panic in them fails the test instead of becoming ErrCorrupt.
var recoverPanics = true

// parseBytes runs p, turning a panic inside a third-party parser into
// ErrCorrupt, and normalises the text.
func parseBytes(p parser, ext string, data []byte, lim Limits) (doc *Document, err error) {
	defer func() {
		if v := recover(); v != nil {
			if !recoverPanics {
				panic(v)
			}
			doc, err = nil, corrupt(ext, "the file is malformed", fmt.Errorf("panic: %v", v))
		}
	}()
	doc, err = p(data, lim)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Format == "" {
			e.Format = ext
		}
		return nil, err
	}
	doc.Text = finishText(doc.Text)
	doc.Title = oneLine(doc.Title)
	if int64(len(doc.Text)) > lim.MaxTextSize {
		return nil, tooLarge(ext, "its text exceeds "+humanBytes(lim.MaxTextSize))
	}
	return doc, nil
}

// finishText makes text valid UTF-8 with "\n" line breaks and no NULs, and
// trims blank space at both ends.
func finishText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.ContainsAny(s, "\r\x00") {
		s = strings.ReplaceAll(s, "\r\n", "\n")
		s = strings.ReplaceAll(s, "\r", "\n")
		s = strings.ReplaceAll(s, "\x00", "")
	}
	return strings.TrimSpace(s)
}

// oneLine collapses all white space of s into single spaces.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "")
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\x00", "")), " ")
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// textBuf builds extracted text up to a size limit. Once the limit is passed
// further writes are dropped and over is set; parsers check it and fail with
// ErrTooLarge. It tracks trailing newlines so that block breaks never pile up.
// Every few hundred writes it also looks at the clock, and stops (setting
// over and late) once the document's time is up.
type textBuf struct {
	b      bytes.Buffer
	max    int64
	over   bool
	late   bool
	lim    Limits
	writes int
}

func newTextBuf(max int64) *textBuf { return &textBuf{max: max} }

// buf returns a text buffer of at most max bytes that keeps the deadline of l.
func (l Limits) buf(max int64) *textBuf { return &textBuf{max: max, lim: l} }

func (t *textBuf) WriteString(s string) {
	if t.over || s == "" {
		return
	}
	t.writes++
	if t.writes&255 == 0 && t.lim.late() {
		t.over, t.late = true, true
		return
	}
	if int64(t.b.Len()+len(s)) > t.max {
		t.over = true
		return
	}
	t.b.WriteString(s)
}

func (t *textBuf) String() string { return t.b.String() }

func (t *textBuf) Len() int { return t.b.Len() }

// trailingNewlines counts the "\n" at the end, ignoring spaces and tabs.
func (t *textBuf) trailingNewlines() int {
	b := t.b.Bytes()
	n := 0
	for i := len(b) - 1; i >= 0; i-- {
		switch b[i] {
		case '\n':
			n++
		case ' ', '\t':
		default:
			return n
		}
	}
	if len(b) == 0 {
		return 2 // the start counts as a paragraph break
	}
	return n
}

// breakLines makes the text end with at least n newlines (1: a line break, 2:
// a blank line), dropping spaces and tabs before them.
func (t *textBuf) breakLines(n int) {
	have := t.trailingNewlines()
	if have >= n {
		return
	}
	b := t.b.Bytes()
	end := len(b)
	for end > 0 && (b[end-1] == ' ' || b[end-1] == '\t') {
		end--
	}
	t.b.Truncate(end)
	t.WriteString(strings.Repeat("\n", n-have))
}

// lastRune returns the last rune written, or '\n' at the start.
func (t *textBuf) lastRune() rune {
	b := t.b.Bytes()
	if len(b) == 0 {
		return '\n'
	}
	r, _ := utf8.DecodeLastRune(b)
	return r
}

// space writes one space unless the text is empty or already ends with white
// space.
func (t *textBuf) space() {
	switch t.lastRune() {
	case ' ', '\t', '\n':
		return
	}
	t.WriteString(" ")
}

func (t *textBuf) check(format string, lim Limits) error {
	if t.late {
		return tooSlow(format, lim)
	}
	if t.over {
		return tooLarge(format, "its text exceeds "+humanBytes(lim.MaxTextSize))
	}
	return nil
}
