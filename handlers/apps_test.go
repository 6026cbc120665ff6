package handlers_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/models"
)

// importApp imports one of the example app definitions of testdata/apps into
// the test server's database and returns the app's id and a key for it.
func (s *testServer) importApp(t *testing.T, file string) (appID, key string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "apps", file))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	app, err := apps.NewStore(s.db).Import(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	key, err = apikeys.NewStore(s.db).CreateAppKey(ctx, app.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	return app.ID, key
}

// getJSON calls a GET operation with a key, expects 200 and decodes the body.
func (s *testServer) getJSON(t *testing.T, path, key string) map[string]any {
	t.Helper()
	rec := s.do(t, request{method: "GET", path: path, key: key})
	if rec.Code != 200 {
		t.Fatalf("GET %s: status %d: %s", path, rec.Code, rec.Body)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return body
}

// at walks a decoded JSON value along keys and list indexes.
func at(v any, path ...any) any {
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[p]
		case int:
			l, _ := v.([]any)
			if p >= len(l) {
				return nil
			}
			v = l[p]
		}
	}
	return v
}

// formKinds lists the control kind of each user_input_form item.
func formKinds(t *testing.T, body map[string]any) []string {
	t.Helper()
	items, _ := body["user_input_form"].([]any)
	kinds := []string{}
	for _, it := range items {
		m, _ := it.(map[string]any)
		if len(m) != 1 {
			t.Errorf("form item %v does not have exactly one key", it)
		}
		for k := range m {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// sameKinds checks the control kinds of the input form, in order.
func sameKinds(t *testing.T, body map[string]any, want ...string) {
	t.Helper()
	got := formKinds(t, body)
	if !slices.Equal(got, want) {
		t.Errorf("form kinds %v, want %v", got, want)
	}
}

func TestAppInformationPerMode(t *testing.T) {
	s := newTestServer(t)
	type want struct {
		path  string
		check func(t *testing.T, body map[string]any)
	}
	eq := func(t *testing.T, body map[string]any, expected any, path ...any) {
		t.Helper()
		got, _ := json.Marshal(at(body, path...))
		exp, _ := json.Marshal(expected)
		if string(got) != string(exp) {
			t.Errorf("%v = %s, want %s", path, got, exp)
		}
	}
	tests := []struct {
		file  string
		calls []want
	}{
		{"completion.yml", []want{
			{"/v1/info", func(t *testing.T, b map[string]any) {
				eq(t, b, "Product copywriter", "name")
				eq(t, b, "completion", "mode")
				eq(t, b, []string{}, "tags")
				eq(t, b, "Writes a product description from a few facts about the product.", "description")
			}},
			{"/v1/parameters", func(t *testing.T, b map[string]any) {
				sameKinds(t, b, "text-input", "paragraph", "select", "text-input", "number")
				eq(t, b, true, "more_like_this", "enabled")
				eq(t, b, true, "retriever_resource", "enabled")
				eq(t, b, map[string]any{"enabled": true}, "sensitive_word_avoidance")
				eq(t, b, []string{"friendly", "formal", "playful"}, "user_input_form", 2, "select", "options")
				eq(t, b, 120, "user_input_form", 4, "number", "default")
				eq(t, b, 15, "system_parameters", "file_size_limit")
				eq(t, b, 10, "system_parameters", "image_file_size_limit")
				eq(t, b, 50, "system_parameters", "audio_file_size_limit")
				eq(t, b, 100, "system_parameters", "video_file_size_limit")
				eq(t, b, 10, "system_parameters", "workflow_file_upload_limit")
			}},
			{"/v1/meta", func(t *testing.T, b map[string]any) { eq(t, b, map[string]any{}, "tool_icons") }},
			{"/v1/site", func(t *testing.T, b map[string]any) {
				eq(t, b, "Product copywriter", "title")
				eq(t, b, "🛍️", "icon")
				eq(t, b, "emoji", "icon_type")
				eq(t, b, "#FEF7C3", "icon_background")
				eq(t, b, "en-US", "default_language")
				eq(t, b, true, "show_workflow_steps")
				eq(t, b, false, "use_icon_as_answer_icon")
			}},
		}},
		{"chat.yml", []want{
			{"/v1/info", func(t *testing.T, b map[string]any) { eq(t, b, "chat", "mode") }},
			{"/v1/parameters", func(t *testing.T, b map[string]any) {
				eq(t, b, "Hi! Where would you like to go?", "opening_statement")
				eq(t, b, []string{"A weekend in Lisbon", "What should I pack for Iceland in March?"}, "suggested_questions")
				sameKinds(t, b, "select", "external_data_tool")
				eq(t, b, true, "annotation_reply", "enabled")
				eq(t, b, true, "speech_to_text", "enabled")
				eq(t, b, false, "retriever_resource", "enabled")
				eq(t, b, map[string]any{"enabled": false}, "sensitive_word_avoidance")
				eq(t, b, 5, "file_upload", "number_limits")
				eq(t, b, map[string]any{"enabled": true, "number_limits": 4, "detail": "low", "transfer_methods": []string{"local_file"}}, "file_upload", "image")
			}},
			{"/v1/site", func(t *testing.T, b map[string]any) { eq(t, b, true, "use_icon_as_answer_icon") }},
		}},
		{"agent-chat.yml", []want{
			{"/v1/info", func(t *testing.T, b map[string]any) { eq(t, b, "agent-chat", "mode") }},
			{"/v1/parameters", func(t *testing.T, b map[string]any) { eq(t, b, []any{}, "user_input_form") }},
			{"/v1/meta", func(t *testing.T, b map[string]any) {
				eq(t, b, map[string]any{
					"tavily_search": "https://icons.example.com/tavily.svg",
					"search_wiki":   map[string]any{"background": "#FFEAD5", "content": "📚"},
				}, "tool_icons")
			}},
		}},
		{"advanced-chat.yml", []want{
			{"/v1/info", func(t *testing.T, b map[string]any) { eq(t, b, "advanced-chat", "mode") }},
			{"/v1/parameters", func(t *testing.T, b map[string]any) {
				sameKinds(t, b, "text-input", "select", "file", "checkbox")
				eq(t, b, false, "user_input_form", 3, "checkbox", "default")
				eq(t, b, []string{"document", "image"}, "user_input_form", 2, "file", "allowed_file_types")
				eq(t, b, map[string]any{"enabled": true, "voice": "nova", "language": "en-US", "autoPlay": "enabled"}, "text_to_speech")
				eq(t, b, true, "file_upload", "enabled")
			}},
			{"/v1/meta", func(t *testing.T, b map[string]any) { eq(t, b, map[string]any{}, "tool_icons") }},
			{"/v1/site", func(t *testing.T, b map[string]any) { eq(t, b, "Support desk", "title") }},
		}},
		{"workflow.yml", []want{
			{"/v1/info", func(t *testing.T, b map[string]any) { eq(t, b, "workflow", "mode") }},
			{"/v1/parameters", func(t *testing.T, b map[string]any) {
				sameKinds(t, b, "paragraph", "number", "file-list", "json_object", "select", "checkbox")
				eq(t, b, 5, "user_input_form", 2, "file-list", "max_length")
				eq(t, b, false, "file_upload", "enabled")
				eq(t, b, "", "opening_statement")
			}},
			{"/v1/meta", func(t *testing.T, b map[string]any) {
				eq(t, b, map[string]any{"convert_currency": map[string]any{"background": "#E4FBCC", "content": "💱"}}, "tool_icons")
			}},
			{"/v1/site", func(t *testing.T, b map[string]any) {
				eq(t, b, "link", "icon_type")
				eq(t, b, "https://icons.example.com/invoice.png", "icon_url")
			}},
		}},
		{"agent.yml", []want{
			{"/v1/info", func(t *testing.T, b map[string]any) { eq(t, b, "agent", "mode") }},
			{"/v1/parameters", func(t *testing.T, b map[string]any) {
				sameKinds(t, b, "text-input")
				eq(t, b, "Welcome aboard! What would you like to know?", "opening_statement")
			}},
			{"/v1/meta", func(t *testing.T, b map[string]any) {
				eq(t, b, map[string]any{"book_meeting": map[string]any{"background": "#252525", "content": "📅"}}, "tool_icons")
			}},
			{"/v1/site", func(t *testing.T, b map[string]any) { eq(t, b, "Onboarding buddy", "title") }},
		}},
		{"legacy-chatflow-0.1.0.yml", []want{
			{"/v1/parameters", func(t *testing.T, b map[string]any) {
				eq(t, b, []string{"image"}, "file_upload", "allowed_file_types")
				eq(t, b, true, "file_upload", "image", "enabled")
			}},
			{"/v1/site", func(t *testing.T, b map[string]any) { eq(t, b, false, "use_icon_as_answer_icon") }},
		}},
		{"legacy-chat-unversioned.yml", []want{
			{"/v1/info", func(t *testing.T, b map[string]any) { eq(t, b, "", "description") }},
			{"/v1/parameters", func(t *testing.T, b map[string]any) { eq(t, b, 32, "user_input_form", 0, "text-input", "max_length") }},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			_, key := s.importApp(t, tc.file)
			// Every operation answers for every mode, and matches openapi.yaml.
			for _, path := range []string{"/v1/info", "/v1/parameters", "/v1/meta", "/v1/site"} {
				s.getJSON(t, path, key)
			}
			for _, c := range tc.calls {
				t.Run(c.path, func(t *testing.T) { c.check(t, s.getJSON(t, c.path, key)) })
			}
		})
	}
}

func TestAppInformationErrors(t *testing.T) {
	s := newTestServer(t)
	appID, key := s.importApp(t, "chat.yml")
	// A definition that no longer parses (for example written by an older
	// appkb) makes the app unavailable rather than failing with a 500.
	if err := s.db.Model(&models.App{}).Where("id = ?", appID).Update("definition", "app: [broken").Error; err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantCode   string
	}{
		{"parameters of an unreadable app → 400 app_unavailable", request{method: "GET", path: "/v1/parameters", key: key}, 400, "app_unavailable"},
		{"meta of an unreadable app → 400 app_unavailable", request{method: "GET", path: "/v1/meta", key: key}, 400, "app_unavailable"},
		{"site of an unreadable app → 400 app_unavailable", request{method: "GET", path: "/v1/site", key: key}, 400, "app_unavailable"},
		{"chat message to an unreadable app → 400 app_unavailable", request{method: "POST", path: "/v1/chat-messages", key: key,
			body: `{"inputs":{},"query":"hi","user":"u1","response_mode":"blocking"}`}, 400, "app_unavailable"},
		{"info still answers from the stored row", request{method: "GET", path: "/v1/info", key: key}, 200, ""},
		{"parameters without a key → 401", request{method: "GET", path: "/v1/parameters"}, 401, "unauthorized"},
		{"site with a knowledge key → 401", request{method: "GET", path: "/v1/site", key: s.knowledgeKey}, 401, "unauthorized"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.do(t, tc.req)
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
		})
	}
}

// TestReplacedAppAnswersWithNewDefinition checks that the information
// operations follow an in-place replacement, with the same key.
func TestReplacedAppAnswersWithNewDefinition(t *testing.T) {
	s := newTestServer(t)
	appID, key := s.importApp(t, "chat.yml")
	data, err := os.ReadFile(filepath.Join("..", "testdata", "apps", "agent-chat.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apps.NewStore(s.db).Replace(context.Background(), appID, data); err != nil {
		t.Fatal(err)
	}
	if got := s.getJSON(t, "/v1/info", key)["name"]; got != "Research assistant" {
		t.Errorf("name after replace = %v", got)
	}
	if icons, _ := s.getJSON(t, "/v1/meta", key)["tool_icons"].(map[string]any); len(icons) != 2 {
		t.Errorf("tool icons after replace = %v", icons)
	}
}
