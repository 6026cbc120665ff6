package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"appkb/db"
	"appkb/handlers"
	"appkb/internal/apps/apikeys"
	"appkb/internal/llm"
	"appkb/internal/wiring"
)

// kbDecode reads a JSON answer into v.
func kbDecode(t *testing.T, rec *httptest.ResponseRecorder, v any) {
	t.Helper()
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("answer is not the JSON expected: %v: %s", err, truncate(rec.Body.String()))
	}
}

// kbDataset is the part of a knowledge base these tests look at.
type kbDataset struct {
	ID                     string  `json:"id"`
	Name                   string  `json:"name"`
	Description            string  `json:"description"`
	Permission             string  `json:"permission"`
	IndexingTechnique      *string `json:"indexing_technique"`
	EmbeddingModel         string  `json:"embedding_model"`
	EmbeddingModelProvider string  `json:"embedding_model_provider"`
	EmbeddingAvailable     bool    `json:"embedding_available"`
	DocumentCount          int     `json:"document_count"`
	RetrievalModelDict     struct {
		SearchMethod string   `json:"search_method"`
		TopK         int      `json:"top_k"`
		Threshold    *float64 `json:"score_threshold"`
	} `json:"retrieval_model_dict"`
	Tags []struct {
		ID, Name, Type string
	} `json:"tags"`
	DocMetadata []struct {
		ID, Name, Type string
	} `json:"doc_metadata"`
	BuiltInFieldEnabled bool      `json:"built_in_field_enabled"`
	PartialMemberList   *[]string `json:"partial_member_list"`
}

// kbCreate makes a knowledge base through the API and returns it.
func kbCreate(t *testing.T, s *testServer, body string) kbDataset {
	t.Helper()
	rec := s.do(t, request{method: "POST", path: "/v1/datasets", key: s.knowledgeKey, body: body})
	expectStatus(t, rec, 200, "")
	var ds kbDataset
	kbDecode(t, rec, &ds)
	return ds
}

