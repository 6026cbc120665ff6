package docparse

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// htmlSkip are elements whose content is never visible text.
var htmlSkip = map[atom.Atom]bool{
	atom.Head: true, atom.Script: true, atom.Style: true, atom.Noscript: true,
	atom.Template: true, atom.Svg: true, atom.Iframe: true, atom.Object: true,
	atom.Canvas: true, atom.Select: true, atom.Datalist: true,
}

// htmlParagraph are block elements set off by a blank line.
var htmlParagraph = map[atom.Atom]bool{
	atom.P: true, atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true,
	atom.H5: true, atom.H6: true, atom.Pre: true, atom.Blockquote: true,
	atom.Table: true, atom.Ul: true, atom.Ol: true, atom.Dl: true,
	atom.Figure: true, atom.Hr: true, atom.Section: true, atom.Article: true,
	atom.Header: true, atom.Footer: true, atom.Aside: true, atom.Nav: true,
	atom.Main: true, atom.Form: true, atom.Fieldset: true, atom.Details: true,
	atom.Address: true,
}

// htmlLine are block elements that start and end a line.
var htmlLine = map[atom.Atom]bool{
	atom.Div: true, atom.Li: true, atom.Tr: true, atom.Dt: true, atom.Dd: true,
	atom.Caption: true, atom.Figcaption: true, atom.Summary: true,
	atom.Legend: true, atom.Thead: true, atom.Tbody: true, atom.Tfoot: true,
	atom.Body: true, atom.Textarea: true,
}

func parseHTML(data []byte, lim Limits) (*Document, error) {
	if bytes.IndexByte(data, 0) >= 0 && !bytes.HasPrefix(data, []byte{0xFF, 0xFE}) && !bytes.HasPrefix(data, []byte{0xFE, 0xFF}) {
		return nil, corrupt("html", "it contains binary data", nil)
	}
	enc, _, _ := charset.DetermineEncoding(data, "text/html")
	decoded, err := enc.NewDecoder().Bytes(data)
	if err != nil {
		decoded = data
	}
	root, err := html.Parse(bytes.NewReader(decoded))
	if err != nil {
		return nil, corrupt("html", "", err)
	}
	w := &htmlWriter{out: lim.buf(lim.MaxTextSize)}
	w.walk(root)
	if err := w.out.check("html", lim); err != nil {
		return nil, err
	}
	title := ""
	if n := firstElement(root, atom.Title); n != nil {
		title = nodeText(n)
	}
	if title == "" {
		if n := firstElement(root, atom.H1); n != nil {
			title = nodeText(n)
		}
	}
	return &Document{Text: w.out.String(), Title: title}, nil
}

// firstElement returns the first element of type a in document order.
func firstElement(root *html.Node, a atom.Atom) *html.Node {
	n := root
	for n != nil {
		if n.Type == html.ElementNode && n.DataAtom == a {
			return n
		}
		if n.FirstChild != nil {
			n = n.FirstChild
			continue
		}
		for n != nil && n != root && n.NextSibling == nil {
			n = n.Parent
		}
		if n == nil || n == root {
			return nil
		}
		n = n.NextSibling
	}
	return nil
}

type htmlWriter struct {
	out *textBuf
	pre int // depth of pre/textarea/listing elements around the text
}

// walk visits the tree in document order without recursion, so that deep
// nesting cannot exhaust the stack.
func (w *htmlWriter) walk(root *html.Node) {
	n := root
	for n != nil && !w.out.over {
		descend := w.enter(n)
		if descend && n.FirstChild != nil {
			n = n.FirstChild
			continue
		}
		for n != nil {
			w.leave(n, descend)
			descend = true // ancestors were entered
			if n == root {
				n = nil
				break
			}
			if n.NextSibling != nil {
				n = n.NextSibling
				break
			}
			n = n.Parent
		}
	}
}

// enter handles the start of n and reports whether its children are read.
func (w *htmlWriter) enter(n *html.Node) bool {
	switch n.Type {
	case html.TextNode:
		w.text(n.Data)
		return false
	case html.ElementNode:
	default:
		return n.Type == html.DocumentNode
	}
	if htmlSkip[n.DataAtom] {
		return false
	}
	switch {
	case n.DataAtom == atom.Br:
		w.out.breakLines(1)
	case htmlParagraph[n.DataAtom]:
		w.out.breakLines(2)
	case htmlLine[n.DataAtom]:
		w.out.breakLines(1)
	case n.DataAtom == atom.Td || n.DataAtom == atom.Th:
		if w.out.trailingNewlines() == 0 {
			w.out.WriteString(" | ")
		}
	}
	if n.DataAtom == atom.Li {
		w.out.WriteString("- ")
	}
	if n.DataAtom == atom.Pre || n.DataAtom == atom.Textarea || n.DataAtom == atom.Listing {
		w.pre++
	}
	return true
}

// leave handles the end of n; entered is false when its children were skipped.
func (w *htmlWriter) leave(n *html.Node, entered bool) {
	if n.Type != html.ElementNode || !entered {
		return
	}
	switch {
	case htmlParagraph[n.DataAtom]:
		w.out.breakLines(2)
	case htmlLine[n.DataAtom]:
		w.out.breakLines(1)
	}
	if n.DataAtom == atom.Pre || n.DataAtom == atom.Textarea || n.DataAtom == atom.Listing {
		w.pre--
	}
}

func (w *htmlWriter) text(s string) {
	if w.pre > 0 {
		w.out.WriteString(s)
		return
	}
	if s == "" {
		return
	}
	fields := strings.Fields(s)
	if len(fields) == 0 {
		w.out.space()
		return
	}
	if isHTMLSpace(s[0]) {
		w.out.space()
	}
	w.out.WriteString(strings.Join(fields, " "))
	if isHTMLSpace(s[len(s)-1]) {
		w.out.space()
	}
}

func isHTMLSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
}

// nodeText returns the text inside n on one line.
func nodeText(n *html.Node) string {
	var b strings.Builder
	var visit func(*html.Node, int)
	visit = func(n *html.Node, depth int) {
		if depth > 64 || b.Len() > 1000 {
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			switch c.Type {
			case html.TextNode:
				b.WriteString(c.Data)
				b.WriteByte(' ')
			case html.ElementNode:
				if !htmlSkip[c.DataAtom] {
					visit(c, depth+1)
				}
			}
		}
	}
	visit(n, 0)
	return oneLine(b.String())
}
