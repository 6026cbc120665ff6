package handlers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
)

// retrieveCorpus makes a knowledge base with one document of two chunks
// (one per line) and returns its id.
func retrieveCorpus(t *testing.T, s *testServer, name string) string {
	t.Helper()
	ds := kbCreate(t, s, `{"name":"`+name+`","indexing_technique":"high_quality"}`).ID
	rec := s.do(t, request{method: "POST", path: "/v1/datasets/" + ds + "/document/create-by-text", key: s.knowledgeKey,
		body: `{"name":"handbook","text":"Refunds are paid back within five days.\nThe office opens at nine in the morning.",
		"indexing_technique":"high_quality","process_rule":{"mode":"custom","rules":{"segmentation":{"separator":"\\n","max_tokens":200}}}}`})
	expectStatus(t, rec, 200, "")
	var created docCreated
	kbDecode(t, rec, &created)
	docWait(t, s, ds, created.Batch)
	return ds
}

func TestRetrieveAPI(t *testing.T) {
	s := newTestServer(t)
	ds := retrieveCorpus(t, s, "handbook")
	other := kbCreate(t, s, `{"name":"other"}`).ID
	scoped := kbScopedKey(t, s, other)
	path := "/v1/datasets/" + ds + "/retrieve"

	tests := []struct {
		name       string
		key, path  string
		body       string
		wantStatus int
		wantCode   string
		check      func(t *testing.T, body []byte)
	}{
		{name: "stored settings (semantic) find the refund chunk", body: `{"query":"refunds paid back"}`, wantStatus: 200,
			check: func(t *testing.T, body []byte) {
				var r struct {
					Query   struct{ Content string } `json:"query"`
					Records []struct {
						Segment struct {
							Content  string `json:"content"`
							HitCount int    `json:"hit_count"`
							Document struct {
								Name string `json:"name"`
							} `json:"document"`
						} `json:"segment"`
						Score        float64         `json:"score"`
						TsnePosition json.RawMessage `json:"tsne_position"`
					} `json:"records"`
				}
				json.Unmarshal(body, &r)
				if r.Query.Content != "refunds paid back" || len(r.Records) != 2 {
					t.Fatalf("answer %s", body)
				}
				first := r.Records[0]
				if !strings.HasPrefix(first.Segment.Content, "Refunds") || first.Segment.Document.Name != "handbook" ||
					first.Segment.HitCount != 1 || string(first.TsnePosition) != "null" || first.Score <= r.Records[1].Score {
					t.Fatalf("first record %s", body)
				}
			}},
		{name: "full-text with top_k 1", body: `{"query":"office nine","retrieval_model":{"search_method":"full_text_search",
			"reranking_enable":false,"top_k":1,"score_threshold_enabled":false}}`, wantStatus: 200,
			check: func(t *testing.T, body []byte) {
				if strings.Count(string(body), `"segment"`) != 1 || !strings.Contains(string(body), "The office opens") {
					t.Fatalf("answer %s", body)
				}
			}},
		{name: "metadata filter on the document name", body: `{"query":"office","retrieval_model":{"search_method":"keyword_search",
			"reranking_enable":false,"top_k":3,"score_threshold_enabled":false,"metadata_filtering_conditions":{"logical_operator":"and",
			"conditions":[{"name":"document_name","comparison_operator":"is","value":"elsewhere"}]}}}`, wantStatus: 200,
			check: func(t *testing.T, body []byte) {
				if !strings.Contains(string(body), `"records":[]`) {
					t.Fatalf("answer %s", body)
				}
			}},
		{name: "child_chunks is an empty list for plain documents", body: `{"query":"office"}`, wantStatus: 200,
			check: func(t *testing.T, body []byte) {
				if !strings.Contains(string(body), `"child_chunks":[]`) {
					t.Fatalf("answer %s", body)
				}
			}},
		{name: "hit-testing path answers the same search", path: "/v1/datasets/" + ds + "/hit-testing",
			body:       `{"query":"office nine","retrieval_model":{"search_method":"full_text_search","reranking_enable":false,"top_k":1,"score_threshold_enabled":false}}`,
			wantStatus: 200, check: func(t *testing.T, body []byte) {
				if strings.Count(string(body), `"segment"`) != 1 || !strings.Contains(string(body), "The office opens") {
					t.Fatalf("answer %s", body)
				}
			}},
		{name: "hit-testing without a query → 400 invalid_param", path: "/v1/datasets/" + ds + "/hit-testing", body: `{}`,
			wantStatus: 400, wantCode: "invalid_param"},
		{name: "hit-testing with an app key → 401", path: "/v1/datasets/" + ds + "/hit-testing", key: s.appKey,
			body: `{"query":"refunds"}`, wantStatus: 401, wantCode: "unauthorized"},
		{name: "missing query → 400 invalid_param", body: `{}`, wantStatus: 400, wantCode: "invalid_param"},
		{name: "scoped key on another knowledge base → 403 forbidden", key: scoped, body: `{"query":"refunds"}`, wantStatus: 403, wantCode: "forbidden"},
		{name: "unknown knowledge base → 404 not_found", path: "/v1/datasets/00000000-0000-0000-0000-000000000000/retrieve",
			body: `{"query":"refunds"}`, wantStatus: 404, wantCode: "not_found"},
		{name: "app key → 401", key: s.appKey, body: `{"query":"refunds"}`, wantStatus: 401, wantCode: "unauthorized"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key, p := tc.key, tc.path
			if key == "" {
				key = s.knowledgeKey
			}
			if p == "" {
				p = path
			}
			rec := s.do(t, request{method: "POST", path: p, key: key, body: tc.body})
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
			if tc.check != nil {
				tc.check(t, rec.Body.Bytes())
			}
		})
	}
}

