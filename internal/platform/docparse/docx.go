package docparse

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// openZip opens an OOXML package and guards against zip bombs: it refuses
// more than lim.MaxZipEntries entries and a total declared uncompressed size
// over lim.MaxUnpackedSize. archive/zip fails a read that yields more bytes
// than the entry declares, so the declared total bounds what can be read.
func openZip(data []byte, format string, lim Limits) (*zip.Reader, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, corrupt(format, "it is not a valid "+format+" (zip) file", err)
	}
	if len(zr.File) > lim.MaxZipEntries {
		return nil, tooLarge(format, fmt.Sprintf("it has more than %d parts", lim.MaxZipEntries))
	}
	var total uint64
	for _, f := range zr.File {
		total += f.UncompressedSize64
		if total > uint64(lim.MaxUnpackedSize) || total < f.UncompressedSize64 {
			return nil, tooLarge(format, "it unpacks to more than "+humanBytes(lim.MaxUnpackedSize))
		}
	}
	return zr, nil
}

// zipFile returns the entry called name (compared without regard to case,
// as Office does), or nil.
func zipFile(zr *zip.Reader, name string) *zip.File {
	name = strings.TrimPrefix(name, "/")
	for _, f := range zr.File {
		if strings.EqualFold(f.Name, name) {
			return f
		}
	}
	return nil
}

// readZipFile reads an entry, never more than lim.MaxUnpackedSize bytes.
func readZipFile(f *zip.File, format string, lim Limits) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, corrupt(format, "", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, lim.MaxUnpackedSize+1))
	if err != nil {
		return nil, corrupt(format, "", err)
	}
	if int64(len(b)) > lim.MaxUnpackedSize {
		return nil, tooLarge(format, "it unpacks to more than "+humanBytes(lim.MaxUnpackedSize))
	}
	return b, nil
}

// Relationship types of the package relationships (_rels/.rels), in their
// transitional and strict spellings.
const (
	relOfficeDocument       = "/officeDocument"
	relCoreProperties       = "/metadata/core-properties"
	defaultDocxDocumentPart = "word/document.xml"
	defaultCorePart         = "docProps/core.xml"
)

// packageParts reads _rels/.rels and returns the main document part and the
// core properties part, falling back to the usual names.
func packageParts(zr *zip.Reader, format string, lim Limits, defaultMain string) (mainPart, corePart string) {
	mainPart, corePart = defaultMain, defaultCorePart
	f := zipFile(zr, "_rels/.rels")
	if f == nil {
		return
	}
	b, err := readZipFile(f, format, lim)
	if err != nil {
		return
	}
	var rels struct {
		Rel []struct {
			Type   string `xml:"Type,attr"`
			Target string `xml:"Target,attr"`
		} `xml:"Relationship"`
	}
	if xml.Unmarshal(b, &rels) != nil {
		return
	}
	for _, r := range rels.Rel {
		target := strings.TrimPrefix(path.Clean("/"+r.Target), "/")
		switch {
		case strings.HasSuffix(r.Type, relOfficeDocument):
			mainPart = target
		case strings.HasSuffix(r.Type, relCoreProperties):
			corePart = target
		}
	}
	return
}

// coreTitle returns dc:title from the core properties part, or "".
func coreTitle(zr *zip.Reader, part, format string, lim Limits) string {
	f := zipFile(zr, part)
	if f == nil {
		return ""
	}
	b, err := readZipFile(f, format, lim)
	if err != nil {
		return ""
	}
	var core struct {
		Title string `xml:"title"`
	}
	if xml.Unmarshal(b, &core) != nil {
		return ""
	}
	return core.Title
}

func parseDOCX(data []byte, lim Limits) (*Document, error) {
	zr, err := openZip(data, "docx", lim)
	if err != nil {
		return nil, err
	}
	mainPart, corePart := packageParts(zr, "docx", lim, defaultDocxDocumentPart)
	f := zipFile(zr, mainPart)
	if f == nil {
		return nil, corrupt("docx", "it has no main document part", nil)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, corrupt("docx", "", err)
	}
	defer rc.Close()
	w := &docxWriter{out: lim.buf(lim.MaxTextSize), lim: lim}
	if err := w.read(io.LimitReader(rc, lim.MaxUnpackedSize)); err != nil {
		if w.out.late {
			return nil, tooSlow("docx", lim)
		}
		return nil, err
	}
	if err := w.out.check("docx", lim); err != nil {
		return nil, err
	}
	title := coreTitle(zr, corePart, "docx", lim)
	if strings.TrimSpace(title) == "" {
		title = w.styledTitle
	}
	if strings.TrimSpace(title) == "" {
		title = w.heading
	}
	return &Document{Text: w.out.String(), Title: title}, nil
}

