package docparse

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseData(name string, data []byte) (*Document, error) {
	return Parse(name, bytes.NewReader(data), int64(len(data)))
}

func TestParseSamples(t *testing.T) {
	tests := []struct {
		file      string
		title     string
		want      []string // lines or fragments the text must contain
		wantNot   []string
		wantExact string // when set, the whole text
	}{
		{
			file:  "sample.txt",
			want:  []string{"Plain text sample\n\nKnowledge bases hold documents.", "https://example.com/help"},
			title: "",
		},
		{file: "sample-utf16.txt", wantExact: "UTF-16 text: naïve café\nsecond line"},
		{file: "sample-cp1252.txt", wantExact: "Windows-1252 text: café “quoted”"},
		{
			file:  "sample.md",
			title: "Getting Started with appkb",
			want:  []string{"# Getting Started with appkb", "```sh\n# not a title: inside a code fence", "- Ask a question"},
		},
		{
			file:  "sample.html",
			title: "Release Notes & Changes",
			want: []string{
				"Version 2.0\n\nThis release adds hierarchical chunking.",
				"- Parent chunks\n- Child chunks",
				"Mode | Default\nautomatic | 500 tokens",
				"line one\n  indented line",
				"Last\nline",
			},
			wantNot: []string{"secret", "color: red", "alert", "Enable JavaScript", "a comment", "Release Notes"},
		},
		{
			file: "sample.csv",
			wantExact: "name: Ada Lovelace; city: London; age: 36\n" +
				"name: Hopper, Grace; city: New York; age: 85\n" +
				"name: Alan Turing; age: 41",
		},
		{
			file: "sample.json",
			wantExact: `title: Appkb FAQ
version: 2
published: true
editor: null
tags:
  - faq
  - knowledge
entries:
  - q: What is a chunk?
    a: A piece of a document.
  - q: How long?
    a: Up to 500 tokens.
    extra: {}
matrix:
  - - 1
    - 2
  - []`,
		},
		{
			file:  "sample.pdf",
			title: "Appkb Sample PDF",
			wantExact: "Appkb sample document\n" +
				"The knowledge base stores chunks of text.\n" +
				"Each chunk is indexed for retrieval.\n" +
				"Kerning keeps words apart.\n\n" +
				"Second page: café naïve.\n" +
				"Last line.",
		},
		{file: "sample-untitled.pdf", wantExact: "Only text"},
		{
			// Printed by headless Chromium from chromium-vacation.html
			// (chromium --headless --no-pdf-header-footer --print-to-pdf):
			// every glyph has its own move, and fi, ff, ffi are ligature
			// glyphs. The words come out whole and the ligatures as letters.
			file:  "chromium-vacation.pdf",
			title: "Vacation policy",
			wantExact: "Vacation policy\n" +
				"Every employee gets twenty-five days of paid vacation a year. Vacation\n" +
				"requests are filed in the staff office.\n" +
				"The finance office confirms the figures; offices fill quickly in April.\n" +
				"Bicycles may be parked in the courtyard racks. WAVE Today AVA.",
			wantNot: []string{"V acation", "\uFB01", "\uFB00", "\uFB03"},
		},
		{
			file:  "sample.docx",
			title: "Quarterly Report 2024",
			want: []string{
				"Quarterly Report\n\nRevenue grew twelve percent.\n\n",
				"Before tab\tafter tab\nafter break",
				"Region | Revenue\nNorth | 120 units\n",
				"Chosen text",
				"Growth continues & costs fall.",
			},
			wantNot: []string{"deleted words", "Fallback copy"},
		},
		{
			file:  "sample.xlsx",
			title: "Price List",
			wantExact: "Sheet: Products\n" +
				"Name: Widget; Price: 2.5; Stock: 10\n" +
				"Name: Gadget; Price: 12\n\n" +
				"Sheet: Notes\n" +
				"Note: Prices include tax.",
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			doc, err := parseData(tc.file, readTestdata(t, tc.file))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if doc.Title != tc.title {
				t.Errorf("title = %q, want %q", doc.Title, tc.title)
			}
			if tc.wantExact != "" && doc.Text != tc.wantExact {
				t.Errorf("text =\n%s\nwant\n%s", doc.Text, tc.wantExact)
			}
			for _, w := range tc.want {
				if !strings.Contains(doc.Text, w) {
					t.Errorf("text lacks %q:\n%s", w, doc.Text)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(doc.Text, w) {
					t.Errorf("text has %q:\n%s", w, doc.Text)
				}
			}
		})
	}
}