// kbScopedKey makes a knowledge key limited to the given knowledge bases.
func kbScopedKey(t *testing.T, s *testServer, datasets ...string) string {
	t.Helper()
	key, err := apikeys.NewStore(s.db).CreateKnowledgeKey(context.Background(), datasets, "")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestDatasetsAPI(t *testing.T) {
	s := newTestServer(t)
	docs := kbCreate(t, s, `{"name":"Docs","description":"all the docs","indexing_technique":"high_quality",
		"retrieval_model":{"search_method":"hybrid_search","reranking_enable":false,"top_k":4,"score_threshold_enabled":true,"score_threshold":0.3,
		"reranking_mode":"weighted_score","weights":{"weight_type":"customized","vector_setting":{"vector_weight":0.7,"embedding_provider_name":"appkb","embedding_model_name":"builtin"},"keyword_setting":{"keyword_weight":0.3}}},
		"summary_index_setting":{"enable":false}}`)
	if docs.RetrievalModelDict.SearchMethod != "hybrid_search" || docs.RetrievalModelDict.TopK != 4 || docs.EmbeddingModel != "builtin-2" {
		t.Fatalf("created %+v", docs)
	}
	other := kbCreate(t, s, `{"name":"Other","indexing_technique":null,"description":null}`)
	path := "/v1/datasets/" + docs.ID

	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantCode   string
		check      func(t *testing.T, rec *httptest.ResponseRecorder)
	}{
		{name: "create with defaults", req: request{method: "POST", path: "/v1/datasets", body: `{"name":"Plain"}`}, wantStatus: 200,
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				var ds kbDataset
				kbDecode(t, rec, &ds)
				if ds.EmbeddingModelProvider != "appkb" || ds.EmbeddingModel != "builtin-2" || !ds.EmbeddingAvailable ||
					ds.RetrievalModelDict.SearchMethod != "semantic_search" || ds.RetrievalModelDict.TopK != 3 || ds.IndexingTechnique != nil {
					t.Errorf("defaults %+v", ds)
				}
				for _, key := range []string{`"data_source_type":"upload_file"`, `"doc_form":"text_model"`, `"tags":[]`, `"doc_metadata":[]`,
					`"score_threshold":0`, `"author_name":"demo"`, `"indexing_technique":null`} {
					if !strings.Contains(rec.Body.String(), key) {
						t.Errorf("answer lacks %s", key)
					}
				}
			}},
		{name: "create with a taken name → 409", req: request{method: "POST", path: "/v1/datasets", body: `{"name":"Docs"}`},
			wantStatus: 409, wantCode: "dataset_name_duplicate"},
		{name: "create without a name → 400", req: request{method: "POST", path: "/v1/datasets", body: `{}`}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "create with a 41-character name → 400", req: request{method: "POST", path: "/v1/datasets",
			body: `{"name":"` + strings.Repeat("n", 41) + `"}`}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "create with a blank name → 400", req: request{method: "POST", path: "/v1/datasets", body: `{"name":"  "}`}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "create an external knowledge base → 400", req: request{method: "POST", path: "/v1/datasets",
			body: `{"name":"Ext","provider":"external","external_knowledge_api_id":"x","external_knowledge_id":"y"}`}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "create with top_k 0 → 400", req: request{method: "POST", path: "/v1/datasets",
			body: `{"name":"K","retrieval_model":{"search_method":"semantic_search","reranking_enable":false,"top_k":0,"score_threshold_enabled":false}}`},
			wantStatus: 400, wantCode: "invalid_param"},
		{name: "get", req: request{method: "GET", path: path}, wantStatus: 200,
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				var ds kbDataset
				kbDecode(t, rec, &ds)
				if ds.ID != docs.ID || ds.Description != "all the docs" || *ds.RetrievalModelDict.Threshold != 0.3 {
					t.Errorf("got %+v", ds)
				}
			}},
		{name: "get an unknown knowledge base → 404", req: request{method: "GET", path: "/v1/datasets/" + datasetA}, wantStatus: 404, wantCode: "not_found"},
		{name: "get with an id that is not a uuid → 404", req: request{method: "GET", path: "/v1/datasets/nope"}, wantStatus: 404, wantCode: "not_found"},
		{name: "patch name and permission", req: request{method: "PATCH", path: path,
			body: `{"name":"Docs v2","permission":"partial_members","partial_member_list":[{"user_id":"u1"}],"description":null}`}, wantStatus: 200,
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				var ds kbDataset
				kbDecode(t, rec, &ds)
				if ds.Name != "Docs v2" || ds.Permission != "partial_members" || ds.Description != "all the docs" ||
					ds.PartialMemberList == nil || strings.Join(*ds.PartialMemberList, ",") != "u1" {
					t.Errorf("patched %+v", ds)
				}
			}},
		{name: "patch the retrieval model and technique", req: request{method: "PATCH", path: path,
			body: `{"indexing_technique":"economy","retrieval_model":{"search_method":"keyword_search","reranking_enable":false,"top_k":2,"score_threshold_enabled":false,
			"metadata_filtering_conditions":{"logical_operator":"and","conditions":[{"name":"author","comparison_operator":"in","value":["a","b"]}]}}}`}, wantStatus: 200,
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				var ds kbDataset
				kbDecode(t, rec, &ds)
				if *ds.IndexingTechnique != "economy" || ds.RetrievalModelDict.SearchMethod != "keyword_search" || ds.RetrievalModelDict.TopK != 2 {
					t.Errorf("patched %+v", ds)
				}
				if !strings.Contains(rec.Body.String(), `"value":["a","b"]`) {
					t.Errorf("filter not kept: %s", rec.Body)
				}
			}},
		{name: "patch to another knowledge base's name → 400", req: request{method: "PATCH", path: path, body: `{"name":"Other"}`},
			wantStatus: 400, wantCode: "invalid_param"},
		{name: "patch an unknown knowledge base → 404", req: request{method: "PATCH", path: "/v1/datasets/" + datasetA, body: `{"name":"X"}`},
			wantStatus: 404, wantCode: "not_found"},
		{name: "patch with an unknown permission → 400", req: request{method: "PATCH", path: path, body: `{"permission":"world"}`},
			wantStatus: 400, wantCode: "invalid_param"},
		{name: "delete", req: request{method: "DELETE", path: "/v1/datasets/" + other.ID}, wantStatus: 204},
		{name: "delete again → 404", req: request{method: "DELETE", path: "/v1/datasets/" + other.ID}, wantStatus: 404, wantCode: "not_found"},
		{name: "get after delete → 404", req: request{method: "GET", path: "/v1/datasets/" + other.ID}, wantStatus: 404, wantCode: "not_found"},
		{name: "the name of a deleted knowledge base is free", req: request{method: "POST", path: "/v1/datasets", body: `{"name":"Other"}`}, wantStatus: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.key = s.knowledgeKey
			rec := s.do(t, tc.req)
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
			if tc.check != nil {
				tc.check(t, rec)
			}
		})
	}
}

