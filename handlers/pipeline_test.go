package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"appkb/db"
	"appkb/handlers"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/cli/demo"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/pipeline"
	"appkb/internal/wiring"
)

// newPipelineServer is newTestServer whose network guard lets pipelines
// fetch from 127.0.0.1 (where the test's web server listens).
func newPipelineServer(t *testing.T) *testServer {
	t.Helper()
	_, _, specYAML := loadContract(t)
	gdb := db.OpenTemp(t)
	keys, err := demo.Ensure(context.Background(), apps.NewStore(gdb), apikeys.NewStore(gdb))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dataDir := t.TempDir()
	e, err := wiring.NewServer(handlers.Deps{DB: gdb, Logger: log, SpecYAML: specYAML, DataDir: dataDir,
		FetchAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	if err != nil {
		t.Fatal(err)
	}
	stop := documents.Start(context.Background(), documents.Config{DB: gdb, DataDir: dataDir, Poll: 20 * time.Millisecond, Logger: log})
	t.Cleanup(stop)
	return &testServer{e: e, db: gdb, appID: keys.AppID, appKey: keys.AppKey, knowledgeKey: keys.KnowledgeKey}
}

// streamEvents returns the data: payloads of an event stream.
func streamEvents(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(body, "\n") {
		payload, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(payload), &ev); err != nil {
			t.Fatalf("frame %q: %v", payload, err)
		}
		out = append(out, ev)
	}
	return out
}

func eventNames(evs []map[string]any) string {
	names := make([]string, len(evs))
	for i, ev := range evs {
		names[i], _ = ev["event"].(string)
	}
	return strings.Join(names, " ")
}

func TestKnowledgePipelineAPI(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/guide":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, `<html><head><title>Parking guide</title></head><body><p>Visitors park on level three of the east garage.</p></body></html>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer web.Close()

	s := newPipelineServer(t)
	ds := kbCreate(t, s, `{"name":"pipeline"}`).ID
	base := "/v1/datasets/" + ds + "/pipeline"

	t.Run("data source nodes", func(t *testing.T) {
		rec := s.do(t, request{method: "GET", path: base + "/datasource-plugins", key: s.knowledgeKey})
		expectStatus(t, rec, 200, "")
		for _, want := range []string{`"node_id":"datasource_local_file"`, `"datasource_type":"local_file"`, `"node_id":"datasource_web_page"`, `"datasource_type":"website_crawl"`} {
			if !strings.Contains(rec.Body.String(), want) {
				t.Errorf("list lacks %s: %s", want, rec.Body)
			}
		}
	})

	var fileID string
	t.Run("upload a file", func(t *testing.T) {
		body, ct := multipartForm(t, fileField("lunch.txt", "text/plain", []byte("The canteen serves lunch from noon until two.")))
		rec := s.do(t, request{method: "POST", path: "/v1/datasets/pipeline/file-upload", key: s.knowledgeKey, body: body, contentType: ct})
		expectStatus(t, rec, 201, "")
		var f struct{ ID, Name string }
		kbDecode(t, rec, &f)
		if f.ID == "" || f.Name != "lunch.txt" {
			t.Fatalf("upload %s", rec.Body)
		}
		fileID = f.ID
	})

	search := func(t *testing.T, query, want string) {
		t.Helper()
		rec := s.do(t, request{method: "POST", path: "/v1/datasets/" + ds + "/retrieve", key: s.knowledgeKey,
			body: `{"query":"` + query + `","retrieval_model":{"search_method":"keyword_search","reranking_enable":false,"top_k":3,"score_threshold_enabled":false}}`})
		expectStatus(t, rec, 200, "")
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("search for %q does not find %q: %s", query, want, truncate(rec.Body.String()))
		}
	}

	t.Run("blocking run over an uploaded file indexes a document", func(t *testing.T) {
		rec := s.do(t, request{method: "POST", path: base + "/run", key: s.knowledgeKey, body: `{"inputs":{},"datasource_type":"local_file",
			"datasource_info_list":[{"reference":"` + fileID + `"}],"start_node_id":"datasource_local_file","is_published":true,"response_mode":"blocking"}`})
		expectStatus(t, rec, 200, "")
		var res struct {
			WorkflowRunID string `json:"workflow_run_id"`
			Data          struct {
				Status  string `json:"status"`
				Outputs struct {
					Batch     string `json:"batch"`
					Documents []struct {
						ID, Name string
					} `json:"documents"`
				} `json:"outputs"`
			} `json:"data"`
		}
		kbDecode(t, rec, &res)
		if res.WorkflowRunID == "" || res.Data.Status != "succeeded" || len(res.Data.Outputs.Documents) != 1 || res.Data.Outputs.Documents[0].Name != "lunch.txt" {
			t.Fatalf("result %s", rec.Body)
		}
		docWait(t, s, ds, res.Data.Outputs.Batch)
		search(t, "canteen lunch", "The canteen serves lunch")
	})

	// Dify's own clients name the uploaded file related_id; a source with
	// neither name is refused by the description.
	t.Run("related_id names the uploaded file too", func(t *testing.T) {
		rec := s.do(t, request{method: "POST", path: base + "/run", key: s.knowledgeKey, body: `{"inputs":{},"datasource_type":"local_file",
			"datasource_info_list":[{"related_id":"` + fileID + `","name":"lunch-2.txt"}],"start_node_id":"datasource_local_file","is_published":true,"response_mode":"blocking"}`})
		expectStatus(t, rec, 200, "")
		var res struct {
			Data struct {
				Status  string `json:"status"`
				Outputs struct {
					Batch     string                  `json:"batch"`
					Documents []struct{ Name string } `json:"documents"`
				} `json:"outputs"`
			} `json:"data"`
		}
		kbDecode(t, rec, &res)
		if res.Data.Status != "succeeded" || len(res.Data.Outputs.Documents) != 1 || res.Data.Outputs.Documents[0].Name != "lunch-2.txt" {
			t.Fatalf("result %s", rec.Body)
		}
		docWait(t, s, ds, res.Data.Outputs.Batch)
		rec = s.do(t, request{method: "POST", path: base + "/run", key: s.knowledgeKey, body: `{"inputs":{},"datasource_type":"local_file",
			"datasource_info_list":[{"name":"x.txt"}],"start_node_id":"datasource_local_file","is_published":true,"response_mode":"blocking"}`})
		expectStatus(t, rec, 400, "invalid_param")
	})

	t.Run("streamed run over a web page", func(t *testing.T) {
		rec := s.do(t, request{method: "POST", path: base + "/run", key: s.knowledgeKey, body: `{"inputs":{},"datasource_type":"website_crawl",
			"datasource_info_list":[{"url":"` + web.URL + `/guide"}],"start_node_id":"datasource_web_page","is_published":true,"response_mode":"streaming"}`})
		expectStatus(t, rec, 200, "")
		evs := streamEvents(t, rec.Body.String())
		want := "workflow_started node_started node_finished node_started node_finished workflow_finished"
		if got := eventNames(evs); got != want {
			t.Fatalf("events %s, want %s", got, want)
		}
		last := evs[len(evs)-1]["data"].(map[string]any)
		outputs, _ := last["outputs"].(map[string]any)
		if last["status"] != "succeeded" || outputs == nil {
			t.Fatalf("finished %v", last)
		}
		docs := outputs["documents"].([]any)
		if docs[0].(map[string]any)["name"] != "Parking guide.html" {
			t.Errorf("documents %v", docs)
		}
		docWait(t, s, ds, outputs["batch"].(string))
		search(t, "visitors park garage", "east garage")
	})

	t.Run("data source node fetches a page", func(t *testing.T) {
		rec := s.do(t, request{method: "POST", path: base + "/datasource/nodes/datasource_web_page/run", key: s.knowledgeKey,
			body: `{"inputs":{"url":"` + web.URL + `/guide"},"datasource_type":"website_crawl","is_published":true}`})
		expectStatus(t, rec, 200, "")
		evs := streamEvents(t, rec.Body.String())
		if got := eventNames(evs); got != "datasource_processing datasource_completed" {
			t.Fatalf("events %s", got)
		}
		if !strings.Contains(rec.Body.String(), "level three of the east garage") {
			t.Errorf("completed without the page: %s", rec.Body)
		}
	})

	t.Run("data source node reports a missing page", func(t *testing.T) {
		rec := s.do(t, request{method: "POST", path: base + "/datasource/nodes/datasource_web_page/run", key: s.knowledgeKey,
			body: `{"inputs":{"url":"` + web.URL + `/missing"},"datasource_type":"website_crawl","is_published":true}`})
		expectStatus(t, rec, 200, "")
		if got := eventNames(streamEvents(t, rec.Body.String())); got != "datasource_processing datasource_error" {
			t.Fatalf("events %s", got)
		}
	})

	errs := []struct {
		name, method, path, body string
		key                      string
		wantStatus               int
		wantCode                 string
	}{
		{"unknown start node → 400", "POST", base + "/run", `{"inputs":{},"datasource_type":"local_file","datasource_info_list":[{"reference":"x"}],"start_node_id":"nope","is_published":true,"response_mode":"streaming"}`, "", 400, "invalid_param"},
		{"online documents need a plugin → 400", "POST", base + "/run", `{"inputs":{},"datasource_type":"online_document","datasource_info_list":[{"workspace_id":"w","page":{"page_id":"p","type":"page"}}],"start_node_id":"datasource_local_file","is_published":true,"response_mode":"blocking"}`, "", 400, "invalid_param"},
		{"unknown uploaded file → 404", "POST", base + "/run", `{"inputs":{},"datasource_type":"local_file","datasource_info_list":[{"reference":"3f8c1c9e-0000-4000-8000-000000000000"}],"start_node_id":"datasource_local_file","is_published":true,"response_mode":"blocking"}`, "", 404, "file_not_found"},
		{"page that is not there → 400", "POST", base + "/run", `{"inputs":{},"datasource_type":"website_crawl","datasource_info_list":[{"url":"` + web.URL + `/missing"}],"start_node_id":"datasource_web_page","is_published":true,"response_mode":"blocking"}`, "", 400, "invalid_param"},
		{"unknown data source node → 400", "POST", base + "/datasource/nodes/nope/run", `{"inputs":{},"datasource_type":"website_crawl","is_published":true}`, "", 400, "invalid_param"},
		{"unknown knowledge base → 404", "GET", "/v1/datasets/3f8c1c9e-0000-4000-8000-000000000000/pipeline/datasource-plugins", "", "", 404, "not_found"},
		{"app key → 401", "GET", base + "/datasource-plugins", "", s.appKey, 401, "unauthorized"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.key
			if key == "" {
				key = s.knowledgeKey
			}
			rec := s.do(t, request{method: tc.method, path: tc.path, key: key, body: tc.body})
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
		})
	}
}

