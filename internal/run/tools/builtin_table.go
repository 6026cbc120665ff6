package tools

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"
)

// The table tools turn a CSV or Excel file into JSON: one object per row,
// keyed by the first row's headers.

// tableMaxRows bounds the rows a table tool reads.
const tableMaxRows = 10_000

var tableFile = Param{Name: "file", Type: paramFile, Required: true, Description: "The file: a file variable, or its URL."}

// readTableFile reads a file argument through the environment.
func readTableFile(ctx context.Context, env *Env, args map[string]any) (string, []byte, error) {
	if env == nil || env.ReadFile == nil {
		return "", nil, errors.New("files cannot be read here")
	}
	return env.ReadFile(ctx, args["file"])
}

// rowsToJSON makes objects of rows, the first row giving the keys. Blank
// headers are named column_N; rows may be shorter than the header.
func rowsToJSON(rows [][]string) *Output {
	items := []any{}
	if len(rows) > 0 {
		header := make([]string, len(rows[0]))
		for i, h := range rows[0] {
			if header[i] = strings.TrimSpace(h); header[i] == "" {
				header[i] = fmt.Sprintf("column_%d", i+1)
			}
		}
		for _, r := range rows[1:] {
			obj := map[string]any{}
			empty := true
			for i, key := range header {
				v := ""
				if i < len(r) {
					v = r[i]
				}
				if v != "" {
					empty = false
				}
				obj[key] = v
			}
			if !empty {
				items = append(items, obj)
			}
		}
	}
	data, _ := json.Marshal(items)
	return &Output{Text: string(data), JSON: []any{map[string]any{"rows": items}}, Vars: map[string]any{"rows": items}}
}

var toolCSVToJSON = &Tool{
	Provider: "table", Name: "csv_to_json", Label: "CSV to JSON",
	Description: "Reads a CSV file into a JSON list of rows, keyed by the header row.",
	Params: []Param{
		tableFile,
		{Name: "delimiter", Type: paramString, Default: ",", Description: `The separator of fields; \t stands for a tab.`},
	},
	Run: func(ctx context.Context, env *Env, args map[string]any) (*Output, error) {
		name, data, err := readTableFile(ctx, env, args)
		if err != nil {
			return nil, err
		}
		data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
		if !utf8.Valid(data) {
			return nil, fmt.Errorf("%s is not UTF-8 text", name)
		}
		r := csv.NewReader(bytes.NewReader(data))
		r.FieldsPerRecord = -1
		if d := strings.ReplaceAll(str(args, "delimiter"), `\t`, "\t"); d != "" {
			r.Comma, _ = utf8.DecodeRuneInString(d)
		}
		var rows [][]string
		for len(rows) <= tableMaxRows {
			rec, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s is not valid CSV: %v", name, err)
			}
			rows = append(rows, rec)
		}
		return rowsToJSON(rows), nil
	},
}

var toolExcelToJSON = &Tool{
	Provider: "table", Name: "excel_to_json", Label: "Excel to JSON",
	Description: "Reads one sheet of an Excel (.xlsx) file into a JSON list of rows, keyed by the header row.",
	Params: []Param{
		tableFile,
		{Name: "sheet", Type: paramString, Description: "The sheet's name; the first sheet when left out."},
	},
	Run: func(ctx context.Context, env *Env, args map[string]any) (*Output, error) {
		name, data, err := readTableFile(ctx, env, args)
		if err != nil {
			return nil, err
		}
		f, err := excelize.OpenReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s is not an Excel workbook: %v", name, err)
		}
		defer f.Close()
		sheet := str(args, "sheet")
		if sheet == "" {
			sheet = f.GetSheetName(0)
		}
		rows, err := f.GetRows(sheet)
		if err != nil {
			return nil, fmt.Errorf("%s has no sheet %q", name, sheet)
		}
		if len(rows) > tableMaxRows+1 {
			rows = rows[:tableMaxRows+1]
		}
		return rowsToJSON(rows), nil
	},
}
