package tools

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// The tools of the Markdown exporter plugin (bowenliang123/md_exporter)
// that need nothing outside the server: Markdown to HTML, to a Markdown
// file and to a Word document.

var mdText = Param{Name: "md_text", Type: paramString, Required: true, LLM: true, Description: "The Markdown text."}
var mdFilename = Param{Name: "output_filename", Type: paramString, Description: "Name of the file, without extension; document when left out."}

// outputName is the file name of an export.
func outputName(args map[string]any, ext string) string {
	name := strings.TrimSpace(str(args, "output_filename"))
	if name == "" {
		name = "document"
	}
	name = strings.TrimSuffix(path.Base(name), ext)
	return name + ext
}

var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM))

// markdownHTML renders Markdown (with GitHub's tables, strikethrough and
// task lists) as HTML; raw HTML in the text is left out.
func markdownHTML(md string) (string, error) {
	var buf bytes.Buffer
	if err := markdown.Convert([]byte(md), &buf); err != nil {
		return "", fmt.Errorf("the Markdown cannot be read: %v", err)
	}
	return buf.String(), nil
}

var toolMdToHTML = &Tool{
	Provider: "md_exporter", Name: "md_to_html", Label: "Markdown to HTML",
	Description: "Turns Markdown into an HTML file.",
	Params:      []Param{mdText, mdFilename},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		body, err := markdownHTML(str(args, "md_text"))
		if err != nil {
			return nil, err
		}
		page := "<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"></head>\n<body>\n" + body + "</body>\n</html>\n"
		name := outputName(args, ".html")
		return &Output{Text: body, Files: []File{{Name: name, MimeType: "text/html", Data: []byte(page)}}}, nil
	},
}

var toolMdToMd = &Tool{
	Provider: "md_exporter", Name: "md_to_md", Label: "Markdown to file",
	Description: "Saves Markdown as a .md file.",
	Params:      []Param{mdText, mdFilename},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		name := outputName(args, ".md")
		return &Output{Text: name, Files: []File{{Name: name, MimeType: "text/markdown", Data: []byte(str(args, "md_text"))}}}, nil
	},
}

var toolMdToDocx = &Tool{
	Provider: "md_exporter", Name: "md_to_docx", Label: "Markdown to Word",
	Description: "Turns Markdown into a Word (.docx) document: headings, paragraphs, lists and code blocks; inline formatting is kept as plain text.",
	Params:      []Param{mdText, mdFilename},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		data, err := markdownDocx(str(args, "md_text"))
		if err != nil {
			return nil, err
		}
		name := outputName(args, ".docx")
		return &Output{Text: name, Files: []File{{Name: name, MimeType: "application/vnd.openxmlformats-officedocument.wordprocessingml.document", Data: data}}}, nil
	},
}

var (
	mdHeading = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	mdBullet  = regexp.MustCompile(`^\s*(?:[-*+]|\d+[.)])\s+(.*)$`)
	mdInline  = strings.NewReplacer("**", "", "__", "", "`", "", "~~", "")
	mdLink    = regexp.MustCompile(`!?\[([^\]]*)\]\(([^)]*)\)`)
)

// docxParagraph is one paragraph of the document: its style and text.
type docxParagraph struct{ style, text string }

// markdownDocx writes a minimal Word document of the Markdown's blocks.
func markdownDocx(md string) ([]byte, error) {
	var paras []docxParagraph
	var para []string
	flush := func() {
		if len(para) > 0 {
			paras = append(paras, docxParagraph{"", strings.Join(para, " ")})
			para = nil
		}
	}
	inCode := false
	for _, line := range strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			flush()
			inCode = !inCode
			continue
		}
		if inCode {
			paras = append(paras, docxParagraph{"Code", line})
			continue
		}
		trimmed := strings.TrimSpace(line)
		clean := func(s string) string { return mdInline.Replace(mdLink.ReplaceAllString(s, "$1")) }
		switch {
		case trimmed == "":
			flush()
		case mdHeading.MatchString(trimmed):
			flush()
			m := mdHeading.FindStringSubmatch(trimmed)
			paras = append(paras, docxParagraph{fmt.Sprintf("Heading%d", len(m[1])), clean(m[2])})
		case mdBullet.MatchString(line):
			flush()
			paras = append(paras, docxParagraph{"ListParagraph", "• " + clean(mdBullet.FindStringSubmatch(line)[1])})
		default:
			para = append(para, clean(trimmed))
		}
	}
	flush()

	var body bytes.Buffer
	for _, p := range paras {
		body.WriteString("<w:p>")
		if p.style != "" {
			fmt.Fprintf(&body, `<w:pPr><w:pStyle w:val="%s"/></w:pPr>`, p.style)
		}
		body.WriteString(`<w:r><w:t xml:space="preserve">`)
		xml.EscapeText(&body, []byte(p.text))
		body.WriteString("</w:t></w:r></w:p>")
	}
	var styles strings.Builder
	styles.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">`)
	sizes := []int{32, 28, 26, 24, 22, 22}
	for i, sz := range sizes {
		fmt.Fprintf(&styles, `<w:style w:type="paragraph" w:styleId="Heading%d"><w:name w:val="heading %d"/><w:pPr><w:keepNext/><w:spacing w:before="240" w:after="80"/></w:pPr><w:rPr><w:b/><w:sz w:val="%d"/></w:rPr></w:style>`, i+1, i+1, sz)
	}
	styles.WriteString(`<w:style w:type="paragraph" w:styleId="ListParagraph"><w:name w:val="List Paragraph"/><w:pPr><w:ind w:left="360"/></w:pPr></w:style>`)
	styles.WriteString(`<w:style w:type="paragraph" w:styleId="Code"><w:name w:val="Code"/><w:pPr><w:spacing w:after="0"/></w:pPr><w:rPr><w:rFonts w:ascii="Courier New" w:hAnsi="Courier New"/><w:sz w:val="20"/></w:rPr></w:style>`)
	styles.WriteString(`</w:styles>`)

	parts := []struct{ name, text string }{
		{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/><Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/></Types>`},
		{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`},
		{"word/_rels/document.xml.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/></Relationships>`},
		{"word/styles.xml", styles.String()},
		{"word/document.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` + body.String() + `</w:body></w:document>`},
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, p := range parts {
		w, err := zw.Create(p.name)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write([]byte(p.text)); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
