package workflow

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
)

// searchRecorder answers every search with two passages and remembers the
// requests.
type searchRecorder struct {
	mu   sync.Mutex
	reqs []RetrieveRequest
}

func (f *searchRecorder) Retrieve(_ context.Context, req RetrieveRequest) ([]map[string]any, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	return []map[string]any{
		{"content": "Refunds take 5 days.", "title": "faq.md", "metadata": map[string]any{"score": 0.9}},
		{"content": "Ask support for help.", "title": "faq.md", "metadata": map[string]any{"score": 0.5}},
	}, nil
}

// toolGraph is start → the tool node t → end, with the end showing the
// given outputs of t.
func toolGraph(node string, outs ...string) string {
	var list []string
	for _, o := range outs {
		list = append(list, fmt.Sprintf("{variable: %s, value_selector: [t, %s]}", o, o))
	}
	return graph(`
  - id: t
    data: `+node+`
  - id: end
    data: {type: end, title: End, outputs: [`+strings.Join(list, ", ")+`]}`,
		edge("start", "source", "t"), edge("t", "source", "end"))
}

func TestToolNode(t *testing.T) {
	fixedClock(t, time.Date(2024, 3, 5, 13, 4, 5, 0, time.UTC))
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<html><head><title>Docs</title><script>x()</script></head><body><h1>Hello</h1><p>UA %s</p></body></html>`, r.UserAgent())
		case "/img":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte{0x89, 'P', 'N', 'G'})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(page.Close)
	tests := []struct {
		name       string
		node       string
		outs       []string
		engine     *Engine
		wantStatus string
		wantOut    map[string]any
		wantErr    string
	}{
		{
			name: "time tool with a mixed parameter and v2 configurations",
			node: `{type: tool, title: Clock, provider_id: time, provider_name: time, provider_type: builtin, tool_name: current_time,
      tool_node_version: '2', tool_configurations: {format: {type: mixed, value: '%Y/%m/%d {{#start.q#}}'}, timezone: {type: constant, value: Asia/Tokyo}},
      tool_parameters: {}}`,
			outs:       []string{"text", "files", "json"},
			wantStatus: RunSucceeded,
			wantOut:    map[string]any{"text": "2024/03/05 hi", "files": []any{}, "json": []any{}},
		},
		{
			name: "plain configurations and a variable parameter; parameters win",
			node: `{type: tool, title: Clock, provider_name: langgenius/time/time, provider_type: plugin, tool_name: current_time,
      plugin_unique_identifier: 'langgenius/time:0.0.1@abc',
      tool_configurations: {format: '%H:%M', timezone: UTC}, tool_parameters: {timezone: {type: variable, value: [start, q]}}}`,
			outs:       []string{"text"},
			wantStatus: RunFailed,
			wantErr:    `The tool time/current_time of node "Clock" failed: unknown timezone "hi".`,
		},
		{
			name: "json parse reads its content from a variable and gives json for an object",
			node: `{type: tool, title: J, provider_name: langgenius/json_process/json_process, provider_type: builtin, tool_name: parse,
      tool_parameters: {content: {type: constant, value: '{"user": {"name": "Ann", "age": 7}}'}, json_filter: {type: mixed, value: '$.user'}}}`,
			outs:       []string{"text", "json"},
			wantStatus: RunSucceeded,
			wantOut:    map[string]any{"text": `{"name": "Ann", "age": 7}`, "json": []any{map[string]any{"name": "Ann", "age": float64(7)}}},
		},
		{
			name: "a tool's named variables become outputs",
			node: `{type: tool, title: S, provider_name: text, provider_type: builtin, tool_name: text_split,
      tool_parameters: {text: {type: mixed, value: 'x;{{#start.q#}};y'}, separator: {type: constant, value: ';'}}}`,
			outs:       []string{"text", "parts"},
			wantStatus: RunSucceeded,
			wantOut:    map[string]any{"text": "x\nhi\ny", "parts": []any{"x", "hi", "y"}},
		},
		{
			name: "a missing required parameter fails the node",
			node: `{type: tool, title: R, provider_name: regex, provider_type: builtin, tool_name: regex_extract,
      tool_parameters: {content: {type: mixed, value: '{{#start.q#}}'}}}`,
			outs:       []string{"text"},
			wantStatus: RunFailed,
			wantErr:    `The tool regex/regex_extract of node "R": the parameter "expression" is required.`,
		},
		{
			name: "an unknown plugin tool fails naming the plugin and the tool",
			node: `{type: tool, title: Search, provider_id: langgenius/tavily/tavily, provider_name: langgenius/tavily/tavily, provider_type: builtin,
      tool_name: tavily_search, plugin_unique_identifier: 'langgenius/tavily:0.0.5@123', tool_parameters: {}}`,
			outs:       []string{"text"},
			wantStatus: RunFailed,
			wantErr:    `The "tool" node "Search" cannot run: the tool "tavily_search" of provider "langgenius/tavily/tavily" (plugin langgenius/tavily:0.0.5@123) is not one of appkb's built-in tools, and the tools file (--tools) does not map the provider.`,
		},
		{
			name:       "a custom API tool fails naming its kind",
			node:       `{type: tool, title: Api, provider_id: 9f1c, provider_name: weather-api, provider_type: api, tool_name: current_time, tool_parameters: {}}`,
			outs:       []string{"text"},
			wantStatus: RunFailed,
			wantErr:    `the tool "current_time" of provider "weather-api" is of type api, which appkb can run only once the tools file (--tools) maps the provider`,
		},
		{
			name: "the web scraper reads a page through the guard",
			node: `{type: tool, title: W, provider_name: webscraper, provider_type: builtin, tool_name: webscraper,
      tool_parameters: {url: {type: mixed, value: '` + page.URL + `/page'}}, tool_configurations: {user_agent: test-agent}}`,
			outs:       []string{"text", "json"},
			engine:     localEngine(),
			wantStatus: RunSucceeded,
			wantOut: map[string]any{"text": "Hello\n\nUA test-agent", "json": []any{map[string]any{
				"url": page.URL + "/page", "title": "Docs", "content_type": "text/html"}}},
		},
		{
			name: "the web scraper refuses a loopback page without an allowance",
			node: `{type: tool, title: W, provider_name: webscraper, provider_type: builtin, tool_name: webscraper,
      tool_parameters: {url: {type: constant, value: '` + page.URL + `/page'}}}`,
			outs:       []string{"text"},
			wantStatus: RunFailed,
			wantErr:    "points to an address that may not be requested",
		},
		{
			name: "the web scraper refuses an image",
			node: `{type: tool, title: W, provider_name: webscraper, provider_type: builtin, tool_name: webscraper,
      tool_parameters: {url: {type: constant, value: '` + page.URL + `/img'}}}`,
			outs:       []string{"text"},
			engine:     localEngine(),
			wantStatus: RunFailed,
			wantErr:    "is image/png, which the web scraper cannot read",
		},
		{
			name: "an error strategy applies to tool failures",
			node: `{type: tool, title: W, provider_name: webscraper, provider_type: builtin, tool_name: webscraper, error_strategy: default-value,
      default_value: [{key: text, type: string, value: offline}], tool_parameters: {url: {type: constant, value: '` + page.URL + `/missing'}}}`,
			outs:       []string{"text"},
			engine:     localEngine(),
			wantStatus: RunPartialSucceeded,
			wantOut:    map[string]any{"text": "offline"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.engine
			if e == nil {
				e = &Engine{}
			}
			res, rec := run1(t, e, RunInput{Workflow: graphYAML(t, toolGraph(tc.node, tc.outs...)), Inputs: map[string]any{"q": "hi"}})
			checkOrder(t, rec)
			if res.Status != tc.wantStatus {
				t.Fatalf("status %s (%q), want %s", res.Status, res.Error, tc.wantStatus)
			}
			if tc.wantErr != "" && !strings.Contains(res.Error, tc.wantErr) {
				t.Errorf("error\n got %q\nwant %q", res.Error, tc.wantErr)
			}
			if tc.wantOut != nil {
				if got, want := fmt.Sprint(plain(res.Outputs)), fmt.Sprint(tc.wantOut); got != want {
					t.Errorf("outputs\n got %s\nwant %s", got, want)
				}
			}
		})
	}
}

