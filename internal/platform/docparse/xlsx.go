package docparse

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/xuri/excelize/v2"
)

func parseXLSX(data []byte, lim Limits) (*Document, error) {
	// The zip guard runs first: excelize reads every part into memory.
	if _, err := openZip(data, "xlsx", lim); err != nil {
		return nil, err
	}
	f, err := excelize.OpenReader(bytes.NewReader(data), excelize.Options{
		UnzipSizeLimit:    lim.MaxUnpackedSize,
		UnzipXMLSizeLimit: lim.MaxUnpackedSize, // keep every part in memory, no temporary files
	})
	if err != nil {
		return nil, corrupt("xlsx", "", err)
	}
	defer f.Close()

	out := lim.buf(lim.MaxTextSize)
	var sheets []string
	var texts []string
	var total, cells int64
	for _, name := range f.GetSheetList() {
		sheet := lim.buf(lim.MaxTextSize - total)
		rows, err := f.Rows(name)
		if err != nil {
			return nil, corrupt("xlsx", "sheet "+name+" cannot be read", err)
		}
		err = writeTable(sheet, func() ([]string, bool, error) {
			if lim.late() {
				return nil, false, tooSlow("xlsx", lim)
			}
			if !rows.Next() {
				return nil, false, rows.Error()
			}
			cols, err := rows.Columns()
			// A row is as long as its last cell is far to the right, so a
			// sheet of rows with one cell in its last column is a bomb.
			if cells += int64(len(cols)) + 1; cells > lim.MaxCells {
				return nil, false, tooLarge("xlsx", fmt.Sprintf("it has more than %d cells", lim.MaxCells))
			}
			return cols, true, err
		})
		rows.Close()
		var de *Error
		if errors.As(err, &de) {
			return nil, err
		}
		if err != nil {
			return nil, corrupt("xlsx", "sheet "+name+" cannot be read", err)
		}
		if err := sheet.check("xlsx", lim); err != nil {
			return nil, err
		}
		if t := strings.TrimSpace(sheet.String()); t != "" {
			sheets = append(sheets, name)
			texts = append(texts, t)
			total += int64(len(t))
		}
	}
	for i, t := range texts {
		if len(texts) > 1 {
			out.WriteString("Sheet: " + sheets[i] + "\n")
		}
		out.WriteString(t)
		out.WriteString("\n\n")
	}
	if err := out.check("xlsx", lim); err != nil {
		return nil, err
	}
	title := ""
	if props, err := f.GetDocProps(); err == nil && props != nil {
		title = props.Title
	}
	return &Document{Text: out.String(), Title: title}, nil
}