func TestListDatasetsAPI(t *testing.T) {
	s := newTestServer(t)
	var ids []string
	for _, name := range []string{"Alpha docs", "Beta docs", "Gamma notes", "Delta notes", "Epsilon"} {
		ids = append(ids, kbCreate(t, s, `{"name":"`+name+`"}`).ID)
	}
	rec := s.do(t, request{method: "POST", path: "/v1/datasets/tags", key: s.knowledgeKey, body: `{"name":"green"}`})
	expectStatus(t, rec, 200, "")
	var tag struct{ ID string }
	kbDecode(t, rec, &tag)
	rec = s.do(t, request{method: "POST", path: "/v1/datasets/tags/binding", key: s.knowledgeKey,
		body: fmt.Sprintf(`{"tag_ids":[%q],"target_id":%q}`, tag.ID, ids[0])})
	expectStatus(t, rec, 204, "")
	rec = s.do(t, request{method: "POST", path: "/v1/datasets/tags/binding", key: s.knowledgeKey,
		body: fmt.Sprintf(`{"tag_ids":[%q],"target_id":%q}`, tag.ID, ids[2])})
	expectStatus(t, rec, 204, "")
	scoped := kbScopedKey(t, s, ids[1], ids[2])

	tests := []struct {
		name       string
		key        string
		query      string
		wantStatus int
		wantNames  string
		wantTotal  int
		wantMore   bool
		wantLimit  int
		wantPage   int
	}{
		{name: "defaults", query: "", wantNames: "Epsilon,Delta notes,Gamma notes,Beta docs,Alpha docs", wantTotal: 5, wantLimit: 20, wantPage: 1},
		{name: "a page of two", query: "?page=2&limit=2", wantNames: "Gamma notes,Beta docs", wantTotal: 5, wantMore: true, wantLimit: 2, wantPage: 2},
		{name: "the last page", query: "?page=3&limit=2", wantNames: "Alpha docs", wantTotal: 5, wantLimit: 2, wantPage: 3},
		{name: "keyword", query: "?keyword=NOTES", wantNames: "Delta notes,Gamma notes", wantTotal: 2, wantLimit: 20, wantPage: 1},
		{name: "tag filter", query: "?tag_ids=" + tag.ID, wantNames: "Gamma notes,Alpha docs", wantTotal: 2, wantLimit: 20, wantPage: 1},
		{name: "tag filter and keyword", query: "?tag_ids=" + tag.ID + "&keyword=docs", wantNames: "Alpha docs", wantTotal: 1, wantLimit: 20, wantPage: 1},
		{name: "unknown tag", query: "?tag_ids=" + datasetA, wantNames: "", wantTotal: 0, wantLimit: 20, wantPage: 1},
		{name: "include_all changes nothing", query: "?include_all=true", wantNames: "Epsilon,Delta notes,Gamma notes,Beta docs,Alpha docs", wantTotal: 5, wantLimit: 20, wantPage: 1},
		// As in Dify, a key bound to some knowledge bases may not list them all.
		{name: "a scoped key may not list → 403", key: scoped, wantStatus: 403},
		{name: "a scoped key with a tag filter → 403", key: scoped, query: "?tag_ids=" + tag.ID, wantStatus: 403},
		{name: "limit 0 → 400", query: "?limit=0", wantStatus: 400},
		{name: "limit 101 → 400", query: "?limit=101", wantStatus: 400},
		{name: "page 0 → 400", query: "?page=0", wantStatus: 400},
		{name: "page that is not a number → 400", query: "?page=first", wantStatus: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.key
			if key == "" {
				key = s.knowledgeKey
			}
			rec := s.do(t, request{method: "GET", path: "/v1/datasets" + tc.query, key: key})
			if tc.wantStatus == 403 {
				expectStatus(t, rec, 403, "forbidden")
				return
			}
			if tc.wantStatus != 0 {
				expectStatus(t, rec, tc.wantStatus, "invalid_param")
				return
			}
			expectStatus(t, rec, 200, "")
			var page struct {
				Data    []kbDataset `json:"data"`
				HasMore bool        `json:"has_more"`
				Limit   int         `json:"limit"`
				Total   int         `json:"total"`
				Page    int         `json:"page"`
			}
			kbDecode(t, rec, &page)
			var names []string
			for _, d := range page.Data {
				names = append(names, d.Name)
			}
			if got := strings.Join(names, ","); got != tc.wantNames {
				t.Errorf("names %q, want %q", got, tc.wantNames)
			}
			if page.Total != tc.wantTotal || page.HasMore != tc.wantMore || page.Limit != tc.wantLimit || page.Page != tc.wantPage {
				t.Errorf("total %d more %v limit %d page %d", page.Total, page.HasMore, page.Limit, page.Page)
			}
			if page.Data == nil {
				t.Error("data must be a list, not null")
			}
		})
	}
}