func TestToolNodeKnowledgeSearch(t *testing.T) {
	kr := &searchRecorder{}
	src := toolGraph(`{type: tool, title: K, provider_name: knowledge, provider_type: builtin, tool_name: knowledge_search,
      tool_configurations: {dataset_ids: 'd1, d2', top_k: 2}, tool_parameters: {query: {type: variable, value: [start, q]}}}`, "text", "json")
	res, _ := run1(t, &Engine{Retriever: kr}, RunInput{Workflow: graphYAML(t, src), Inputs: map[string]any{"q": "refunds"}, AppID: "app-1", UserID: "u-1"})
	if res.Status != RunSucceeded {
		t.Fatalf("status %s %q", res.Status, res.Error)
	}
	if got := res.Outputs["text"]; got != "Refunds take 5 days.\n\nAsk support for help." {
		t.Errorf("text %q", got)
	}
	if js, _ := res.Outputs["json"].([]any); len(js) != 2 {
		t.Errorf("json %v", res.Outputs["json"])
	}
	if len(kr.reqs) != 1 {
		t.Fatalf("%d searches", len(kr.reqs))
	}
	req := kr.reqs[0]
	cfg := req.Config["multiple_retrieval_config"].(map[string]any)
	if req.Query != "refunds" || fmt.Sprint(req.DatasetIDs) != "[d1 d2]" || req.AppID != "app-1" || req.UserID != "u-1" || cfg["top_k"] != float64(2) {
		t.Errorf("request %+v", req)
	}
}

