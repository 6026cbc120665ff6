package docparse

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
)

// decodeText turns the bytes of a plain-text file into a string: UTF-8 with
// or without a byte order mark, UTF-16 with a byte order mark, otherwise
// Windows-1252 (which maps every byte to a character, so it never fails).
func decodeText(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte{0xEF, 0xBB, 0xBF}):
		return string(data[3:])
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		return decodeUTF16(data[2:], binary.LittleEndian)
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		return decodeUTF16(data[2:], binary.BigEndian)
	case utf8.Valid(data):
		return string(data)
	}
	s, err := charmap.Windows1252.NewDecoder().Bytes(data)
	if err != nil { // cannot happen: every byte has a mapping
		return strings.ToValidUTF8(string(data), "\uFFFD")
	}
	return string(s)
}

func decodeUTF16(b []byte, order binary.ByteOrder) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = order.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}

// plainText decodes data and refuses binary content.
func plainText(data []byte, format string) (string, error) {
	s := decodeText(data)
	if strings.IndexByte(s, 0) >= 0 {
		return "", corrupt(format, "it contains binary data", nil)
	}
	return s, nil
}

func parseText(data []byte, _ Limits) (*Document, error) {
	s, err := plainText(data, "txt")
	if err != nil {
		return nil, err
	}
	return &Document{Text: s}, nil
}

func parseMarkdown(data []byte, _ Limits) (*Document, error) {
	s, err := plainText(data, "md")
	if err != nil {
		return nil, err
	}
	return &Document{Text: s, Title: markdownTitle(s)}, nil
}

// markdownTitle returns the "title:" of a leading YAML front matter block,
// else the first level-one heading ("# Title" or "Title" underlined with
// "="), skipping fenced code blocks; "" when there is none.
func markdownTitle(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	i := 0
	if len(lines) > 0 && strings.TrimSpace(lines[0]) == "---" {
		for j := 1; j < len(lines); j++ {
			l := strings.TrimSpace(lines[j])
			if l == "---" || l == "..." {
				i = j + 1
				break
			}
			if v, ok := strings.CutPrefix(l, "title:"); ok {
				if t := strings.Trim(strings.TrimSpace(v), `"'`); t != "" {
					return t
				}
			}
		}
	}
	fence := ""
	for ; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if fence != "" {
			if strings.HasPrefix(l, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(l, "```") || strings.HasPrefix(l, "~~~") {
			fence = l[:3]
			continue
		}
		if t, ok := strings.CutPrefix(l, "# "); ok {
			return strings.TrimSpace(strings.TrimRight(t, "#"))
		}
		if l != "" && i+1 < len(lines) {
			next := strings.TrimSpace(lines[i+1])
			if len(next) >= 2 && strings.Trim(next, "=") == "" {
				return l
			}
		}
	}
	return ""
}

// FormatRow writes one table row as a line of text, the way csv and xlsx
// files are flattened: "header: value" pairs joined by "; ", in column order.
// Empty cells are left out; a column without a header (or beyond the header
// row) is called "column N", counting from 1. A row whose cells are all
// empty yields "".
//
// For example the header ["name", "age"] and the row ["Ada", "36"] give
// "name: Ada; age: 36".
func FormatRow(header, row []string) string {
	var b strings.Builder
	for i, v := range row {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		h := ""
		if i < len(header) {
			h = strings.TrimSpace(header[i])
		}
		if h == "" {
			h = "column " + strconv.Itoa(i+1)
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(h)
		b.WriteString(": ")
		b.WriteString(v)
	}
	return b.String()
}

// writeTable writes rows with FormatRow, taking the first row with a
// non-empty cell as the header. When there is a header but no data row the
// header cells themselves are written, joined by "; ".
func writeTable(out *textBuf, next func() ([]string, bool, error)) error {
	var header []string
	rows := 0
	for {
		row, ok, err := next()
		if err != nil {
			return err
		}
		if !ok || out.over {
			break
		}
		if header == nil {
			if isEmptyRow(row) {
				continue
			}
			header = append([]string(nil), row...)
			continue
		}
		line := FormatRow(header, row)
		if line == "" {
			continue
		}
		out.WriteString(line)
		out.WriteString("\n")
		rows++
	}
	if header != nil && rows == 0 {
		var cells []string
		for _, h := range header {
			if h = strings.TrimSpace(h); h != "" {
				cells = append(cells, h)
			}
		}
		out.WriteString(strings.Join(cells, "; "))
		out.WriteString("\n")
	}
	return nil
}

func isEmptyRow(row []string) bool {
	for _, v := range row {
		if strings.TrimSpace(v) != "" {
			return false
		}
	}
	return true
}