func TestScopedKnowledgeKeyAPI(t *testing.T) {
	s := newTestServer(t)
	mine := kbCreate(t, s, `{"name":"Mine"}`)
	theirs := kbCreate(t, s, `{"name":"Theirs"}`)
	rec := s.do(t, request{method: "POST", path: "/v1/datasets/tags", key: s.knowledgeKey, body: `{"name":"shared"}`})
	expectStatus(t, rec, 200, "")
	var tag struct{ ID string }
	kbDecode(t, rec, &tag)
	scoped := kbScopedKey(t, s, mine.ID)
	bind := func(target string) string { return fmt.Sprintf(`{"tag_ids":[%q],"target_id":%q}`, tag.ID, target) }

	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantCode   string
	}{
		{"get its knowledge base", request{method: "GET", path: "/v1/datasets/" + mine.ID}, 200, ""},
		{"update its knowledge base", request{method: "PATCH", path: "/v1/datasets/" + mine.ID, body: `{"description":"x"}`}, 200, ""},
		{"get another → 403", request{method: "GET", path: "/v1/datasets/" + theirs.ID}, 403, "forbidden"},
		{"update another → 403", request{method: "PATCH", path: "/v1/datasets/" + theirs.ID, body: `{"name":"x"}`}, 403, "forbidden"},
		{"delete another → 403", request{method: "DELETE", path: "/v1/datasets/" + theirs.ID}, 403, "forbidden"},
		{"metadata of another → 403", request{method: "GET", path: "/v1/datasets/" + theirs.ID + "/metadata"}, 403, "forbidden"},
		{"tags of another → 403", request{method: "GET", path: "/v1/datasets/" + theirs.ID + "/tags"}, 403, "forbidden"},
		{"create a knowledge base → 403", request{method: "POST", path: "/v1/datasets", body: `{"name":"New"}`}, 403, "forbidden"},
		{"create a tag → 403", request{method: "POST", path: "/v1/datasets/tags", body: `{"name":"mine"}`}, 403, "forbidden"},
		{"rename a tag → 403", request{method: "PATCH", path: "/v1/datasets/tags", body: fmt.Sprintf(`{"tag_id":%q,"name":"x"}`, tag.ID)}, 403, "forbidden"},
		{"delete a tag → 403", request{method: "DELETE", path: "/v1/datasets/tags", body: fmt.Sprintf(`{"tag_id":%q}`, tag.ID)}, 403, "forbidden"},
		{"bind a tag to another → 403", request{method: "POST", path: "/v1/datasets/tags/binding", body: bind(theirs.ID)}, 403, "forbidden"},
		{"unbind a tag from another → 403", request{method: "POST", path: "/v1/datasets/tags/unbinding", body: bind(theirs.ID)}, 403, "forbidden"},
		// As in Dify, every operation that names no knowledge base in its
		// path is for workspace keys only.
		{"bind a tag to its own → 403", request{method: "POST", path: "/v1/datasets/tags/binding", body: bind(mine.ID)}, 403, "forbidden"},
		{"list tags → 403", request{method: "GET", path: "/v1/datasets/tags"}, 403, "forbidden"},
		{"list knowledge bases → 403", request{method: "GET", path: "/v1/datasets"}, 403, "forbidden"},
		{"list models → 403", request{method: "GET", path: "/v1/workspaces/current/models/model-types/rerank"}, 403, "forbidden"},
		{"upload a pipeline file → 403", request{method: "POST", path: "/v1/datasets/pipeline/file-upload", body: `{}`}, 403, "forbidden"},
		{"list documents of its own", request{method: "GET", path: "/v1/datasets/" + mine.ID + "/documents"}, 200, ""},
		{"list documents of another → 403", request{method: "GET", path: "/v1/datasets/" + theirs.ID + "/documents"}, 403, "forbidden"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.key = scoped
			expectStatus(t, s.do(t, tc.req), tc.wantStatus, tc.wantCode)
		})
	}

	t.Run("the workspace key still binds and counts", func(t *testing.T) {
		expectStatus(t, s.do(t, request{method: "POST", path: "/v1/datasets/tags/binding", key: s.knowledgeKey, body: bind(theirs.ID)}), 204, "")
		rec := s.do(t, request{method: "GET", path: "/v1/datasets/tags", key: s.knowledgeKey})
		expectStatus(t, rec, 200, "")
		var tags []struct {
			BindingCount string `json:"binding_count"`
		}
		kbDecode(t, rec, &tags)
		if len(tags) != 1 || tags[0].BindingCount != "1" {
			t.Errorf("counts %+v, want 1", tags)
		}
	})
}