// docxWriter turns WordprocessingML into text. Text is collected in a stack
// of buffers: one per open paragraph and per open table cell, with the
// document at the bottom. A paragraph's text goes to the buffer below it
// followed by a line break (a blank line at the document level); a cell's text (its paragraphs joined by spaces)
// becomes one cell of the current row; a row is written as its cells joined
// by " | ". Text boxes nest paragraphs inside paragraphs, which this handles
// the same way.
type docxWriter struct {
	out    *textBuf
	lim    Limits
	depth  int // elements open around the current token
	tokens int // start elements read
	stack  []*docxBlock
	rows   [][]string // the cells of the open table rows, innermost last

	styledTitle, heading string
}

type docxBlock struct {
	cell  bool
	style string
	b     strings.Builder
}

func (w *docxWriter) write(s string) {
	if len(w.stack) == 0 {
		w.out.WriteString(s)
		return
	}
	top := w.stack[len(w.stack)-1]
	if int64(top.b.Len()+len(s)) > w.out.max {
		w.out.over = true
		return
	}
	top.b.WriteString(s)
}

func (w *docxWriter) read(r io.Reader) error {
	dec := xml.NewDecoder(r)
	inText := 0 // depth of w:t elements around the character data
	for !w.out.over {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return corrupt("docx", "its document part is not valid XML", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			// Nesting is bounded, so that moving text from a paragraph to
			// the one around it stays linear in the size of the text.
			if w.depth++; w.depth > w.lim.MaxDepth {
				return tooDeep("docx", w.lim)
			}
			if w.tokens++; w.tokens&1023 == 0 && w.lim.late() {
				w.out.late = true
				return tooSlow("docx", w.lim)
			}
			switch t.Name.Local {
			case "Fallback": // mc:Fallback repeats what mc:Choice holds
				if err := dec.Skip(); err != nil {
					return corrupt("docx", "its document part is not valid XML", err)
				}
				w.depth--
			case "p":
				w.stack = append(w.stack, &docxBlock{})
			case "pStyle":
				if len(w.stack) > 0 {
					w.stack[len(w.stack)-1].style = attr(t, "val")
				}
			case "tc":
				w.stack = append(w.stack, &docxBlock{cell: true})
			case "tr":
				w.rows = append(w.rows, nil)
			case "t":
				inText++
			case "tab":
				w.write("\t")
			case "br", "cr":
				w.write("\n")
			case "noBreakHyphen":
				w.write("-")
			}
		case xml.EndElement:
			w.depth--
			switch t.Name.Local {
			case "p":
				w.endParagraph()
			case "tc":
				w.endCell()
			case "tr":
				w.endRow()
			case "tbl":
				w.write("\n")
			case "t":
				inText = max(inText-1, 0)
			}
		case xml.CharData:
			if inText > 0 {
				w.write(string(t))
			}
		}
	}
	return nil
}

// pop removes the top block if it has the wanted kind.
func (w *docxWriter) pop(cell bool) *docxBlock {
	if len(w.stack) == 0 || w.stack[len(w.stack)-1].cell != cell {
		return nil
	}
	top := w.stack[len(w.stack)-1]
	w.stack = w.stack[:len(w.stack)-1]
	return top
}

func (w *docxWriter) endParagraph() {
	p := w.pop(false)
	if p == nil {
		return
	}
	text := p.b.String()
	if t := oneLine(text); t != "" {
		style := strings.ToLower(p.style)
		switch {
		case style == "title" && w.styledTitle == "":
			w.styledTitle = t
		case (style == "heading1" || style == "heading 1") && w.heading == "":
			w.heading = t
		}
	}
	w.write(text)
	if len(w.stack) == 0 {
		w.write("\n\n") // document paragraphs are set off by a blank line
	} else {
		w.write("\n")
	}
}

func (w *docxWriter) endCell() {
	c := w.pop(true)
	if c == nil || len(w.rows) == 0 {
		return
	}
	w.rows[len(w.rows)-1] = append(w.rows[len(w.rows)-1], oneLine(c.b.String()))
}

func (w *docxWriter) endRow() {
	if len(w.rows) == 0 {
		return
	}
	cells := w.rows[len(w.rows)-1]
	w.rows = w.rows[:len(w.rows)-1]
	if isEmptyRow(cells) {
		return
	}
	w.write(strings.Join(cells, " | "))
	w.write("\n")
}

func attr(t xml.StartElement, local string) string {
	for _, a := range t.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}
