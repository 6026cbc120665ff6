package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/conversation/endusers"
	"appkb/models"
)

// The conversation operations read what the chat runtime stores, so these
// tests store conversations and messages directly, as the runtime would.

// cvWorld is a test server with two users' conversations in the demo chat
// app and a chatflow whose conversation variables cover several types.
type cvWorld struct {
	*testServer
	t *testing.T

	chatflowID, chatflowKey     string
	completionID, completionKey string

	clock time.Time
}

// cvChatflowVariables replaces the conversation variables of the example
// chatflow.
const cvChatflowVariables = `  conversation_variables:
  - id: 22222222-0000-4000-8000-000000000001
    name: topic
    value_type: string
    value: start
    description: The current topic.
  - id: 22222222-0000-4000-8000-000000000002
    name: turns
    value_type: number
    value: 3
  - id: 22222222-0000-4000-8000-000000000003
    name: profile
    value_type: object
    value: {tier: gold}
  - id: 22222222-0000-4000-8000-000000000004
    name: tags
    value_type: array[string]
    value: [a, b]
`

const (
	cvVarTopic   = "22222222-0000-4000-8000-000000000001"
	cvVarTurns   = "22222222-0000-4000-8000-000000000002"
	cvVarProfile = "22222222-0000-4000-8000-000000000003"
	cvVarTags    = "22222222-0000-4000-8000-000000000004"
)

func newCVWorld(t *testing.T) *cvWorld {
	t.Helper()
	w := &cvWorld{testServer: newTestServer(t), t: t, clock: time.Date(2025, 5, 1, 8, 0, 0, 0, time.UTC)}
	text, err := os.ReadFile("../testdata/apps/advanced-chat.yml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(text)
	start, end := strings.Index(s, "  conversation_variables:\n"), strings.Index(s, "  environment_variables:\n")
	if start < 0 || end < start {
		t.Fatal("advanced-chat.yml no longer has the expected layout")
	}
	ctx := context.Background()
	flow, err := apps.NewStore(w.db).Import(ctx, []byte(s[:start]+cvChatflowVariables+s[end:]))
	if err != nil {
		t.Fatal(err)
	}
	w.chatflowID = flow.ID
	if w.chatflowKey, err = apikeys.NewStore(w.db).CreateAppKey(ctx, flow.ID, ""); err != nil {
		t.Fatal(err)
	}
	w.completionID, w.completionKey = w.importApp(t, "completion.yml")
	return w
}

func (w *cvWorld) endUser(appID, user string) string {
	w.t.Helper()
	eu, err := endusers.NewStore(w.db).Resolve(context.Background(), appID, user)
	if err != nil {
		w.t.Fatal(err)
	}
	return eu.ID
}

func (w *cvWorld) tick() time.Time {
	w.clock = w.clock.Add(time.Minute)
	return w.clock
}

// conversation stores a conversation of user in app.
func (w *cvWorld) conversation(appID, user, name string) *models.Conversation {
	w.t.Helper()
	at := w.tick()
	c := &models.Conversation{AppID: appID, EndUserID: w.endUser(appID, user), Mode: "chat", Name: name,
		Inputs: `{"city":"Paris"}`, Introduction: "Welcome!", Status: "normal", CreatedAt: at, UpdatedAt: at}
	if err := w.db.Create(c).Error; err != nil {
		w.t.Fatal(err)
	}
	return c
}

// message stores one exchange in conv (nil: a text generator message).
func (w *cvWorld) message(appID, user string, conv *models.Conversation, query string) *models.Message {
	w.t.Helper()
	at := w.tick()
	m := &models.Message{AppID: appID, EndUserID: w.endUser(appID, user), TaskID: "3c7d1f0e-0000-4000-8000-000000000000",
		Query: query, Answer: "Answer to " + query, Inputs: `{"city":"Paris"}`, Status: "normal",
		MessageTokens: 10, AnswerTokens: 5, TotalTokens: 15, ProviderResponseLatency: 0.25,
		MessageFiles: "[]", RetrieverResources: "[]", AgentThoughts: "[]", CreatedAt: at, UpdatedAt: at}
	if conv != nil {
		m.ConversationID = &conv.ID
	}
	if err := w.db.Create(m).Error; err != nil {
		w.t.Fatal(err)
	}
	return m
}

// call serves one request, checks status and code, and decodes a JSON body.
func (w *cvWorld) call(t *testing.T, method, path, key, body string, wantStatus int, wantCode string) map[string]any {
	t.Helper()
	rec := w.do(t, request{method: method, path: path, key: key, body: body})
	expectStatus(t, rec, wantStatus, wantCode)
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("body is not JSON: %s", rec.Body)
		}
	}
	return out
}

