package docparse

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"
)

// The binary samples in testdata/ are made by the builders below. After
// changing a builder, regenerate them with
//
//	go test ./docparse -run TestGenerateTestdata -update
//
// The text samples (sample.txt, .md, .html, .csv, .json) are written by hand.
var update = flag.Bool("update", false, "rewrite the generated files in testdata/")

func TestGenerateTestdata(t *testing.T) {
	files := map[string][]byte{
		"sample.pdf":          samplePDF(t),
		"sample.docx":         sampleDOCX(t, true),
		"sample.xlsx":         sampleXLSX(t),
		"sample-utf16.txt":    utf16LE("UTF-16 text: naïve café\r\nsecond line\r\n"),
		"sample-cp1252.txt":   []byte("Windows-1252 text: caf\xe9 \x93quoted\x94\n"),
		"sample-untitled.pdf": minimalPDF("(Only text) Tj", ""),
	}
	for name, want := range files {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// The committed file must read the same as a fresh build (bytes may
		// differ: zip time stamps, compressor output across Go versions).
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s missing; run go test ./docparse -run TestGenerateTestdata -update", path)
		}
		gotDoc, err1 := Parse(name, bytes.NewReader(got), int64(len(got)))
		wantDoc, err2 := Parse(name, bytes.NewReader(want), int64(len(want)))
		if err1 != nil || err2 != nil || *gotDoc != *wantDoc {
			t.Errorf("%s is stale (%v, %v); run go test ./docparse -run TestGenerateTestdata -update", path, err1, err2)
		}
	}
}

// buildPDF writes a PDF from the bodies of objects 1..n (object i+1 is
// objects[i]) with a correct cross-reference table. trailer is the content
// of the trailer dictionary, without /Size.
func buildPDF(objects []string, trailer string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(objects))
	for i, body := range objects {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, body)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objects)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d %s >>\nstartxref\n%d\n%%%%EOF\n", len(objects)+1, trailer, xref)
	return b.Bytes()
}

func pdfStream(content string) string {
	return fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content)
}

func pdfFlateStream(content string) string {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write([]byte(content))
	w.Close()
	return fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", z.Len(), z.Bytes())
}

// samplePDF has two pages sharing an inherited font (Helvetica,
// WinAnsiEncoding), several text objects and lines, a TJ array with word
// gaps and a small kern, a compressed second page, and a title.
func samplePDF(t testing.TB) []byte {
	t.Helper()
	page1 := strings.Join([]string{
		"BT /F1 24 Tf 72 720 Td (Appkb sample document) Tj ET",
		"BT /F1 12 Tf 72 690 Td (The knowledge base stores chunks of text.) Tj",
		"0 -16 Td (Each chunk is indexed for retrieval.) Tj ET",
		"BT /F1 12 Tf 72 650 Td [(Kerning)-300(keeps)-250(wor)-20(ds)-250(apart.)] TJ ET",
	}, "\n")
	page2 := "BT /F1 12 Tf 14 TL 72 720 Td (Second page: caf\\351 na\\357ve.) Tj T* (Last line.) Tj ET"
	return buildPDF([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 /Resources << /Font << /F1 5 0 R >> >> >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 6 0 R >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 7 0 R >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
		pdfStream(page1),
		pdfFlateStream(page2),
		"<< /Title (Appkb Sample PDF) /Producer (appkb docparse tests) >>",
	}, "/Root 1 0 R /Info 8 0 R")
}

// minimalPDF is a one-page PDF whose page shows ops with font F1; info is
// the document information dictionary's body or "".
func minimalPDF(ops, info string) []byte {
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
		pdfStream("BT /F1 12 Tf 72 720 Td " + ops + " ET"),
	}
	trailer := "/Root 1 0 R"
	if info != "" {
		objs = append(objs, info)
		trailer += fmt.Sprintf(" /Info %d 0 R", len(objs))
	}
	return buildPDF(objs, trailer)
}

const (
	contentTypesXML = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
<Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>
</Types>`
	packageRelsXML = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>
<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/>
</Relationships>`
	corePropsXML = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/">
<dc:title>Quarterly Report 2024</dc:title>
<dc:creator>appkb tests</dc:creator>
</cp:coreProperties>`
)

// docxBody wraps paragraphs and tables in a WordprocessingML document.
func docxBody(body string) string {
	return `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"><w:body>` +
		body + `<w:sectPr/></w:body></w:document>`
}

const sampleDocxBody = `<w:p><w:pPr><w:pStyle w:val="Title"/></w:pPr><w:r><w:t>Quarterly Report</w:t></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">Revenue grew </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>twelve percent</w:t></w:r><w:r><w:t>.</w:t></w:r><w:r><w:delText>deleted words</w:delText></w:r></w:p>
<w:p><w:r><w:t>Before tab</w:t><w:tab/><w:t>after tab</w:t><w:br/><w:t>after break</w:t></w:r></w:p>
<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Region</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Revenue</w:t></w:r></w:p></w:tc></w:tr>
<w:tr><w:tc><w:p><w:r><w:t>North</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>120</w:t></w:r></w:p><w:p><w:r><w:t>units</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
<w:p><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:t>Chosen text</w:t></mc:Choice><mc:Fallback><w:t>Fallback copy</w:t></mc:Fallback></mc:AlternateContent></w:r></w:p>
<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Outlook</w:t></w:r></w:p>
<w:p><w:r><w:t>Growth continues &amp; costs fall.</w:t></w:r></w:p>`

// buildZip writes the named parts, in the given order, into a zip file.
func buildZip(t testing.TB, parts ...[2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, p := range parts {
		w, err := zw.Create(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(p[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func buildDOCX(t testing.TB, body string, withCore bool) []byte {
	parts := [][2]string{
		{"[Content_Types].xml", contentTypesXML},
		{"_rels/.rels", packageRelsXML},
		{"word/document.xml", docxBody(body)},
	}
	if withCore {
		parts = append(parts, [2]string{"docProps/core.xml", corePropsXML})
	}
	return buildZip(t, parts...)
}

func sampleDOCX(t testing.TB, withCore bool) []byte {
	return buildDOCX(t, sampleDocxBody, withCore)
}

// sampleXLSX has a "Products" sheet with a header row, data rows (one with
// an empty cell) and a number, an empty sheet, and a "Notes" sheet.
func sampleXLSX(t testing.TB) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.SetSheetName("Sheet1", "Products"))
	rows := [][]any{
		{"Name", "Price", "Stock"},
		{"Widget", 2.5, 10},
		{"Gadget", 12, nil},
	}
	for i, row := range rows {
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		must(f.SetSheetRow("Products", cell, &row))
	}
	_, err := f.NewSheet("Empty")
	must(err)
	_, err = f.NewSheet("Notes")
	must(err)
	must(f.SetCellValue("Notes", "A1", "Note"))
	must(f.SetCellValue("Notes", "A2", "Prices include tax."))
	must(f.SetDocProps(&excelize.DocProperties{Title: "Price List", Creator: "appkb tests"}))
	buf, err := f.WriteToBuffer()
	must(err)
	return buf.Bytes()
}

func utf16LE(s string) []byte {
	b := []byte{0xFF, 0xFE}
	for _, r := range s {
		if r > 0xFFFF {
			panic("utf16LE: only the basic plane")
		}
		b = append(b, byte(r), byte(r>>8))
	}
	return b
}