// TestPipelineRefusesPrivateAddresses checks that web pages are fetched
// through the network guard: without an allowance, loopback is refused.
func TestPipelineRefusesPrivateAddresses(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret") }))
	defer web.Close()
	s := newTestServer(t)
	ds := kbCreate(t, s, `{"name":"guarded"}`).ID
	rec := s.do(t, request{method: "POST", path: "/v1/datasets/" + ds + "/pipeline/run", key: s.knowledgeKey, body: `{"inputs":{},"datasource_type":"website_crawl",
		"datasource_info_list":[{"url":"` + web.URL + `"}],"start_node_id":"datasource_web_page","is_published":true,"response_mode":"blocking"}`})
	expectStatus(t, rec, 400, "invalid_param")
	if !strings.Contains(rec.Body.String(), "not allowed") {
		t.Errorf("body %s", rec.Body)
	}
}

// importedPipeline is a knowledge pipeline export: a file source whose
// text a template reshapes before the knowledge index takes it, and an
// extra web source that leads into a node appkb cannot run.
const importedPipeline = `kind: rag_pipeline
version: 0.1.0
rag_pipeline:
  name: notes
workflow:
  graph:
    nodes:
    - id: src
      data: {type: datasource, title: File, provider_type: local_file, plugin_id: langgenius/file, provider_name: file}
    - id: extract
      data: {type: document-extractor, title: Extract, variable_selector: [src, file], is_array_file: false}
    - id: shape
      data:
        type: template-transform
        title: Shape
        variables:
        - {variable: body, value_selector: [extract, text]}
        - {variable: label, value_selector: [rag, shared, label]}
        template: "{{ label }}: {{ body }}"
    - id: index
      data: {type: knowledge-index, title: Knowledge, chunk_structure: text_model, indexing_technique: economy, index_chunk_variable_selector: [shape, output]}
    - id: web
      data: {type: datasource, title: Web, provider_type: website_crawl, plugin_id: langgenius/firecrawl, provider_name: firecrawl}
    - id: magic
      data: {type: knowledge-magic, title: Magic step}
    edges:
    - {source: src, target: extract}
    - {source: extract, target: shape}
    - {source: shape, target: index}
    - {source: web, target: magic}
    - {source: magic, target: index}
  rag_pipeline_variables:
  - {variable: label, belong_to_node_id: shared, type: text-input, label: Label, required: true}
  - {variable: depth, belong_to_node_id: web, type: number, label: Depth, required: false}
`