// dataIDs lists data[].id of a list answer.
func dataIDs(body map[string]any) []string {
	var out []string
	list, _ := body["data"].([]any)
	for _, item := range list {
		id, _ := at(item, "id").(string)
		out = append(out, id)
	}
	return out
}

func sameList(t *testing.T, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ids\n got %v\nwant %v", got, want)
	}
}

func TestConversationListAPI(t *testing.T) {
	w := newCVWorld(t)
	c1 := w.conversation(w.appID, "alice", "first")
	c2 := w.conversation(w.appID, "alice", "second")
	c3 := w.conversation(w.appID, "alice", "third")
	bobs := w.conversation(w.appID, "bob", "bob's")
	// c1 is the most recently active one.
	if err := w.db.Model(c1).Update("updated_at", w.tick()).Error; err != nil {
		t.Fatal(err)
	}
	list := "/v1/conversations?user=alice"

	tests := []struct {
		name       string
		path, key  string
		wantStatus int
		wantCode   string
		check      func(t *testing.T, body map[string]any)
	}{
		{"most recently updated first by default", list, w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), c1.ID, c3.ID, c2.ID)
			if b["has_more"] != false || b["limit"] != 20.0 {
				t.Errorf("has_more %v limit %v", b["has_more"], b["limit"])
			}
			if at(b, "data", 0, "name") != "first" || at(b, "data", 0, "inputs", "city") != "Paris" ||
				at(b, "data", 0, "introduction") != "Welcome!" || at(b, "data", 0, "status") != "normal" ||
				at(b, "data", 0, "created_at") != float64(c1.CreatedAt.Unix()) {
				t.Errorf("item: %v", at(b, "data", 0))
			}
		}},
		{"a page of limit with more after it", list + "&limit=2", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), c1.ID, c3.ID)
			if b["has_more"] != true {
				t.Error("has_more should be true")
			}
		}},
		{"the page after last_id", list + "&limit=2&last_id=" + c3.ID, w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), c2.ID)
			if b["has_more"] != false {
				t.Error("has_more should be false")
			}
		}},
		{"exactly limit conversations: no more", list + "&limit=3", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			if b["has_more"] != false || len(dataIDs(b)) != 3 {
				t.Errorf("has_more %v, %d items", b["has_more"], len(dataIDs(b)))
			}
		}},
		{"oldest first", list + "&sort_by=created_at", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), c1.ID, c2.ID, c3.ID)
		}},
		{"newest first", list + "&sort_by=-created_at", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), c3.ID, c2.ID, c1.ID)
		}},
		{"least recently updated first", list + "&sort_by=updated_at", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), c2.ID, c3.ID, c1.ID)
		}},
		{"another user sees only their own", "/v1/conversations?user=bob", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), bobs.ID)
		}},
		{"a user who never called → empty list", "/v1/conversations?user=nobody", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b))
			if d, ok := b["data"].([]any); !ok || len(d) != 0 {
				t.Errorf("data = %v, want []", b["data"])
			}
		}},
		{"no user → empty list", "/v1/conversations", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b))
		}},
		{"the same user in another app → empty list", list, w.chatflowKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b))
		}},
		{"unknown last_id → 404", list + "&last_id=nope", w.appKey, 404, "not_found", nil},
		{"another user's conversation as last_id → 404", list + "&last_id=" + bobs.ID, w.appKey, 404, "not_found", nil},
		{"unknown sort_by → 400", list + "&sort_by=name", w.appKey, 400, "invalid_param", nil},
		{"limit 101 → 400", list + "&limit=101", w.appKey, 400, "invalid_param", nil},
		{"text generator → 400 not_chat_app", list, w.completionKey, 400, "not_chat_app", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := w.call(t, "GET", tc.path, tc.key, "", tc.wantStatus, tc.wantCode)
			if tc.check != nil {
				tc.check(t, body)
			}
		})
	}
}

