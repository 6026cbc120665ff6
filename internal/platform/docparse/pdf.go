package docparse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/ledongthuc/pdf"
)

const (
	// maxPDFPages bounds the pages read from one file.
	maxPDFPages = 5000
	// maxPDFTreeNodes and maxPDFTreeDepth bound the walk of the page tree, so
	// that a tree whose kids refer back to their ancestors ends.
	maxPDFTreeNodes = 50000
	maxPDFTreeDepth = 64
	// pdfWordGap is the backward move inside a TJ array, in thousandths of a
	// text space unit (about an em), that is read as the space between words.
	pdfWordGap = 200
)

// parsePDF extracts the text of a PDF with github.com/ledongthuc/pdf, which
// parses the file structure, decodes streams and maps font codes to Unicode
// (standard encodings, Differences arrays and ToUnicode maps).
//
// The content stream of each page is read in order. Text shown with Tj, TJ,
// ' and " is written out; a change of the text line (T*, ' and ", or a Td,
// TD or Tm that moves vertically) starts a new line; a horizontal move
// between two pieces of text on the same line, the end of a text object, and
// a TJ adjustment of more than pdfWordGap write a space. Pages are separated
// by a blank line. Text drawn by form XObjects and annotations is not read,
// and neither is text in images (scanned pages give no text).
//
// Before any page is interpreted the decoded size of its content streams and
// of its fonts' ToUnicode maps is counted against lim.MaxUnpackedSize. A page
// whose content cannot be decoded is skipped; when no page can be, the file
// is corrupt.
func parsePDF(data []byte, lim Limits) (*Document, error) {
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		if errors.Is(err, pdf.ErrInvalidPassword) {
			return nil, corrupt("pdf", "it is protected by a password", err)
		}
		return nil, corrupt("pdf", "", err)
	}
	pages := pdfPages(r.Trailer().Key("Root").Key("Pages"))

	budget := lim.MaxUnpackedSize
	for _, p := range pages {
		if err := p.measure(&budget); err != nil {
			return nil, err
		}
	}

	out := lim.buf(lim.MaxTextSize)
	failed := 0
	var firstErr error
	for i, p := range pages {
		if !out.over && lim.late() {
			out.over, out.late = true, true
		}
		if out.over {
			break
		}
		if i > 0 {
			out.breakLines(2)
		}
		if err := extractPDFPage(p, out); err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	if err := out.check("pdf", lim); err != nil {
		return nil, err
	}
	if failed > 0 && failed == len(pages) {
		return nil, corrupt("pdf", "no page could be read", firstErr)
	}
	title := pdfTitle(r)
	return &Document{Text: out.String(), Title: title}, nil
}

func pdfTitle(r *pdf.Reader) (title string) {
	defer func() {
		if recover() != nil {
			title = ""
		}
	}()
	return r.Trailer().Key("Info").Key("Title").Text()
}

// pdfPage is a leaf of the page tree with the resources it inherits.
type pdfPage struct {
	v   pdf.Value
	res pdf.Value
}

// pdfPages walks the page tree depth first, in order, passing inherited
// resources down. It stops at maxPDFPages pages, maxPDFTreeNodes nodes or
// maxPDFTreeDepth levels.
func pdfPages(root pdf.Value) []pdfPage {
	type node struct {
		v     pdf.Value
		res   pdf.Value
		depth int
	}
	var pages []pdfPage
	stack := []node{{v: root}}
	for visited := 0; len(stack) > 0 && len(pages) < maxPDFPages && visited < maxPDFTreeNodes; visited++ {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.v.Kind() != pdf.Dict {
			continue
		}
		res := n.v.Key("Resources")
		if res.Kind() != pdf.Dict {
			res = n.res
		}
		kids := n.v.Key("Kids")
		if n.v.Key("Type").Name() != "Page" && kids.Kind() == pdf.Array {
			if n.depth >= maxPDFTreeDepth {
				continue
			}
			for i := kids.Len() - 1; i >= 0; i-- {
				stack = append(stack, node{v: kids.Index(i), res: res, depth: n.depth + 1})
			}
			continue
		}
		pages = append(pages, pdfPage{v: n.v, res: res})
	}
	return pages
}

