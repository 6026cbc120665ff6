package docparse

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzLimits keep each fuzz input cheap.
var fuzzLimits = Limits{MaxFileSize: 1 << 20, MaxUnpackedSize: 4 << 20, MaxZipEntries: 200, MaxTextSize: 1 << 20, MaxCells: 100_000}

// fuzzParse feeds data to the parser for ext and checks what any input must
// give: either a document with normalised text within the limit, or an
// *Error of one of the three kinds (never ErrUnsupported for a supported
// extension).
func fuzzParse(f *testing.F, ext string, ownCode bool, seeds ...[]byte) {
	matches, _ := filepath.Glob(filepath.Join("testdata", "*."+ext))
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if ownCode {
			recoverPanics = false
			defer func() { recoverPanics = true }()
		}
		doc, err := fuzzLimits.Parse("fuzz."+ext, bytes.NewReader(data), int64(len(data)))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not an *Error: %v", err, err)
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected kind: %v", err)
			}
			if doc != nil {
				t.Fatal("document returned with an error")
			}
			return
		}
		if doc == nil {
			t.Fatal("nil document without error")
		}
		if !utf8.ValidString(doc.Text) || !utf8.ValidString(doc.Title) {
			t.Fatal("invalid UTF-8")
		}
		if strings.ContainsAny(doc.Text, "\r\x00") {
			t.Fatalf("text keeps CR or NUL: %q", doc.Text)
		}
		if doc.Text != strings.TrimSpace(doc.Text) {
			t.Fatalf("text not trimmed: %q", doc.Text)
		}
		if strings.ContainsAny(doc.Title, "\n\t\r") || doc.Title != strings.TrimSpace(doc.Title) {
			t.Fatalf("title not on one line: %q", doc.Title)
		}
		if int64(len(doc.Text)) > fuzzLimits.MaxTextSize {
			t.Fatalf("text of %d bytes passes the limit", len(doc.Text))
		}
	})
}

func FuzzParseTXT(f *testing.F) {
	fuzzParse(f, "txt", true, bytes.Repeat([]byte("a"), 1<<20), []byte("\xff\xfeA\x00"), []byte("\xfe\xff\x00A\xd8\x00"), []byte("\x93\x94\x00"))
}

func FuzzParseMarkdown(f *testing.F) {
	fuzzParse(f, "md", true, []byte("---\ntitle: x\n---\n"), []byte("a\n==\n"), []byte("```\n# no\n```\n# yes"))
}

func FuzzParseHTML(f *testing.F) {
	fuzzParse(f, "html", true, []byte("<table><tr><td>a<td>b<tr><td>c</table>"),
		[]byte("<meta charset=\"windows-1252\"><p>caf\xe9</p>"), []byte("<pre>  x\n  y</pre><li>z"),
		[]byte(strings.Repeat("<div><table><tr><td>", 20_000)))
}

func FuzzParseCSV(f *testing.F) {
	fuzzParse(f, "csv", true, []byte("a;b\n\"1;2\";3\n"), []byte("\"unterminated\n"), []byte("a\tb\n1\t2\t3\n"))
}

func FuzzParseJSON(f *testing.F) {
	fuzzParse(f, "json", true, []byte(`[[[[]]],{"":{"":[{}]}}]`), []byte("{\"a\":1}\n{\"b\":[true,null]}"), []byte(`"x"`),
		[]byte(strings.Repeat("[{\"a\":", 20_000)))
}

func FuzzParseDOCX(f *testing.F) {
	fuzzParse(f, "docx", true,
		buildDOCX(f, `<w:p><w:p><w:r><w:t>nested</w:t></w:r></w:p></w:p><w:tc>stray cell</w:tc></w:tr>`, false),
		buildZip(f, [2]string{"_rels/.rels", `<Relationships><Relationship Type="x/officeDocument" Target="../../doc.xml"/></Relationships>`},
			[2]string{"doc.xml", `<d><p><t>relocated</t></p></d>`}),
		docxNestedBomb(f, 100_000))
}

func FuzzParsePDF(f *testing.F) {
	fuzzParse(f, "pdf", false,
		minimalPDF("[(a)-300(b)] TJ T* (c) ' 1 2 (d) \" 0 -20 Td (e) Tj", "<< /Title (t) >>"),
		minimalPDF("(x) Tj", ""))
}

func FuzzParseXLSX(f *testing.F) {
	fuzzParse(f, "xlsx", false, xlsxSparseBomb(f, 2000))
}