func TestConversationHistoryAPI(t *testing.T) {
	w := newCVWorld(t)
	conv := w.conversation(w.appID, "alice", "chat")
	var msgs []*models.Message
	for i := range 5 {
		msgs = append(msgs, w.message(w.appID, "alice", conv, fmt.Sprintf("question %d", i)))
	}
	rich := msgs[4]
	err := w.db.Model(rich).Updates(map[string]any{
		"message_files":       `[{"id":"7f6e5d4c-0000-4000-8000-000000000001","filename":"a.png","type":"image","url":"https://example.com/a.png","mime_type":"image/png","size":12,"transfer_method":"remote_url","belongs_to":"user","upload_file_id":null}]`,
		"retriever_resources": `[{"id":"7f6e5d4c-0000-4000-8000-000000000002","message_id":"` + rich.ID + `","position":1,"dataset_id":"7f6e5d4c-0000-4000-8000-000000000003","dataset_name":"Manual","document_id":"7f6e5d4c-0000-4000-8000-000000000004","document_name":"manual.pdf","data_source_type":"upload_file","segment_id":"7f6e5d4c-0000-4000-8000-000000000005","score":0.87,"hit_count":1,"word_count":30,"segment_position":2,"index_node_hash":"abc","content":"Reset by holding the button.","summary":null,"created_at":1700000000}]`,
		"agent_thoughts":      `[{"id":"7f6e5d4c-0000-4000-8000-000000000006","chain_id":null,"message_id":"` + rich.ID + `","position":1,"thought":"Look it up.","tool":"search","tool_labels":{"search":{"en_US":"Search"}},"tool_input":"{\"q\":\"reset\"}","observation":"found","files":[],"created_at":1700000001}]`,
		"total_price":         "0.000150",
		"currency":            "USD",
	}).Error
	if err != nil {
		t.Fatal(err)
	}
	w.call(t, "POST", "/v1/messages/"+rich.ID+"/feedbacks", w.appKey, `{"rating":"like","user":"alice"}`, 200, "")
	other := w.conversation(w.appID, "alice", "other")
	otherMsg := w.message(w.appID, "alice", other, "elsewhere")
	w.endUser(w.appID, "bob")

	history := func(q string) string { return "/v1/messages?user=alice&conversation_id=" + conv.ID + q }
	ids := func(from, to int) []string {
		var out []string
		for _, m := range msgs[from:to] {
			out = append(out, m.ID)
		}
		return out
	}
	tests := []struct {
		name       string
		path, key  string
		wantStatus int
		wantCode   string
		check      func(t *testing.T, body map[string]any)
	}{
		{"the latest messages, oldest first", history("&limit=2"), w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), ids(3, 5)...)
			if b["has_more"] != true || b["limit"] != 2.0 {
				t.Errorf("has_more %v limit %v", b["has_more"], b["limit"])
			}
		}},
		{"first_id pages back", history("&limit=2&first_id=" + msgs[3].ID), w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), ids(1, 3)...)
			if b["has_more"] != true {
				t.Error("has_more should be true")
			}
		}},
		{"the oldest page has no more", history("&limit=2&first_id=" + msgs[1].ID), w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), ids(0, 1)...)
			if b["has_more"] != false {
				t.Error("has_more should be false")
			}
		}},
		{"exactly limit messages: no more", history("&limit=5"), w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), ids(0, 5)...)
			if b["has_more"] != false {
				t.Error("has_more should be false")
			}
		}},
		{"each item carries feedback, files, resources and thoughts", history("&limit=1"), w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			item := at(b, "data", 0)
			checks := []struct {
				path []any
				want any
			}{
				{[]any{"query"}, "question 4"},
				{[]any{"answer"}, "Answer to question 4"},
				{[]any{"conversation_id"}, conv.ID},
				{[]any{"inputs", "city"}, "Paris"},
				{[]any{"status"}, "normal"},
				{[]any{"feedback", "rating"}, "like"},
				{[]any{"message_files", 0, "filename"}, "a.png"},
				{[]any{"retriever_resources", 0, "document_name"}, "manual.pdf"},
				{[]any{"agent_thoughts", 0, "tool_labels", "search", "en_US"}, "Search"},
				{[]any{"total_price"}, "0.000150"},
				{[]any{"currency"}, "USD"},
				{[]any{"total_tokens"}, 15.0},
				{[]any{"provider_response_latency"}, 0.25},
				{[]any{"created_at"}, float64(rich.CreatedAt.Unix())},
			}
			for _, c := range checks {
				if got := at(item, c.path...); got != c.want {
					t.Errorf("%v = %v, want %v", c.path, got, c.want)
				}
			}
		}},
		{"a message without extras has empty lists and null feedback", history("&limit=5"), w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			item := at(b, "data", 0).(map[string]any)
			for _, k := range []string{"message_files", "retriever_resources", "agent_thoughts"} {
				if l, ok := item[k].([]any); !ok || len(l) != 0 {
					t.Errorf("%s = %v, want []", k, item[k])
				}
			}
			if f, present := item["feedback"]; present && f != nil {
				t.Errorf("feedback = %v", f)
			}
		}},
		{"another user's conversation → 404", "/v1/messages?user=bob&conversation_id=" + conv.ID, w.appKey, 404, "not_found", nil},
		{"a user who never called → 404", "/v1/messages?user=nobody&conversation_id=" + conv.ID, w.appKey, 404, "not_found", nil},
		{"no user → 404", "/v1/messages?conversation_id=" + conv.ID, w.appKey, 404, "not_found", nil},
		{"unknown conversation → 404", "/v1/messages?user=alice&conversation_id=nope", w.appKey, 404, "not_found", nil},
		{"unknown first_id → 404", history("&first_id=nope"), w.appKey, 404, "not_found", nil},
		{"first_id of another conversation → 404", history("&first_id=" + otherMsg.ID), w.appKey, 404, "not_found", nil},
		{"conversation_id is required → 400", "/v1/messages?user=alice", w.appKey, 400, "invalid_param", nil},
		{"text generator → 400 not_chat_app", history(""), w.completionKey, 400, "not_chat_app", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := w.call(t, "GET", tc.path, tc.key, "", tc.wantStatus, tc.wantCode)
			if tc.check != nil {
				tc.check(t, body)
			}
		})
	}
}