func TestImportedKnowledgePipeline(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "A page about bicycles.")
	}))
	defer web.Close()
	s := newPipelineServer(t)
	ds := kbCreate(t, s, `{"name":"imported"}`).ID
	base := "/v1/datasets/" + ds + "/pipeline"

	svc := pipeline.NewService(s.db, nil, t.TempDir(), nil, nil)
	imp, err := svc.Import(context.Background(), datasets.Actor{KeyID: "test"}, ds, []byte(importedPipeline))
	if err != nil {
		t.Fatal(err)
	}
	if imp.Name != "notes" || len(imp.Datasources) != 2 || strings.Join(imp.Unsupported, ",") != "magic (knowledge-magic)" {
		t.Fatalf("import %+v", imp)
	}
	if _, err := svc.Import(context.Background(), datasets.Actor{KeyID: "test"}, ds, []byte("kind: app\napp: {}\n")); err == nil {
		t.Fatal("an app file was accepted as a pipeline")
	}

	rec := s.do(t, request{method: "GET", path: base + "/datasource-plugins", key: s.knowledgeKey})
	expectStatus(t, rec, 200, "")
	if !strings.Contains(rec.Body.String(), `"node_id":"src"`) || strings.Contains(rec.Body.String(), "datasource_local_file") ||
		!strings.Contains(rec.Body.String(), `"variable":"depth"`) {
		t.Fatalf("data sources of the imported pipeline: %s", rec.Body)
	}

	body, ct := multipartForm(t, fileField("bikes.txt", "text/plain", []byte("Bicycles are parked in the courtyard rack.")))
	rec = s.do(t, request{method: "POST", path: "/v1/datasets/pipeline/file-upload", key: s.knowledgeKey, body: body, contentType: ct})
	expectStatus(t, rec, 201, "")
	var f struct{ ID string }
	kbDecode(t, rec, &f)

	t.Run("supported nodes run and index the shaped text", func(t *testing.T) {
		rec := s.do(t, request{method: "POST", path: base + "/run", key: s.knowledgeKey, body: `{"inputs":{},"datasource_type":"local_file",
			"datasource_info_list":[{"reference":"` + f.ID + `"}],"start_node_id":"src","is_published":true,"response_mode":"blocking"}`})
		expectStatus(t, rec, 400, "invalid_param")
		if !strings.Contains(rec.Body.String(), "label") {
			t.Errorf("a missing pipeline variable is not named: %s", rec.Body)
		}
		rec = s.do(t, request{method: "POST", path: base + "/run", key: s.knowledgeKey, body: `{"inputs":{"label":"Imported note"},"datasource_type":"local_file",
			"datasource_info_list":[{"reference":"` + f.ID + `"}],"start_node_id":"src","is_published":true,"response_mode":"streaming"}`})
		expectStatus(t, rec, 200, "")
		evs := streamEvents(t, rec.Body.String())
		want := "workflow_started node_started node_finished node_started node_finished node_started node_finished node_started node_finished workflow_finished"
		if got := eventNames(evs); got != want {
			t.Fatalf("events %s\n%s", got, rec.Body)
		}
		last := evs[len(evs)-1]["data"].(map[string]any)
		if last["status"] != "succeeded" {
			t.Fatalf("finished %v", last)
		}
		batch := last["outputs"].(map[string]any)["batch"].(string)
		docWait(t, s, ds, batch)
		rec = s.do(t, request{method: "POST", path: "/v1/datasets/" + ds + "/retrieve", key: s.knowledgeKey,
			body: `{"query":"courtyard rack","retrieval_model":{"search_method":"keyword_search","reranking_enable":false,"top_k":3,"score_threshold_enabled":false}}`})
		expectStatus(t, rec, 200, "")
		if !strings.Contains(rec.Body.String(), "Imported note: Bicycles are parked") {
			t.Errorf("the template's text is not what was indexed: %s", truncate(rec.Body.String()))
		}
	})

	t.Run("a run reaching an unsupported node fails naming it", func(t *testing.T) {
		rec := s.do(t, request{method: "POST", path: base + "/run", key: s.knowledgeKey, body: `{"inputs":{"label":"x"},"datasource_type":"website_crawl",
			"datasource_info_list":[{"url":"` + web.URL + `/bikes"}],"start_node_id":"web","is_published":true,"response_mode":"blocking"}`})
		expectStatus(t, rec, 400, "invalid_param")
		if !strings.Contains(rec.Body.String(), "knowledge-magic") || !strings.Contains(rec.Body.String(), "Magic step") {
			t.Errorf("the error does not name the node: %s", rec.Body)
		}
		rec = s.do(t, request{method: "POST", path: base + "/run", key: s.knowledgeKey, body: `{"inputs":{"label":"x"},"datasource_type":"website_crawl",
			"datasource_info_list":[{"url":"` + web.URL + `/bikes"}],"start_node_id":"web","is_published":true,"response_mode":"streaming"}`})
		expectStatus(t, rec, 200, "")
		evs := streamEvents(t, rec.Body.String())
		var finished map[string]any
		for _, ev := range evs {
			if ev["event"] == "workflow_finished" {
				finished = ev["data"].(map[string]any)
			}
		}
		if finished == nil || finished["status"] != "failed" || !strings.Contains(finished["error"].(string), "Magic step") {
			t.Errorf("streamed failure %s", rec.Body)
		}
	})
}