// TestToolNodeFiles shows a tool's file kept in the file store, then sent
// on by an http-request node in a form-data body.
func TestToolNodeFiles(t *testing.T) {
	fx := newUploadFixture(t)
	srv := echoServer(t)
	src := graph(`
  - id: t
    data: {type: tool, title: Export, provider_type: plugin, provider_id: bowenliang123/md_exporter/md_exporter, provider_name: bowenliang123/md_exporter/md_exporter,
      tool_name: md_to_html, tool_configurations: {output_filename: report}, tool_parameters: {md_text: {type: mixed, value: '# {{#start.q#}}'}}}
  - id: h
    data: {type: http-request, title: Send, method: post, url: '`+srv.URL+`/m', body: {type: form-data, data: [{key: doc, type: file, file: [t, files]}]}}
  - id: end
    data: {type: end, title: End, outputs: [{variable: files, value_selector: [t, files]}, {variable: sent, value_selector: [h, body]}]}`,
		edge("start", "source", "t"), edge("t", "source", "h"), edge("h", "source", "end"))
	e := localEngine()
	e.Files = fx.store
	res, _ := run1(t, e, RunInput{Workflow: graphYAML(t, src), Inputs: map[string]any{"q": "Hi"}, AppID: fx.appID})
	if res.Status != RunSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	list, _ := res.Outputs["files"].([]any)
	if len(list) != 1 {
		t.Fatalf("files %v", res.Outputs["files"])
	}
	f, _ := asFile(list[0])
	if f.Filename != "report.html" || f.TransferMethod != "tool_file" || f.MimeType != "text/html" || f.RelatedID == "" {
		t.Errorf("file %+v", f)
	}
	if row, err := fx.store.Get(context.Background(), f.RelatedID); err != nil || row.Size != f.Size {
		t.Errorf("stored file %+v, %v", row, err)
	}
	if sent := Text(res.Outputs["sent"]); !strings.Contains(sent, `filename=\"report.html\"`) || !strings.Contains(sent, `\u003ch1\u003eHi\u003c/h1\u003e`) {
		t.Errorf("sent %s", sent)
	}
}

func TestTableTools(t *testing.T) {
	fx := newUploadFixture(t)
	csvFile := fx.upload(t, "people.csv", "text/csv", "\xef\xbb\xbfname;age\nAnn;7\n\nBob;9\n")
	book := excelize.NewFile()
	book.SetSheetRow("Sheet1", "A1", &[]any{"city", "", "pop"})
	book.SetSheetRow("Sheet1", "A2", &[]any{"Oslo", "x", 700})
	var buf bytes.Buffer
	if err := book.Write(&buf); err != nil {
		t.Fatal(err)
	}
	xlsx := fx.upload(t, "cities.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", buf.String())
	tests := []struct {
		name, tool, config string
		file               File
		want               string
	}{
		{"csv with a delimiter and a BOM", "csv_to_json", "{delimiter: ';'}", csvFile, `[{"age":"7","name":"Ann"},{"age":"9","name":"Bob"}]`},
		{"the first sheet of a workbook", "excel_to_json", "{}", xlsx, `[{"city":"Oslo","column_2":"x","pop":"700"}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := `{type: tool, title: T, provider_type: builtin, provider_name: table, tool_name: ` + tc.tool + `,
      tool_configurations: ` + tc.config + `, tool_parameters: {file: {type: variable, value: [sys, files]}}}`
			e := localEngine()
			e.Files = fx.store
			res, _ := run1(t, e, RunInput{Workflow: graphYAML(t, toolGraph(node, "text", "rows")), Inputs: map[string]any{"q": "x"}, AppID: fx.appID, Files: []File{tc.file}})
			if res.Status != RunSucceeded {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			if res.Outputs["text"] != tc.want {
				t.Errorf("text %v, want %s", res.Outputs["text"], tc.want)
			}
		})
	}
}