func TestRenameAndDeleteConversationAPI(t *testing.T) {
	w := newCVWorld(t)
	conv := w.conversation(w.appID, "alice", "old name")
	empty := w.conversation(w.appID, "alice", "no messages")
	m := w.message(w.appID, "alice", conv, "How do I reset the router to factory settings today please?")
	w.call(t, "POST", "/v1/messages/"+m.ID+"/feedbacks", w.appKey, `{"rating":"like","user":"alice"}`, 200, "")
	w.endUser(w.appID, "bob")
	rename := "/v1/conversations/" + conv.ID + "/name"

	steps := []struct {
		name       string
		method     string
		path, body string
		key        string
		wantStatus int
		wantCode   string
		wantName   string
	}{
		{"rename", "POST", rename, `{"name":"Router","user":"alice"}`, w.appKey, 200, "", "Router"},
		{"generated name from the first query", "POST", rename, `{"auto_generate":true,"user":"alice"}`, w.appKey, 200, "", "How do I reset the router to factory"},
		{"generate without messages → 400", "POST", "/v1/conversations/" + empty.ID + "/name", `{"auto_generate":true,"user":"alice"}`, w.appKey, 400, "invalid_param", ""},
		{"no name and no auto_generate → 400", "POST", rename, `{"user":"alice"}`, w.appKey, 400, "invalid_param", ""},
		{"null fields read as absent → 400", "POST", rename, `{"name":null,"auto_generate":null,"user":"alice"}`, w.appKey, 400, "invalid_param", ""},
		{"another user cannot rename it → 404", "POST", rename, `{"name":"mine","user":"bob"}`, w.appKey, 404, "not_found", ""},
		{"unknown conversation → 404", "POST", "/v1/conversations/nope/name", `{"name":"x","user":"alice"}`, w.appKey, 404, "not_found", ""},
		{"rename in a text generator → 400", "POST", rename, `{"name":"x","user":"alice"}`, w.completionKey, 400, "not_chat_app", ""},
		{"another user cannot delete it → 404", "DELETE", "/v1/conversations/" + conv.ID, `{"user":"bob"}`, w.appKey, 404, "not_found", ""},
		{"delete without a user → 404", "DELETE", "/v1/conversations/" + conv.ID, ``, w.appKey, 404, "not_found", ""},
		{"delete", "DELETE", "/v1/conversations/" + conv.ID, `{"user":"alice"}`, w.appKey, 204, "", ""},
		{"deleted: gone from the list", "GET", "/v1/conversations?user=alice", "", w.appKey, 200, "", ""},
		{"deleted: history → 404", "GET", "/v1/messages?user=alice&conversation_id=" + conv.ID, "", w.appKey, 404, "not_found", ""},
		{"deleted: feedback → 404", "POST", "/v1/messages/" + m.ID + "/feedbacks", `{"rating":"like","user":"alice"}`, w.appKey, 404, "not_found", ""},
		{"delete again → 404", "DELETE", "/v1/conversations/" + conv.ID, `{"user":"alice"}`, w.appKey, 404, "not_found", ""},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			rec := w.do(t, request{method: st.method, path: st.path, key: st.key, body: st.body})
			expectStatus(t, rec, st.wantStatus, st.wantCode)
			var body map[string]any
			if rec.Code == 200 {
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
					t.Fatal(err)
				}
			}
			if st.wantName != "" && (body["name"] != st.wantName || body["id"] != conv.ID) {
				t.Errorf("answer %v, want name %q", body, st.wantName)
			}
			if st.name == "deleted: gone from the list" {
				sameList(t, dataIDs(body), empty.ID)
			}
			if st.wantStatus == 204 && rec.Body.Len() != 0 {
				t.Errorf("204 with a body: %s", rec.Body)
			}
		})
	}
}

