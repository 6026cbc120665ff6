package docparse

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Hostile inputs, built in the test so that no large file is committed. Each
// is small (or compresses well) and would cost time or memory out of all
// proportion to its size in a parser without budgets.

// docxNestedBomb is a docx whose document part nests n paragraphs.
func docxNestedBomb(t testing.TB, n int) []byte {
	body := strings.Repeat("<w:p>", n) + "<w:r><w:t>x</w:t></w:r>" + strings.Repeat("</w:p>", n)
	return buildDOCX(t, body, false)
}

// xlsxSparseBomb is an xlsx sheet of rows rows, each with a single cell in
// the last column (XFD), so that a reader filling rows out to their last
// cell makes 16,384 values per row.
func xlsxSparseBomb(t testing.TB, rows int) []byte {
	var sheet strings.Builder
	sheet.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>`)
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&sheet, `<row r="%d"><c r="XFD%d" t="inlineStr"><is><t>v</t></is></c></row>`, i, i)
	}
	sheet.WriteString(`</sheetData></worksheet>`)
	return buildZip(t,
		[2]string{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>`},
		[2]string{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`},
		[2]string{"xl/workbook.xml", `<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>`},
		[2]string{"xl/_rels/workbook.xml.rels", `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>`},
		[2]string{"xl/worksheets/sheet1.xml", sheet.String()},
	)
}

// bombs are hostile inputs by file name, with the kind of error each must
// end in (nil: it may be read, within the limits).
func bombs(t testing.TB) map[string]struct {
	data []byte
	want error
} {
	type bomb = struct {
		data []byte
		want error
	}
	return map[string]bomb{
		"nested.docx": {docxNestedBomb(t, 100_000), ErrTooLarge},
		"sparse.xlsx": {xlsxSparseBomb(t, 20_000), ErrTooLarge},
		"nested.html": {[]byte(strings.Repeat("<div>", 200_000)), ErrCorrupt},
		"nested.json": {[]byte(strings.Repeat("[", 200_000) + strings.Repeat("]", 200_000)), ErrCorrupt},
		"nested.md":   {[]byte(strings.Repeat("> ", 200_000) + "x"), nil},
		"quotes.csv":  {[]byte(strings.Repeat("\"", 1_000_000)), nil},
		"nowhite.txt": {bytes.Repeat([]byte("a"), 4<<20), nil},
		"nested.pdf":  {minimalPDF(strings.Repeat("q ", 100_000)+"(x) Tj", ""), nil},
	}
}

func TestBombsAreRefusedOrBounded(t *testing.T) {
	for name, b := range bombs(t) {
		t.Run(name, func(t *testing.T) {
			doc, err := Parse(name, bytes.NewReader(b.data), int64(len(b.data)))
			if b.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if int64(len(doc.Text)) > DefaultLimits.MaxTextSize {
					t.Fatalf("text of %d bytes", len(doc.Text))
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, b.want) {
				t.Fatalf("got %v, want an *Error of kind %v", err, b.want)
			}
		})
	}
}

func TestBombMessages(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		lim  Limits
		want string
	}{
		{"nested.docx", docxNestedBomb(t, 1000), Limits{}, "the file is too large: it nests more than 256 levels deep"},
		{"sparse.xlsx", xlsxSparseBomb(t, 300), Limits{}, "the file is too large: it has more than 4000000 cells"},
		{"big.csv", []byte(strings.Repeat("a,b\n1,2\n", 100_000)), Limits{MaxDuration: time.Nanosecond}, "the file is too large: reading it takes longer than 1ns"},
		{"big.docx", buildDOCX(t, strings.Repeat("<w:p><w:r><w:t>x</w:t></w:r></w:p>", 5000), false), Limits{MaxDuration: time.Nanosecond}, "the file is too large: reading it takes longer than 1ns"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.lim.Parse(c.name, bytes.NewReader(c.data), int64(len(c.data)))
			if err == nil || err.Error() != c.want || !errors.Is(err, ErrTooLarge) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}