func TestTitles(t *testing.T) {
	tests := []struct {
		name, file string
		data       []byte
		want       string
	}{
		{"docx without core title → Title-styled paragraph", "a.docx", sampleDOCX(t, false), "Quarterly Report"},
		{"docx with only a Heading1", "a.docx", buildDOCX(t, `<w:p><w:r><w:t>Body</w:t></w:r></w:p><w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Intro</w:t></w:r></w:p>`, false), "Intro"},
		{"markdown front matter", "a.md", []byte("---\ntitle: \"From Front Matter\"\n---\n# Heading\n"), "From Front Matter"},
		{"markdown setext heading", "a.markdown", []byte("Setext Title\n============\n\nbody\n"), "Setext Title"},
		{"markdown without heading", "a.md", []byte("## Second level only\ntext\n"), ""},
		{"html without title → h1", "a.htm", []byte("<h1>Big <i>Heading</i></h1><p>x</p>"), "Big Heading"},
		{"pdf info title in UTF-16", "a.pdf", minimalPDF("(x) Tj", "<< /Title <FEFF00C90074006500320030> >>"), "Éte20"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := parseData(tc.file, tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if doc.Title != tc.want {
				t.Errorf("title = %q, want %q", doc.Title, tc.want)
			}
		})
	}
}

func TestSupported(t *testing.T) {
	for _, ext := range []string{"txt", ".md", "markdown", "HTML", ".Htm", "csv", "json", "pdf", "DOCX", "xlsx"} {
		if !Supported(ext) {
			t.Errorf("Supported(%q) = false", ext)
		}
	}
	for _, ext := range []string{"", "doc", "xls", "pptx", "exe", ".epub", "txt.gz"} {
		if Supported(ext) {
			t.Errorf("Supported(%q) = true", ext)
		}
	}
	if got := Ext("Report.Final.PDF"); got != "pdf" {
		t.Errorf("Ext = %q", got)
	}
	if got := strings.Join(Extensions(), ","); got != "csv,docx,htm,html,json,markdown,md,pdf,txt,xlsx" {
		t.Errorf("Extensions = %s", got)
	}
}

// bigZip is a docx whose document part is n bytes of repeated text: it
// compresses to almost nothing.
func bigZip(t *testing.T, n int) []byte {
	para := `<w:p><w:r><w:t>aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa</w:t></w:r></w:p>`
	return buildDOCX(t, strings.Repeat(para, n/len(para)+1), false)
}