// measure subtracts from budget the decoded size of the page's content
// streams and of its fonts' ToUnicode maps, and fails with ErrTooLarge when
// the budget runs out. Streams that cannot be decoded are left for the
// extraction to report.
func (p pdfPage) measure(budget *int64) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = nil // the extraction meets the same problem and skips the page
		}
	}()
	if err := streamSize(p.v.Key("Contents"), budget); err != nil {
		return err
	}
	fonts := p.res.Key("Font")
	for _, name := range fonts.Keys() {
		if err := streamSize(fonts.Key(name).Key("ToUnicode"), budget); err != nil {
			return err
		}
	}
	return nil
}

func streamSize(v pdf.Value, budget *int64) error {
	if v.Kind() == pdf.Array {
		for i := 0; i < v.Len(); i++ {
			if err := streamSize(v.Index(i), budget); err != nil {
				return err
			}
		}
		return nil
	}
	if v.Kind() != pdf.Stream {
		return nil
	}
	rc := v.Reader()
	defer rc.Close()
	n, _ := io.Copy(io.Discard, io.LimitReader(rc, *budget+1))
	*budget -= n
	if *budget < 0 {
		return tooLarge("pdf", "its streams unpack to more than the limit")
	}
	return nil
}

// rawEncoding passes font codes through unchanged, for text whose font is
// unknown; invalid UTF-8 is repaired when the text is finished.
type rawEncoding struct{}

func (rawEncoding) Decode(raw string) string { return raw }

// extractPDFPage writes the text of one page to out.
func extractPDFPage(p pdfPage, out *textBuf) (err error) {
	contents := p.v.Key("Contents")
	if contents.Kind() != pdf.Stream && contents.Kind() != pdf.Array {
		return nil
	}
	// Text goes to a page buffer first so that a page that fails half way
	// leaves nothing behind.
	page := out.lim.buf(out.max - int64(out.Len()))
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("page content: %v", v)
			return
		}
		out.WriteString(page.String())
		if page.over {
			out.over = true
		}
	}()

	st := newPDFTextState(p.res.Key("Font"), page)
	pdf.Interpret(contents, func(stk *pdf.Stack, op string) {
		args := make([]pdf.Value, stk.Len())
		for i := len(args) - 1; i >= 0; i-- {
			args[i] = stk.Pop()
		}
		if page.over {
			return
		}
		st.apply(op, args)
	})
	return nil
}

// pdfFont is what the text extractor knows of one page font: how its codes
// decode and, when the font says, how wide its glyphs are.
type pdfFont struct {
	enc     pdf.TextEncoding
	metrics pdfMetrics
}

// pdfTextState follows the text operators of one page's content stream and
// writes what they show to page, with the line breaks and spaces their
// positions imply.
type pdfTextState struct {
	page     *textBuf
	fontDict pdf.Value
	fonts    map[string]pdfFont

	cur       pdfFont
	curY      float64
	lineY     float64
	hasText   bool // text was shown on this page
	newLine   bool // a line change is pending
	moved     bool // a horizontal move is pending
	textEnded bool // a text object ended since the last text
	// The horizontal text position in user space (before cm): the start of
	// the current line, where the next glyph goes, and where the last text
	// shown ended (endOK: that end is known).
	tmScale, lineX, curX, endX float64
	endOK                      bool
	size, charSpace, wordSpace float64
	hScale                     float64
}

func newPDFTextState(fontDict pdf.Value, page *textBuf) *pdfTextState {
	return &pdfTextState{
		page:     page,
		fontDict: fontDict,
		fonts:    map[string]pdfFont{},
		cur:      pdfFont{enc: rawEncoding{}},
		tmScale:  1,
		hScale:   1,
	}
}

// fontOf returns the named page font, reading it on first use.
func (s *pdfTextState) fontOf(name string) pdfFont {
	if f, ok := s.fonts[name]; ok {
		return f
	}
	f := pdfFont{fontEncoding(s.fontDict.Key(name)), pdfFontMetrics(s.fontDict.Key(name))}
	s.fonts[name] = f
	return f
}