const knowledgeChatApp = `app:
  mode: chat
  name: handbook helper
kind: app
version: 0.1.5
model_config:
  model:
    provider: openai
    name: gpt-4o-mini
    mode: chat
    completion_params: {}
  pre_prompt: You answer questions about the handbook.
  retriever_resource:
    enabled: true
  dataset_configs:
    retrieval_model: multiple
    top_k: 2
    datasets:
      datasets:
      - dataset:
          enabled: true
          id: DATASET
`

func TestChatAppCitesKnowledge(t *testing.T) {
	s := newTestServer(t)
	ds := retrieveCorpus(t, s, "handbook")
	ctx := context.Background()
	app, err := apps.NewStore(s.db).Import(ctx, []byte(strings.ReplaceAll(knowledgeChatApp, "DATASET", ds)))
	if err != nil {
		t.Fatal(err)
	}
	key, err := apikeys.NewStore(s.db).CreateAppKey(ctx, app.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: key,
		body: `{"query":"How fast are refunds paid back?","inputs":{},"user":"alice","response_mode":"blocking"}`})
	expectStatus(t, rec, 200, "")
	var res struct {
		Answer         string `json:"answer"`
		ConversationID string `json:"conversation_id"`
		Metadata       struct {
			RetrieverResources []struct {
				Position    int     `json:"position"`
				DatasetID   string  `json:"dataset_id"`
				DatasetName string  `json:"dataset_name"`
				DocumentID  string  `json:"document_id"`
				SegmentID   string  `json:"segment_id"`
				Content     string  `json:"content"`
				Score       float64 `json:"score"`
				HitCount    int     `json:"hit_count"`
			} `json:"retriever_resources"`
		} `json:"metadata"`
	}
	kbDecode(t, rec, &res)
	if !strings.Contains(res.Answer, "Refunds are paid back within five days.") {
		t.Fatalf("answer %q does not quote the knowledge", res.Answer)
	}
	rr := res.Metadata.RetrieverResources
	if len(rr) == 0 || rr[0].Position != 1 || rr[0].DatasetID != ds || rr[0].DatasetName != "handbook" ||
		!strings.HasPrefix(rr[0].Content, "Refunds") || rr[0].SegmentID == "" || rr[0].HitCount != 1 {
		t.Fatalf("retriever_resources %+v", rr)
	}

	// The history keeps the citations.
	rec = s.do(t, request{method: "GET", path: "/v1/messages?user=alice&conversation_id=" + res.ConversationID, key: key})
	expectStatus(t, rec, 200, "")
	if !strings.Contains(rec.Body.String(), `"segment_id":"`+rr[0].SegmentID+`"`) {
		t.Fatalf("history %s", truncate(rec.Body.String()))
	}

	// A streamed answer ends with message_end carrying them too.
	rec = s.do(t, request{method: "POST", path: "/v1/chat-messages", key: key,
		body: `{"query":"When does the office open?","inputs":{},"user":"alice","response_mode":"streaming"}`})
	expectStatus(t, rec, 200, "")
	var end string
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.Contains(line, `"event":"message_end"`) {
			end = line
		}
	}
	if !strings.Contains(end, "The office opens at nine") {
		t.Fatalf("message_end %s", end)
	}
}