func TestErrors(t *testing.T) {
	small := Limits{MaxFileSize: 1 << 20, MaxUnpackedSize: 1 << 20, MaxZipEntries: 50, MaxTextSize: 64 << 10}
	manyEntries := func() []byte {
		parts := [][2]string{{"word/document.xml", docxBody("")}}
		for i := range 60 {
			parts = append(parts, [2]string{"media/x" + strings.Repeat("y", i), "z"})
		}
		return buildZip(t, parts...)
	}()
	tests := []struct {
		name     string
		lim      Limits
		file     string
		data     []byte
		size     int64 // -2: use len(data)
		wantKind error
	}{
		{"unknown extension → unsupported", DefaultLimits, "a.exe", []byte("MZ"), -2, ErrUnsupported},
		{"no extension → unsupported", DefaultLimits, "README", []byte("hi"), -2, ErrUnsupported},
		{"legacy .doc → unsupported", DefaultLimits, "a.doc", []byte("x"), -2, ErrUnsupported},
		{"declared size over the limit → too large before reading", small, "a.txt", nil, 2 << 20, ErrTooLarge},
		{"unknown size, more bytes than the limit → too large", small, "a.txt", bytes.Repeat([]byte("a"), 1<<20+1), -1, ErrTooLarge},
		{"size exactly at the limit is accepted", Limits{MaxFileSize: 1 << 20}, "a.txt", bytes.Repeat([]byte("a"), 1<<20), -1, nil},
		{"txt with NUL bytes → corrupt", DefaultLimits, "a.txt", []byte("abc\x00\x01\x02"), -2, ErrCorrupt},
		{"pdf without header → corrupt", DefaultLimits, "a.pdf", []byte("hello"), -2, ErrCorrupt},
		{"truncated pdf → corrupt", DefaultLimits, "a.pdf", readTestdata(t, "sample.pdf")[:600], -2, ErrCorrupt},
		{"docx that is not a zip → corrupt", DefaultLimits, "a.docx", []byte("PK\x03\x04garbage"), -2, ErrCorrupt},
		{"docx without document part → corrupt", DefaultLimits, "a.docx", buildZip(t, [2]string{"x.xml", "<a/>"}), -2, ErrCorrupt},
		{"docx with broken XML → corrupt", DefaultLimits, "a.docx", buildZip(t, [2]string{"word/document.xml", "<w:document><w:body><w:p>"}), -2, ErrCorrupt},
		{"xlsx that is a docx → corrupt", DefaultLimits, "a.xlsx", readTestdata(t, "sample.docx"), -2, ErrCorrupt},
		{"xlsx that is not a zip → corrupt", DefaultLimits, "a.xlsx", []byte("name,age\n"), -2, ErrCorrupt},
		{"json syntax error → corrupt", DefaultLimits, "a.json", []byte(`{"a": }`), -2, ErrCorrupt},
		{"json trailing garbage → corrupt", DefaultLimits, "a.json", []byte(`{"a": 1} }`), -2, ErrCorrupt},
		{"empty json → corrupt", DefaultLimits, "a.json", []byte("  "), -2, ErrCorrupt},
		{"json nested too deeply → corrupt", DefaultLimits, "a.json", []byte(strings.Repeat("[", 1200) + strings.Repeat("]", 1200)), -2, ErrCorrupt},
		{"docx zip bomb (declared sizes) → too large", small, "a.docx", bigZip(t, 2<<20), -2, ErrTooLarge},
		{"xlsx zip bomb (declared sizes) → too large", small, "a.xlsx", bigZip(t, 2<<20), -2, ErrTooLarge},
		{"zip with too many entries → too large", small, "a.docx", manyEntries, -2, ErrTooLarge},
		{"csv whose repeated header outgrows the text limit → too large", small, "a.csv",
			[]byte(strings.Repeat("h", 1000) + "\n" + strings.Repeat("x\n", 200)), -2, ErrTooLarge},
		{"docx text over the text limit → too large", small, "a.docx", bigZip(t, 200<<10), -2, ErrTooLarge},
		{"pdf content stream over the unpacked limit → too large", Limits{MaxUnpackedSize: 1 << 10},
			"a.pdf", minimalPDF("("+strings.Repeat("x", 2000)+") Tj", ""), -2, ErrTooLarge},
		{"empty txt is fine", DefaultLimits, "a.txt", nil, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			size := tc.size
			if size == -2 {
				size = int64(len(tc.data))
			}
			doc, err := tc.lim.Parse(tc.file, bytes.NewReader(tc.data), size)
			if tc.wantKind == nil {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if doc == nil {
					t.Fatal("nil document")
				}
				return
			}
			if !errors.Is(err, tc.wantKind) {
				t.Fatalf("err = %v, want %v", err, tc.wantKind)
			}
			var e *Error
			if !errors.As(err, &e) || e.Error() == "" {
				t.Fatalf("err %T is not an *Error", err)
			}
			for _, other := range []error{ErrUnsupported, ErrCorrupt, ErrTooLarge} {
				if other != tc.wantKind && errors.Is(err, other) {
					t.Errorf("err also matches %v", other)
				}
			}
		})
	}
}

func TestErrorMessages(t *testing.T) {
	_, err := Parse("virus.EXE", strings.NewReader(""), 0)
	if got := err.Error(); got != "files of type .exe are not supported" {
		t.Errorf("unsupported: %q", got)
	}
	_, err = Limits{MaxFileSize: 1 << 20}.Parse("a.txt", strings.NewReader(""), 5<<20)
	if got := err.Error(); got != "the file is too large: the limit is 1 MiB" {
		t.Errorf("too large: %q", got)
	}
	_, err = Parse("a.pdf", strings.NewReader("nope"), 4)
	if got := err.Error(); !strings.HasPrefix(got, "the file cannot be read as pdf") {
		t.Errorf("corrupt: %q", got)
	}
}