// show writes one shown string, preceded by a line break or a space when
// the text position moved enough since the previous one.
func (s *pdfTextState) show(v pdf.Value) {
	if v.Kind() != pdf.String {
		return
	}
	raw := v.RawString()
	text := ligatures.Replace(s.cur.enc.Decode(raw))
	if text == "" {
		return
	}
	if s.hasText {
		switch {
		case s.newLine || math.Abs(s.curY-s.lineY) > 0.5:
			s.page.breakLines(1)
		case s.endOK && s.cur.metrics.hasWidth && s.size > 0:
			// The positions are known: a word gap is a move of more than
			// about a fifth of an em past the previous glyph.
			if s.curX-s.endX > 0.2*s.size*math.Abs(s.tmScale) {
				s.page.space()
			}
		case s.moved || s.textEnded:
			s.page.space()
		}
	}
	s.page.WriteString(text)
	s.hasText, s.newLine, s.moved, s.textEnded = true, false, false, false
	s.lineY = s.curY
	if s.cur.metrics.hasWidth {
		s.curX += s.cur.metrics.advance(raw, s.size, s.charSpace, s.wordSpace, s.hScale) * s.tmScale
		s.endX, s.endOK = s.curX, true
	} else {
		s.endOK = false
	}
}

// apply carries out one content-stream operator; operators that do not
// affect text, and ones with the wrong number of operands, are ignored.
func (s *pdfTextState) apply(op string, args []pdf.Value) {
	switch op {
	case "Tf":
		if len(args) == 2 {
			s.cur = s.fontOf(args[0].Name())
			s.size = args[1].Float64()
		}
	case "Tc":
		if len(args) == 1 {
			s.charSpace = args[0].Float64()
		}
	case "Tw":
		if len(args) == 1 {
			s.wordSpace = args[0].Float64()
		}
	case "Tz":
		if len(args) == 1 {
			s.hScale = args[0].Float64() / 100
		}
	case "BT":
		s.curY = 0
		s.tmScale, s.lineX, s.curX = 1, 0, 0
	case "ET":
		s.textEnded = true
	case "Td", "TD":
		if len(args) == 2 {
			tx, ty := args[0].Float64(), args[1].Float64()
			s.curY += ty
			if tx != 0 {
				s.moved = true
			}
			s.lineX += tx * s.tmScale
			s.curX = s.lineX
		}
	case "Tm":
		if len(args) == 6 {
			s.curY = args[5].Float64()
			s.moved = true
			s.tmScale = args[0].Float64()
			if s.tmScale == 0 {
				s.tmScale = 1
			}
			s.lineX, s.curX = args[4].Float64(), args[4].Float64()
		}
	case "T*":
		s.newLine = true
		s.curX = s.lineX
	case "Tj":
		if len(args) == 1 {
			s.show(args[0])
		}
	case "'":
		if len(args) == 1 {
			s.newLine, s.curX = true, s.lineX
			s.show(args[0])
		}
	case "\"":
		if len(args) == 3 {
			s.newLine, s.curX = true, s.lineX
			s.wordSpace, s.charSpace = args[0].Float64(), args[1].Float64()
			s.show(args[2])
		}
	case "TJ":
		if len(args) == 1 && args[0].Kind() == pdf.Array {
			s.showArray(args[0])
		}
	}
}

// showArray carries out TJ: strings are shown, numbers move the position
// back (a large enough move counts as a word gap).
func (s *pdfTextState) showArray(a pdf.Value) {
	for i := 0; i < a.Len(); i++ {
		x := a.Index(i)
		switch x.Kind() {
		case pdf.String:
			s.show(x)
		case pdf.Integer, pdf.Real:
			if -x.Float64() > pdfWordGap && s.hasText {
				s.moved = true
			}
			s.curX -= x.Float64() / 1000 * s.size * s.hScale * s.tmScale
		}
	}
}

// fontEncoding returns how the codes of font f map to text, or rawEncoding
// when the font cannot be read.
func fontEncoding(f pdf.Value) (enc pdf.TextEncoding) {
	defer func() {
		if recover() != nil || enc == nil {
			enc = rawEncoding{}
		}
	}()
	if f.Kind() != pdf.Dict {
		return rawEncoding{}
	}
	font := pdf.Font{V: f}
	return font.Encoder()
}