func TestConversationVariablesAPI(t *testing.T) {
	w := newCVWorld(t)
	conv := w.conversation(w.chatflowID, "alice", "flow")
	chatConv := w.conversation(w.appID, "alice", "plain chat")
	w.endUser(w.chatflowID, "bob")
	vars := "/v1/conversations/" + conv.ID + "/variables"
	put := func(id string) string { return vars + "/" + id }

	tests := []struct {
		name       string
		method     string
		path, body string
		key        string
		wantStatus int
		wantCode   string
		check      func(t *testing.T, body map[string]any)
	}{
		{"the declared variables, seeded on first read", "GET", vars + "?user=alice", "", w.chatflowKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), cvVarTopic, cvVarTurns, cvVarProfile, cvVarTags)
			want := []string{"start", "3", `{"tier":"gold"}`, `["a","b"]`}
			for i, v := range want {
				if got := at(b, "data", i, "value"); got != v {
					t.Errorf("value %d = %v, want %s", i, got, v)
				}
			}
			if at(b, "data", 0, "value_type") != "string" || at(b, "data", 0, "description") != "The current topic." {
				t.Errorf("first: %v", at(b, "data", 0))
			}
		}},
		{"paging with last_id", "GET", vars + "?user=alice&limit=2&last_id=" + cvVarTurns, "", w.chatflowKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), cvVarProfile, cvVarTags)
			if b["has_more"] != false || b["limit"] != 2.0 {
				t.Errorf("has_more %v limit %v", b["has_more"], b["limit"])
			}
		}},
		{"a full page with more after it", "GET", vars + "?user=alice&limit=3", "", w.chatflowKey, 200, "", func(t *testing.T, b map[string]any) {
			if b["has_more"] != true {
				t.Error("has_more should be true")
			}
		}},
		{"filtered by name", "GET", vars + "?user=alice&variable_name=tags", "", w.chatflowKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b), cvVarTags)
		}},
		{"last_id that is no variable → 400", "GET", vars + "?user=alice&last_id=nope", "", w.chatflowKey, 400, "invalid_param", nil},
		{"another user → 404", "GET", vars + "?user=bob", "", w.chatflowKey, 404, "not_found", nil},
		{"a chatbot conversation has none", "GET", "/v1/conversations/" + chatConv.ID + "/variables?user=alice", "", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			sameList(t, dataIDs(b))
		}},
		{"text generator → 400 not_chat_app", "GET", vars + "?user=alice", "", w.completionKey, 400, "not_chat_app", nil},

		{"set a string", "PUT", put(cvVarTopic), `{"value":"billing","user":"alice"}`, w.chatflowKey, 200, "", func(t *testing.T, b map[string]any) {
			if b["value"] != "billing" || b["id"] != cvVarTopic || b["name"] != "topic" {
				t.Errorf("answer %v", b)
			}
		}},
		{"set an object", "PUT", put(cvVarProfile), `{"value":{"tier":"silver"},"user":"alice"}`, w.chatflowKey, 200, "", func(t *testing.T, b map[string]any) {
			if b["value"] != `{"tier":"silver"}` {
				t.Errorf("value %v", b["value"])
			}
		}},
		{"set a number", "PUT", put(cvVarTurns), `{"value":7,"user":"alice"}`, w.chatflowKey, 200, "", nil},
		{"the list shows the new values", "GET", vars + "?user=alice&limit=2", "", w.chatflowKey, 200, "", func(t *testing.T, b map[string]any) {
			if at(b, "data", 0, "value") != "billing" || at(b, "data", 1, "value") != "7" {
				t.Errorf("values %v, %v", at(b, "data", 0, "value"), at(b, "data", 1, "value"))
			}
		}},
		{"a number for a string → 400", "PUT", put(cvVarTopic), `{"value":5,"user":"alice"}`, w.chatflowKey, 400, "bad_request", nil},
		{"a string for a number → 400", "PUT", put(cvVarTurns), `{"value":"5","user":"alice"}`, w.chatflowKey, 400, "bad_request", nil},
		{"a number in a string array → 400", "PUT", put(cvVarTags), `{"value":["a",1],"user":"alice"}`, w.chatflowKey, 400, "bad_request", nil},
		{"null → 400", "PUT", put(cvVarTags), `{"value":null,"user":"alice"}`, w.chatflowKey, 400, "bad_request", nil},
		{"no value → 400", "PUT", put(cvVarTags), `{"user":"alice"}`, w.chatflowKey, 400, "invalid_param", nil},
		{"unknown variable → 404", "PUT", put("22222222-0000-4000-8000-0000000000ff"), `{"value":"x","user":"alice"}`, w.chatflowKey, 404, "not_found", nil},
		{"another user cannot change it → 404", "PUT", put(cvVarTopic), `{"value":"x","user":"bob"}`, w.chatflowKey, 404, "not_found", nil},
		// The validator does not check the uuid format, so such ids are
		// simply not found.
		{"variable id that is no uuid → 404", "PUT", put("nope"), `{"value":"x","user":"alice"}`, w.chatflowKey, 404, "not_found", nil},
		{"text generator → 400 not_chat_app", "PUT", put(cvVarTopic), `{"value":"x","user":"alice"}`, w.completionKey, 400, "not_chat_app", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := w.call(t, tc.method, tc.path, tc.key, tc.body, tc.wantStatus, tc.wantCode)
			if tc.check != nil {
				tc.check(t, body)
			}
		})
	}
}