func TestTagsAPI(t *testing.T) {
	s := newTestServer(t)
	ds := kbCreate(t, s, `{"name":"Tagged"}`)
	other := kbCreate(t, s, `{"name":"Also tagged"}`)
	newTag := func(name string) string {
		rec := s.do(t, request{method: "POST", path: "/v1/datasets/tags", key: s.knowledgeKey, body: `{"name":"` + name + `"}`})
		expectStatus(t, rec, 200, "")
		var tag struct {
			ID           string `json:"id"`
			Type         string `json:"type"`
			BindingCount string `json:"binding_count"`
		}
		kbDecode(t, rec, &tag)
		if tag.Type != "knowledge" || tag.BindingCount != "0" {
			t.Errorf("new tag %+v", tag)
		}
		return tag.ID
	}
	red, blue := newTag("red"), newTag("blue")

	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantCode   string
		wantBody   []string // parts the answer must contain
	}{
		{name: "create with a taken name → 400", req: request{method: "POST", path: "/v1/datasets/tags", body: `{"name":"red"}`}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "create with an empty name → 400", req: request{method: "POST", path: "/v1/datasets/tags", body: `{"name":""}`}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "create with a 51-character name → 400", req: request{method: "POST", path: "/v1/datasets/tags",
			body: `{"name":"` + strings.Repeat("t", 51) + `"}`}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "bind two tags, one unknown", req: request{method: "POST", path: "/v1/datasets/tags/binding",
			body: fmt.Sprintf(`{"tag_ids":[%q,%q,%q],"target_id":%q}`, red, blue, datasetB, ds.ID)}, wantStatus: 204},
		{name: "bind again", req: request{method: "POST", path: "/v1/datasets/tags/binding",
			body: fmt.Sprintf(`{"tag_ids":[%q],"target_id":%q}`, red, other.ID)}, wantStatus: 204},
		{name: "bind to an unknown knowledge base → 404", req: request{method: "POST", path: "/v1/datasets/tags/binding",
			body: fmt.Sprintf(`{"tag_ids":[%q],"target_id":%q}`, red, datasetA)}, wantStatus: 404, wantCode: "not_found"},
		{name: "bind without tags → 400", req: request{method: "POST", path: "/v1/datasets/tags/binding",
			body: fmt.Sprintf(`{"tag_ids":[],"target_id":%q}`, ds.ID)}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "list with counts", req: request{method: "GET", path: "/v1/datasets/tags"}, wantStatus: 200,
			wantBody: []string{"blue:1", "red:2"}},
		{name: "tags of a knowledge base", req: request{method: "GET", path: "/v1/datasets/" + ds.ID + "/tags"}, wantStatus: 200,
			wantBody: []string{`"total":2`, `"name":"blue"`, `"name":"red"`}},
		{name: "tags inside the knowledge base", req: request{method: "GET", path: "/v1/datasets/" + ds.ID}, wantStatus: 200,
			wantBody: []string{`"tags":[{"id":"` + blue + `","name":"blue","type":"knowledge"},{"id":"` + red + `","name":"red","type":"knowledge"}]`}},
		{name: "tags of an unknown knowledge base → 404", req: request{method: "GET", path: "/v1/datasets/" + datasetA + "/tags"}, wantStatus: 404, wantCode: "not_found"},
		{name: "rename", req: request{method: "PATCH", path: "/v1/datasets/tags", body: fmt.Sprintf(`{"tag_id":%q,"name":"crimson"}`, red)}, wantStatus: 200,
			wantBody: []string{`"name":"crimson"`, `"binding_count":"2"`}},
		{name: "rename to a taken name → 400", req: request{method: "PATCH", path: "/v1/datasets/tags", body: fmt.Sprintf(`{"tag_id":%q,"name":"blue"}`, red)},
			wantStatus: 400, wantCode: "invalid_param"},
		{name: "rename an unknown tag → 404", req: request{method: "PATCH", path: "/v1/datasets/tags", body: `{"tag_id":"nope","name":"x"}`},
			wantStatus: 404, wantCode: "not_found"},
		{name: "unbind with the old tag_id", req: request{method: "POST", path: "/v1/datasets/tags/unbinding",
			body: fmt.Sprintf(`{"tag_id":%q,"target_id":%q}`, blue, ds.ID)}, wantStatus: 204},
		{name: "unbind with tag_ids", req: request{method: "POST", path: "/v1/datasets/tags/unbinding",
			body: fmt.Sprintf(`{"tag_ids":[%q],"target_id":%q}`, red, other.ID)}, wantStatus: 204},
		{name: "unbind naming no tag → 400", req: request{method: "POST", path: "/v1/datasets/tags/unbinding",
			body: fmt.Sprintf(`{"target_id":%q}`, ds.ID)}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "unbind from an unknown knowledge base → 404", req: request{method: "POST", path: "/v1/datasets/tags/unbinding",
			body: fmt.Sprintf(`{"tag_ids":[%q],"target_id":%q}`, red, datasetA)}, wantStatus: 404, wantCode: "not_found"},
		{name: "counts after unbinding", req: request{method: "GET", path: "/v1/datasets/tags"}, wantStatus: 200,
			wantBody: []string{"blue:0", "crimson:1"}},
		{name: "delete", req: request{method: "DELETE", path: "/v1/datasets/tags", body: fmt.Sprintf(`{"tag_id":%q}`, red)}, wantStatus: 204},
		{name: "delete again → 404", req: request{method: "DELETE", path: "/v1/datasets/tags", body: fmt.Sprintf(`{"tag_id":%q}`, red)},
			wantStatus: 404, wantCode: "not_found"},
		{name: "a deleted tag leaves its knowledge bases", req: request{method: "GET", path: "/v1/datasets/" + ds.ID + "/tags"}, wantStatus: 200,
			wantBody: []string{`{"data":[],"total":0}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.key = s.knowledgeKey
			rec := s.do(t, tc.req)
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
			body := rec.Body.String()
			if tc.req.method == "GET" && tc.req.path == "/v1/datasets/tags" {
				body = kbTagCounts(t, rec)
			}
			for _, part := range tc.wantBody {
				if !strings.Contains(body, part) {
					t.Errorf("answer lacks %s: %s", part, body)
				}
			}
		})
	}
}

// kbTagCounts sums up a tag list as "name:count" items, newest tag first.
func kbTagCounts(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var tags []struct {
		Name         string `json:"name"`
		Type         string `json:"type"`
		BindingCount string `json:"binding_count"`
	}
	kbDecode(t, rec, &tags)
	var out []string
	for _, tag := range tags {
		if tag.Type != "knowledge" {
			t.Errorf("tag type %q", tag.Type)
		}
		out = append(out, tag.Name+":"+tag.BindingCount)
	}
	return strings.Join(out, ",")
}

func TestMetadataAPI(t *testing.T) {
	s := newTestServer(t)
	ds := kbCreate(t, s, `{"name":"With metadata"}`)
	other := kbCreate(t, s, `{"name":"Elsewhere"}`)
	base := "/v1/datasets/" + ds.ID + "/metadata"
	newField := func(datasetID, name, typ string) string {
		rec := s.do(t, request{method: "POST", path: "/v1/datasets/" + datasetID + "/metadata", key: s.knowledgeKey,
			body: fmt.Sprintf(`{"name":%q,"type":%q}`, name, typ)})
		expectStatus(t, rec, 201, "")
		var f struct{ ID, Name, Type string }
		kbDecode(t, rec, &f)
		if f.Name != name || f.Type != typ {
			t.Errorf("new field %+v", f)
		}
		return f.ID
	}
	author := newField(ds.ID, "author", "string")
	newField(ds.ID, "pages", "number")
	foreign := newField(other.ID, "author", "string")

	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantCode   string
		wantBody   []string
	}{
		{name: "a taken name → 400", req: request{method: "POST", path: base, body: `{"name":"author","type":"time"}`}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "a built-in name → 400", req: request{method: "POST", path: base, body: `{"name":"document_name","type":"string"}`}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "a 256-character name → 400", req: request{method: "POST", path: base, body: `{"name":"` + strings.Repeat("m", 256) + `","type":"string"}`},
			wantStatus: 400, wantCode: "invalid_param"},
		{name: "an unknown type → 400", req: request{method: "POST", path: base, body: `{"name":"flag","type":"bool"}`}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "an unknown knowledge base → 404", req: request{method: "POST", path: "/v1/datasets/" + datasetA + "/metadata", body: `{"name":"x","type":"string"}`},
			wantStatus: 404, wantCode: "not_found"},
		{name: "list", req: request{method: "GET", path: base}, wantStatus: 200,
			wantBody: []string{"author:string:0,pages:number:0 builtin=false"}},
		{name: "rename", req: request{method: "PATCH", path: base + "/" + author, body: `{"name":"writer"}`}, wantStatus: 200,
			wantBody: []string{`"name":"writer"`, `"type":"string"`}},
		{name: "rename to a taken name → 400", req: request{method: "PATCH", path: base + "/" + author, body: `{"name":"pages"}`}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "rename to a built-in name → 400", req: request{method: "PATCH", path: base + "/" + author, body: `{"name":"uploader"}`}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "rename another knowledge base's field → 404", req: request{method: "PATCH", path: base + "/" + foreign, body: `{"name":"x"}`}, wantStatus: 404, wantCode: "not_found"},
		{name: "rename an unknown field → 404", req: request{method: "PATCH", path: base + "/" + datasetA, body: `{"name":"x"}`}, wantStatus: 404, wantCode: "not_found"},
		{name: "built-in fields", req: request{method: "GET", path: base + "/built-in"}, wantStatus: 200,
			wantBody: []string{`{"fields":[{"name":"document_name","type":"string"},{"name":"uploader","type":"string"},{"name":"upload_date","type":"time"},{"name":"last_update_date","type":"time"},{"name":"source","type":"string"}]}`}},
		{name: "built-in fields of an unknown knowledge base → 404", req: request{method: "GET", path: "/v1/datasets/" + datasetA + "/metadata/built-in"}, wantStatus: 404, wantCode: "not_found"},
		{name: "enable built-in fields", req: request{method: "POST", path: base + "/built-in/enable"}, wantStatus: 200, wantBody: []string{`{"result":"success"}`}},
		{name: "the list says they are on", req: request{method: "GET", path: base}, wantStatus: 200, wantBody: []string{"builtin=true"}},
		{name: "the knowledge base lists them", req: request{method: "GET", path: "/v1/datasets/" + ds.ID}, wantStatus: 200,
			wantBody: []string{`"built_in_field_enabled":true`, `{"id":"built-in","name":"source","type":"string"}`, `"name":"writer"`}},
		{name: "an unknown action → 400", req: request{method: "POST", path: base + "/built-in/toggle"}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "disable built-in fields", req: request{method: "POST", path: base + "/built-in/disable"}, wantStatus: 200, wantBody: []string{`{"result":"success"}`}},
		{name: "enable on an unknown knowledge base → 404", req: request{method: "POST", path: "/v1/datasets/" + datasetA + "/metadata/built-in/enable"}, wantStatus: 404, wantCode: "not_found"},
		{name: "delete another knowledge base's field → 404", req: request{method: "DELETE", path: base + "/" + foreign}, wantStatus: 404, wantCode: "not_found"},
		{name: "delete", req: request{method: "DELETE", path: base + "/" + author}, wantStatus: 204},
		{name: "delete again → 404", req: request{method: "DELETE", path: base + "/" + author}, wantStatus: 404, wantCode: "not_found"},
		{name: "the list after deleting", req: request{method: "GET", path: base}, wantStatus: 200,
			wantBody: []string{"pages:number:0 builtin=false"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.key = s.knowledgeKey
			rec := s.do(t, tc.req)
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
			body := rec.Body.String()
			if tc.req.method == "GET" && tc.req.path == base {
				body = kbMetadataSummary(t, rec)
			}
			for _, part := range tc.wantBody {
				if !strings.Contains(body, part) {
					t.Errorf("answer lacks %s: %s", part, body)
				}
			}
		})
	}
}

// kbMetadataSummary sums up a metadata field list as
// "name:type:count,… builtin=bool".
func kbMetadataSummary(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var list struct {
		DocMetadata []struct {
			ID    string `json:"id"`
			Name  string `json:"name"`
			Type  string `json:"type"`
			Count int    `json:"count"`
		} `json:"doc_metadata"`
		BuiltInFieldEnabled bool `json:"built_in_field_enabled"`
	}
	kbDecode(t, rec, &list)
	var out []string
	for _, f := range list.DocMetadata {
		if f.ID == "" {
			t.Errorf("field %s has no id", f.Name)
		}
		out = append(out, fmt.Sprintf("%s:%s:%d", f.Name, f.Type, f.Count))
	}
	return fmt.Sprintf("%s builtin=%v", strings.Join(out, ","), list.BuiltInFieldEnabled)
}

func TestDeleteDatasetAPICascades(t *testing.T) {
	s := newTestServer(t)
	ds := kbCreate(t, s, `{"name":"Doomed"}`)
	rec := s.do(t, request{method: "POST", path: "/v1/datasets/tags", key: s.knowledgeKey, body: `{"name":"t"}`})
	var tag struct{ ID string }
	kbDecode(t, rec, &tag)
	expectStatus(t, s.do(t, request{method: "POST", path: "/v1/datasets/tags/binding", key: s.knowledgeKey,
		body: fmt.Sprintf(`{"tag_ids":[%q],"target_id":%q}`, tag.ID, ds.ID)}), 204, "")
	expectStatus(t, s.do(t, request{method: "POST", path: "/v1/datasets/" + ds.ID + "/metadata", key: s.knowledgeKey,
		body: `{"name":"author","type":"string"}`}), 201, "")
	scoped := kbScopedKey(t, s, ds.ID)

	expectStatus(t, s.do(t, request{method: "DELETE", path: "/v1/datasets/" + ds.ID, key: scoped}), 204, "")
	for table, want := range map[string]int64{"dataset_tag_bindings": 0, "dataset_metadata_fields": 0, "dataset_tags": 1} {
		var n int64
		if err := s.db.Table(table).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s has %d rows, want %d", table, n, want)
		}
	}
	rec = s.do(t, request{method: "GET", path: "/v1/datasets/tags", key: s.knowledgeKey})
	if !strings.Contains(rec.Body.String(), `"binding_count":"0"`) {
		t.Errorf("tag still counts the deleted knowledge base: %s", rec.Body)
	}
	// The scoped key stays limited to the deleted id instead of widening to
	// the whole workspace.
	expectStatus(t, s.do(t, request{method: "GET", path: "/v1/datasets", key: scoped}), 403, "forbidden")
	expectStatus(t, s.do(t, request{method: "GET", path: "/v1/datasets/" + ds.ID, key: scoped}), 404, "")
	expectStatus(t, s.do(t, request{method: "POST", path: "/v1/datasets", key: scoped, body: `{"name":"Sneaky"}`}), 403, "forbidden")
}

func TestAvailableModelsAPI(t *testing.T) {
	s := newTestServer(t)
	configured, err := llm.Parse([]byte(`
providers:
  - name: ollama
    base_url: http://127.0.0.1:11434/v1
    defaults: {embedding: nomic-embed-text, chat: llama3.2}
  - name: jina
    base_url: http://127.0.0.1:9/v1
    api_key_env: JINA_KEY
    defaults: {rerank: jina-reranker-v2}
`), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	_, _, specYAML := loadContract(t)
	gdb := db.OpenTemp(t)
	e, err := wiring.NewServer(handlers.Deps{DB: gdb, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SpecYAML: specYAML, Models: configured, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	key, err := apikeys.NewStore(gdb).CreateKnowledgeKey(context.Background(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	withConfig := &testServer{e: e, db: gdb, knowledgeKey: key}

	type model struct {
		Model     string `json:"model"`
		ModelType string `json:"model_type"`
		Status    string `json:"status"`
	}
	type provider struct {
		Provider string  `json:"provider"`
		Status   string  `json:"status"`
		Models   []model `json:"models"`
	}
	tests := []struct {
		name      string
		server    *testServer
		modelType string
		want      string // provider:model:status, comma-separated
	}{
		{"builtin text embedding", s, "text-embedding", "appkb:builtin-2:active"},
		{"builtin rerank", s, "rerank", "appkb:builtin:active"},
		{"builtin chat", s, "llm", "appkb:builtin:active"},
		{"no speech models", s, "tts", ""},
		{"configured embedding", withConfig, "text-embedding", "appkb:builtin-2:active,ollama:nomic-embed-text:active"},
		{"configured rerank without its key", withConfig, "rerank", "appkb:builtin:active,jina:jina-reranker-v2:no-configure"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.server.do(t, request{method: "GET", path: "/v1/workspaces/current/models/model-types/" + tc.modelType, key: tc.server.knowledgeKey})
			expectStatus(t, rec, 200, "")
			var out struct{ Data []provider }
			kbDecode(t, rec, &out)
			var got []string
			for _, p := range out.Data {
				for _, m := range p.Models {
					if m.ModelType != tc.modelType {
						t.Errorf("model type %q", m.ModelType)
					}
					got = append(got, p.Provider+":"+m.Model+":"+m.Status)
				}
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("got %s, want %s", strings.Join(got, ","), tc.want)
			}
		})
	}
	t.Run("unknown model type → 400", func(t *testing.T) {
		rec := s.do(t, request{method: "GET", path: "/v1/workspaces/current/models/model-types/vision", key: s.knowledgeKey})
		expectStatus(t, rec, 400, "invalid_param")
	})
	t.Run("an app key → 401", func(t *testing.T) {
		rec := s.do(t, request{method: "GET", path: "/v1/workspaces/current/models/model-types/rerank", key: s.appKey})
		expectStatus(t, rec, 401, "unauthorized")
	})
}
