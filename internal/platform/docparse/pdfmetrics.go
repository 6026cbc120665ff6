package docparse

import (
	"strings"

	"github.com/ledongthuc/pdf"
)

// pdfMetrics are the glyph widths of one font, in thousandths of a text
// space unit, so that the end of a piece of text can be told: producers such
// as Chromium place every glyph (or every kerned run) with its own move, and
// only a move past where the previous glyph ended is a gap between words.
type pdfMetrics struct {
	twoByte  bool            // Type0 font: codes are two bytes
	widths   map[int]float64 // code (or CID) → width
	missing  float64         // width of a code not in widths
	hasWidth bool            // the font gives widths; false: positions cannot be told
}

// pdfFontMetrics reads the widths of a simple font (FirstChar, Widths,
// MissingWidth) or of a Type0 font's descendant (W, DW). A font without
// widths (one of the standard 14 without a Widths array) gives metrics with
// hasWidth false.
func pdfFontMetrics(f pdf.Value) (m pdfMetrics) {
	defer func() {
		if recover() != nil {
			m = pdfMetrics{}
		}
	}()
	if f.Kind() != pdf.Dict {
		return pdfMetrics{}
	}
	m.widths = map[int]float64{}
	if f.Key("Subtype").Name() == "Type0" {
		m.twoByte = true
		d := f.Key("DescendantFonts").Index(0)
		m.missing = 1000
		if dw := d.Key("DW"); dw.Kind() == pdf.Integer || dw.Kind() == pdf.Real {
			m.missing = dw.Float64()
		}
		w := d.Key("W")
		for i := 0; i < w.Len() && len(m.widths) < 1<<16; {
			first := int(w.Index(i).Float64())
			if i+1 < w.Len() && w.Index(i+1).Kind() == pdf.Array {
				arr := w.Index(i + 1)
				for j := 0; j < arr.Len() && j < 1<<16; j++ {
					m.widths[first+j] = arr.Index(j).Float64()
				}
				i += 2
				continue
			}
			if i+2 >= w.Len() {
				break
			}
			last, width := int(w.Index(i+1).Float64()), w.Index(i+2).Float64()
			for c := first; c <= last && c-first < 1<<16; c++ {
				m.widths[c] = width
			}
			i += 3
		}
		m.hasWidth = true
		return m
	}
	widths := f.Key("Widths")
	if widths.Kind() != pdf.Array {
		return pdfMetrics{}
	}
	first := int(f.Key("FirstChar").Float64())
	for i := 0; i < widths.Len() && i < 256; i++ {
		m.widths[first+i] = widths.Index(i).Float64()
	}
	m.missing = f.Key("FontDescriptor").Key("MissingWidth").Float64()
	m.hasWidth = true
	return m
}

// advance is how far the raw string moves the text position, in text space
// units before the text matrix: glyph widths at size, character and word
// spacing, horizontal scaling.
func (m pdfMetrics) advance(raw string, size, charSpace, wordSpace, hScale float64) float64 {
	var total float64
	step := 1
	if m.twoByte {
		step = 2
	}
	for i := 0; i+step <= len(raw); i += step {
		code := int(raw[i])
		if step == 2 {
			code = code<<8 | int(raw[i+1])
		}
		w, ok := m.widths[code]
		if !ok {
			w = m.missing
		}
		total += w/1000*size + charSpace
		if step == 1 && code == ' ' {
			total += wordSpace
		}
	}
	return total * hScale
}

// ligatures are the Latin presentation forms, written as the letters a
// reader sees (what Unicode's compatibility decomposition, NFKC, gives).
var ligatures = strings.NewReplacer(
	"\uFB00", "ff", "\uFB01", "fi", "\uFB02", "fl", "\uFB03", "ffi", "\uFB04", "ffl", "\uFB05", "st", "\uFB06", "st",
)