func TestFeedbackAPI(t *testing.T) {
	w := newCVWorld(t)
	conv := w.conversation(w.appID, "alice", "chat")
	m1 := w.message(w.appID, "alice", conv, "one")
	m2 := w.message(w.appID, "alice", conv, "two")
	gen := w.message(w.completionID, "alice", nil, "a poem")
	w.endUser(w.appID, "bob")
	fb := func(id string) string { return "/v1/messages/" + id + "/feedbacks" }

	steps := []struct {
		name       string
		method     string
		path, body string
		key        string
		wantStatus int
		wantCode   string
		check      func(t *testing.T, body map[string]any)
	}{
		{"like with a comment", "POST", fb(m1.ID), `{"rating":"like","user":"alice","content":"helpful"}`, w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			if b["result"] != "success" {
				t.Errorf("answer %v", b)
			}
		}},
		{"dislike", "POST", fb(m2.ID), `{"rating":"dislike","user":"alice"}`, w.appKey, 200, "", nil},
		{"another user cannot rate it → 404", "POST", fb(m1.ID), `{"rating":"dislike","user":"bob"}`, w.appKey, 404, "not_found", nil},
		{"another user cannot withdraw it → 404", "POST", fb(m1.ID), `{"rating":null,"user":"bob"}`, w.appKey, 404, "not_found", nil},
		{"unknown message → 404", "POST", fb("7f6e5d4c-0000-4000-8000-0000000000ff"), `{"rating":"like","user":"alice"}`, w.appKey, 404, "not_found", nil},
		{"a message of another app → 404", "POST", fb(gen.ID), `{"rating":"like","user":"alice"}`, w.appKey, 404, "not_found", nil},
		{"user is required → 400", "POST", fb(m1.ID), `{"rating":"like"}`, w.appKey, 400, "invalid_param", nil},
		{"empty user → 400", "POST", fb(m1.ID), `{"rating":"like","user":""}`, w.appKey, 400, "invalid_param", nil},
		{"unknown rating → 400", "POST", fb(m1.ID), `{"rating":"meh","user":"alice"}`, w.appKey, 400, "invalid_param", nil},
		{"message id that is no uuid → 404", "POST", fb("nope"), `{"rating":"like","user":"alice"}`, w.appKey, 404, "not_found", nil},
		{"text generator answers can be rated", "POST", fb(gen.ID), `{"rating":"like","user":"alice"}`, w.completionKey, 200, "", nil},
		{"the history shows the ratings", "GET", "/v1/messages?user=alice&conversation_id=" + conv.ID, "", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			if at(b, "data", 0, "feedback", "rating") != "like" || at(b, "data", 1, "feedback", "rating") != "dislike" {
				t.Errorf("feedback %v / %v", at(b, "data", 0, "feedback"), at(b, "data", 1, "feedback"))
			}
		}},
		{"the app's feedback, newest first", "GET", "/v1/app/feedbacks", "", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			list, _ := b["data"].([]any)
			if len(list) != 2 {
				t.Fatalf("%d items: %v", len(list), b)
			}
			first := at(b, "data", 0)
			if at(first, "message_id") != m2.ID || at(first, "rating") != "dislike" || at(first, "conversation_id") != conv.ID ||
				at(first, "from_source") != "user" || at(first, "from_end_user_id") != w.endUser(w.appID, "alice") ||
				at(first, "app_id") != w.appID {
				t.Errorf("first item %v", first)
			}
			if at(b, "data", 1, "content") != "helpful" {
				t.Errorf("second item %v", at(b, "data", 1))
			}
			created, _ := at(first, "created_at").(string)
			if ts, err := time.Parse(time.RFC3339Nano, created); err != nil || !strings.HasSuffix(created, "Z") || ts.IsZero() {
				t.Errorf("created_at %q is not an ISO 8601 UTC time", created)
			}
		}},
		{"paging: page 2 of 1", "GET", "/v1/app/feedbacks?page=2&limit=1", "", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			if at(b, "data", 0, "message_id") != m1.ID {
				t.Errorf("page 2: %v", b)
			}
		}},
		{"paging: past the end", "GET", "/v1/app/feedbacks?page=3&limit=1", "", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			if l, _ := b["data"].([]any); len(l) != 0 {
				t.Errorf("data %v", b["data"])
			}
		}},
		{"limit 101 is allowed", "GET", "/v1/app/feedbacks?limit=101", "", w.appKey, 200, "", nil},
		{"limit 102 → 400", "GET", "/v1/app/feedbacks?limit=102", "", w.appKey, 400, "invalid_param", nil},
		{"page 0 → 400", "GET", "/v1/app/feedbacks?page=0", "", w.appKey, 400, "invalid_param", nil},
		{"withdraw with null", "POST", fb(m1.ID), `{"rating":null,"user":"alice"}`, w.appKey, 200, "", nil},
		{"withdraw by leaving rating out, when there is none → 400", "POST", fb(m1.ID), `{"user":"alice"}`, w.appKey, 400, "invalid_param", nil},
		{"withdrawn: one left", "GET", "/v1/app/feedbacks", "", w.appKey, 200, "", func(t *testing.T, b map[string]any) {
			if len(dataIDs(b)) != 1 || at(b, "data", 0, "message_id") != m2.ID {
				t.Errorf("left: %v", b)
			}
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			body := w.call(t, st.method, st.path, st.key, st.body, st.wantStatus, st.wantCode)
			if st.check != nil {
				st.check(t, body)
			}
		})
	}
}