// failingReader fails after its data.
type failingReader struct{ r io.Reader }

func (f failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errors.New("connection reset")
	}
	return n, err
}

func TestReadFailureIsCorrupt(t *testing.T) {
	_, err := Parse("a.txt", failingReader{strings.NewReader("abc")}, -1)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v", err)
	}
}

func TestTextNormalisation(t *testing.T) {
	doc, err := parseData("a.txt", []byte("\r\n\r\n  first\r\nsecond\rthird  \n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if doc.Text != "first\nsecond\nthird" {
		t.Errorf("text = %q", doc.Text)
	}
}

func TestCSVDelimiters(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"semicolon", "a;b\n1;2\n", "a: 1; b: 2"},
		{"tab", "a\tb\n1\t2\n", "a: 1; b: 2"},
		{"pipe", "a|b\n1|2\n", "a: 1; b: 2"},
		{"comma inside quotes does not count", "\"x,y,z\";b\n1;2\n", "x,y,z: 1; b: 2"},
		{"row longer than the header", "a\n1,2\n", "a: 1; column 2: 2"},
		{"header only", "a,b,,c\n", "a; b; c"},
		{"blank lines before the header", "\n\n,\na,b\n1,2\n", "a: 1; b: 2"},
		{"stray quote kept", "a\nsay \"hi\n", "a: say \"hi"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := parseData("a.csv", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if doc.Text != tc.want {
				t.Errorf("text = %q, want %q", doc.Text, tc.want)
			}
		})
	}
}

func TestJSONShapes(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"top-level string", `"hello\nworld"`, "hello\nworld"},
		{"top-level array", `[1, "two", {"three": 3, "four": [4]}]`, "- 1\n- two\n- three: 3\n  four:\n    - 4"},
		{"json lines", "{\"a\":1}\n{\"a\":2}\n", "a: 1\n\na: 2"},
		{"nested objects", `{"a":{"b":{"c":true}}}`, "a:\n  b:\n    c: true"},
		{"big number kept as written", `{"n": 12345678901234567890.5e3}`, "n: 12345678901234567890.5e3"},
		{"empty containers", `{"o":{},"a":[]}`, "o: {}\na: []"},
		{"utf-8 BOM", "\uFEFF{\"k\":\"v\"}", "k: v"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := parseData("a.json", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if doc.Text != tc.want {
				t.Errorf("text = %q, want %q", doc.Text, tc.want)
			}
		})
	}
}

func TestPDFPageTreeCycleEnds(t *testing.T) {
	// The second Pages node lists its parent as a kid: the walk must end.
	data := buildPDF([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 6 0 R] /Count 2 >>",
		"<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
		pdfStream("BT /F1 12 Tf 72 720 Td (loop) Tj ET"),
		"<< /Type /Pages /Kids [2 0 R] /Count 1 >>",
	}, "/Root 1 0 R")
	doc, err := Limits{MaxTextSize: 1 << 20}.Parse("a.pdf", bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v", err)
	}
	if err == nil && !strings.HasPrefix(doc.Text, "loop") {
		t.Errorf("text = %q", doc.Text)
	}
}

func TestPDFBrokenPageIsSkipped(t *testing.T) {
	data := buildPDF([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 6 0 R] /Count 2 /Resources << /Font << /F1 4 0 R >> >> >>",
		"<< /Type /Page /Parent 2 0 R /Contents 5 0 R >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
		"<< /Length 10 /Filter /LZWDecode >>\nstream\n0123456789\nendstream",
		"<< /Type /Page /Parent 2 0 R /Contents 7 0 R >>",
		pdfStream("BT /F1 12 Tf 72 720 Td (good page) Tj ET"),
	}, "/Root 1 0 R")
	doc, err := parseData("a.pdf", data)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Text != "good page" {
		t.Errorf("text = %q", doc.Text)
	}
}
