package docparse

import (
	"encoding/csv"
	"errors"
	"io"
	"strings"
)

// parseCSV reads a CSV file: the first non-empty record is the header, each
// later record becomes one FormatRow line. Quotes are read leniently (a stray
// quote inside a field is kept) and records may have any number of fields.
func parseCSV(data []byte, lim Limits) (*Document, error) {
	s, err := plainText(data, "csv")
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(strings.NewReader(s))
	r.Comma = sniffDelimiter(s)
	r.LazyQuotes = true
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	out := lim.buf(lim.MaxTextSize)
	err = writeTable(out, func() ([]string, bool, error) {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, corrupt("csv", "", err)
		}
		return rec, true, nil
	})
	if err != nil {
		return nil, err
	}
	if err := out.check("csv", lim); err != nil {
		return nil, err
	}
	return &Document{Text: out.String()}, nil
}

// sniffDelimiter picks the delimiter among , ; tab | that occurs most often
// outside quotes on the first line; comma wins ties and lines without any.
func sniffDelimiter(s string) rune {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	counts := map[rune]int{}
	inQuotes := false
	for _, c := range s {
		switch c {
		case '"':
			inQuotes = !inQuotes
		case ',', ';', '\t', '|':
			if !inQuotes {
				counts[c]++
			}
		}
	}
	best := ','
	for _, c := range []rune{';', '\t', '|'} {
		if counts[c] > counts[best] {
			best = c
		}
	}
	return best
}