func TestEndUserAPI(t *testing.T) {
	w := newCVWorld(t)
	alice := w.endUser(w.appID, "alice")
	elsewhere := w.endUser(w.completionID, "alice")
	path := func(id string) string { return "/v1/end-users/" + url.PathEscape(id) }

	body := w.call(t, "GET", path(alice), w.appKey, "", 200, "")
	want := map[string]any{"id": alice, "tenant_id": models.WorkspaceID, "app_id": w.appID,
		"external_user_id": "alice", "session_id": "alice", "is_anonymous": false}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("%s = %v, want %v", k, body[k], v)
		}
	}
	for _, k := range []string{"created_at", "updated_at"} {
		s, _ := body[k].(string)
		if _, err := time.Parse(time.RFC3339, s); err != nil || !strings.HasSuffix(s, "Z") {
			t.Errorf("%s = %q", k, s)
		}
	}

	tests := []struct {
		name, id   string
		wantStatus int
		wantCode   string
	}{
		{"unknown end user → 404", "7f6e5d4c-0000-4000-8000-0000000000ff", 404, "end_user_not_found"},
		{"an end user of another app → 404", elsewhere, 404, "end_user_not_found"},
		{"an id that is no uuid → 404", "alice", 404, "end_user_not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w.call(t, "GET", path(tc.id), w.appKey, "", tc.wantStatus, tc.wantCode)
		})
	}
}
