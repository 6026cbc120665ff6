package handlers_test

import (
	"encoding/json"
	"testing"
)

// TestNumberInputsRenderAsDify: a number input given as 3 or "3" is the
// integer 3 in templates (Dify converts text without a decimal point to
// an int); "3.5" and 2.5 stay fractions, and "2.0" keeps its decimal point.
func TestNumberInputsRenderAsDify(t *testing.T) {
	s := newTestServer(t)
	_, key := s.importText(t, workflowApp("numbers", `    nodes:
    - id: start
      data: {type: start, title: Start, variables: [{variable: n, label: N, type: number, required: true}]}
    - id: tpl
      data: {type: template-transform, title: T, template: 'n={{ n }}', variables: [{variable: n, value_selector: [start, n]}]}
    - id: end
      data: {type: end, title: End, outputs: [{variable: out, value_selector: [tpl, output]}, {variable: raw, value_selector: [start, n]}]}
    edges:
    - {source: start, sourceHandle: source, target: tpl}
    - {source: tpl, sourceHandle: source, target: end}
`))
	tests := []struct {
		name, input, want, wantRaw string
	}{
		{"a JSON integer", `3`, "n=3", "3"},
		{"text without a decimal point", `"3"`, "n=3", "3"},
		{"text with spaces", `" 42 "`, "n=42", "42"},
		{"a negative integer as text", `"-7"`, "n=-7", "-7"},
		{"text with a decimal point", `"3.5"`, "n=3.5", "3.5"},
		{"a JSON fraction", `2.5`, "n=2.5", "2.5"},
		// JSON has one kind of number: the float 2.0 is written 2 in outputs.
		{"text of a whole number with a decimal point", `"2.0"`, "n=2.0", "2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.do(t, request{method: "POST", path: "/v1/workflows/run", key: key,
				body: `{"inputs":{"n":` + tc.input + `},"user":"u1","response_mode":"blocking"}`})
			expectStatus(t, rec, 200, "")
			var out struct {
				Data struct {
					Status  string
					Outputs map[string]json.RawMessage
				}
			}
			kbDecode(t, rec, &out)
			var got string
			json.Unmarshal(out.Data.Outputs["out"], &got)
			if out.Data.Status != "succeeded" || got != tc.want || string(out.Data.Outputs["raw"]) != tc.wantRaw {
				t.Errorf("outputs %s, want out %q raw %s", rec.Body, tc.want, tc.wantRaw)
			}
		})
	}
	rec := s.do(t, request{method: "POST", path: "/v1/workflows/run", key: key, body: `{"inputs":{"n":"three"},"user":"u1","response_mode":"blocking"}`})
	expectStatus(t, rec, 400, "invalid_param")
}
