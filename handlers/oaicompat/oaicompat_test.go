package oaicompat

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
)

func TestBuildTurn(t *testing.T) {
	chatApp := &App{ID: "a1", Mode: apps.ModeChat}
	completion := &App{ID: "a2", Mode: apps.ModeCompletion, Form: []apps.FormField{
		{Kind: apps.FieldTextInput, Variable: "product"}, {Kind: apps.FieldParagraph, Variable: "facts"}}}
	completionQuery := &App{ID: "a3", Mode: apps.ModeCompletion, Form: []apps.FormField{
		{Kind: apps.FieldParagraph, Variable: "facts"}, {Kind: apps.FieldTextInput, Variable: "query"}}}
	bare := &App{ID: "a4", Mode: apps.ModeCompletion}
	flow := &App{ID: "a5", Mode: apps.ModeWorkflow, Form: []apps.FormField{
		{Kind: apps.FieldNumber, Variable: "n"}, {Kind: apps.FieldParagraph, Variable: "text"}}}

	for _, tc := range []struct {
		name string
		app  *App
		body string
		want Turn
		code string
	}{
		{name: "single question", app: chatApp, body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			want: Turn{AppID: "a1", Mode: apps.ModeChat, User: DefaultUser, Query: "hi", Inputs: map[string]any{}}},
		{name: "history, system anywhere, user", app: chatApp, body: `{"model":"m","user":" ann ","messages":[
			{"role":"developer","content":"Be kind."},{"role":"user","content":"a"},{"role":"assistant","content":"b"},
			{"role":"system","content":"Be brief."},{"role":"user","content":"c"},{"role":"tool","content":"d"},
			{"role":"assistant","content":null},{"role":"user","content":"e"}]}`,
			want: Turn{AppID: "a1", Mode: apps.ModeChat, User: "ann", Query: "e", Instructions: "Be kind.\n\nBe brief.",
				History: []HistoryTurn{{Query: "a", Answer: "b"}, {Query: "c\n\nd", Answer: ""}}, Inputs: map[string]any{}}},
		{name: "unanswered user messages join the query", app: chatApp, body: `{"model":"m","messages":[
			{"role":"user","content":"first"},{"role":"user","content":"second"}]}`,
			want: Turn{AppID: "a1", Mode: apps.ModeChat, User: DefaultUser, Query: "first\n\nsecond", Inputs: map[string]any{}}},
		{name: "a stored conversation replaces the history", app: chatApp, body: `{"model":"m","conversation_id":"c1","inputs":{"x":1},"messages":[
			{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"q"}]}`,
			want: Turn{AppID: "a1", Mode: apps.ModeChat, User: DefaultUser, Query: "q", ConversationID: "c1", Inputs: map[string]any{"x": 1.0}}},
		{name: "parts and images", app: chatApp, body: `{"model":"m","messages":[{"role":"user","content":[
			{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://x.test/a.png"}},{"type":"text","text":"here"}]}]}`,
			want: Turn{AppID: "a1", Mode: apps.ModeChat, User: DefaultUser, Query: "look\nhere", Inputs: map[string]any{},
				Files: []File{{Type: "image", URL: "https://x.test/a.png"}}}},
		{name: "params", app: chatApp, body: `{"model":"m","temperature":0,"top_p":0.5,"max_tokens":9,"stop":["a","b"],"messages":[{"role":"user","content":"q"}]}`,
			want: Turn{AppID: "a1", Mode: apps.ModeChat, User: DefaultUser, Query: "q", Inputs: map[string]any{},
				Params: map[string]any{"temperature": 0.0, "top_p": 0.5, "max_tokens": 9, "stop": []string{"a", "b"}}}},
		{name: "max_completion_tokens wins", app: chatApp, body: `{"model":"m","max_tokens":9,"max_completion_tokens":12,"stop":"x","messages":[{"role":"user","content":"q"}]}`,
			want: Turn{AppID: "a1", Mode: apps.ModeChat, User: DefaultUser, Query: "q", Inputs: map[string]any{},
				Params: map[string]any{"max_tokens": 12, "stop": []string{"x"}}}},
		{name: "completion: first paragraph", app: completion, body: `{"model":"m","inputs":{"product":"lamp"},"messages":[
			{"role":"user","content":"old"},{"role":"assistant","content":"x"},{"role":"user","content":"bright"}]}`,
			want: Turn{AppID: "a2", Mode: apps.ModeCompletion, User: DefaultUser, Inputs: map[string]any{"product": "lamp", "facts": "bright"}}},
		{name: "completion: query input first", app: completionQuery, body: `{"model":"m","messages":[{"role":"user","content":"q"}]}`,
			want: Turn{AppID: "a3", Mode: apps.ModeCompletion, User: DefaultUser, Inputs: map[string]any{"query": "q"}}},
		{name: "completion: given inputs win", app: completionQuery, body: `{"model":"m","inputs":{"query":"mine"},"messages":[{"role":"user","content":"q"}]}`,
			want: Turn{AppID: "a3", Mode: apps.ModeCompletion, User: DefaultUser, Inputs: map[string]any{"query": "mine"}}},
		{name: "completion: no text input keeps the query", app: bare, body: `{"model":"m","messages":[{"role":"user","content":"q"}]}`,
			want: Turn{AppID: "a4", Mode: apps.ModeCompletion, User: DefaultUser, Query: "q", Inputs: map[string]any{}}},
		{name: "workflow: first text input", app: flow, body: `{"model":"m","inputs":{"n":2},"conversation_id":"c","messages":[{"role":"user","content":"words"}]}`,
			want: Turn{AppID: "a5", Mode: apps.ModeWorkflow, User: DefaultUser, Inputs: map[string]any{"n": 2.0, "text": "words"}}},
		{name: "no user message", app: chatApp, body: `{"model":"m","messages":[{"role":"system","content":"x"}]}`, code: apperr.CodeInvalidParam},
		{name: "assistant after the query", app: chatApp, body: `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]}`, code: apperr.CodeInvalidParam},
		{name: "bad stop", app: chatApp, body: `{"model":"m","stop":5,"messages":[{"role":"user","content":"x"}]}`, code: apperr.CodeInvalidParam},
		{name: "data url", app: chatApp, body: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:x"}}]}]}`, code: apperr.CodeInvalidParam},
		{name: "unknown mode", app: &App{Mode: "rag-pipeline"}, body: `{"model":"m","messages":[{"role":"user","content":"x"}]}`, code: apperr.CodeAppUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := DecodeRequest([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got, err := BuildTurn(req, tc.app)
			if tc.code != "" {
				if !apperr.Is(err, tc.code) {
					t.Fatalf("err = %v, want code %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("turn\n got %#v\nwant %#v", *got, tc.want)
			}
		})
	}
}

func TestToError(t *testing.T) {
	for _, tc := range []struct {
		err         error
		status      int
		typ, code   string
		param       string
		messageSeen string
	}{
		{err: apperr.Unauthorized("bad key"), status: 401, typ: "authentication_error", code: CodeInvalidAPIKey, messageSeen: "bad key"},
		{err: apperr.InvalidParam("nope"), status: 400, typ: "invalid_request_error", code: "invalid_param"},
		{err: paramError("messages", "no user"), status: 400, typ: "invalid_request_error", code: "invalid_param", param: "messages"},
		{err: apperr.Forbidden("no"), status: 403, typ: "permission_error", code: "forbidden"},
		{err: apperr.New(429, "too_many_requests", "slow down"), status: 429, typ: "rate_limit_error", code: "too_many_requests"},
		{err: errors.New("secret detail"), status: 500, typ: "server_error", code: apperr.CodeInternal},
	} {
		status, body := ToError(tc.err)
		e := body.Error
		if status != tc.status || e.Type != tc.typ || e.Code == nil || *e.Code != tc.code {
			t.Errorf("%v → %d %+v", tc.err, status, e)
		}
		if (e.Param == nil) != (tc.param == "") || (e.Param != nil && *e.Param != tc.param) {
			t.Errorf("%v: param %v, want %q", tc.err, e.Param, tc.param)
		}
		if tc.status == 500 && e.Message == "secret detail" {
			t.Error("an internal error's detail leaked")
		}
	}
}

func TestChunksAndBlocking(t *testing.T) {
	start := Start{MessageID: "m1", ConversationID: "c1", CreatedAt: time.Unix(1700000000, 0)}
	c := NewCompletion("my-model", start)
	a := &Answer{Start: start, Text: "hi", FinishReason: FinishLength, Usage: Usage{1, 2, 3}, Citations: []any{map[string]any{"position": 1}}}
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name string
		got  any
		want string
	}{
		{"role", c.RoleChunk(), `{"id":"chatcmpl-m1","object":"chat.completion.chunk","created":1700000000,"model":"my-model","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null,"logprobs":null}],"usage":null,"system_fingerprint":null}`},
		{"text", c.TextChunk("x"), `{"id":"chatcmpl-m1","object":"chat.completion.chunk","created":1700000000,"model":"my-model","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null,"logprobs":null}],"usage":null,"system_fingerprint":null}`},
		{"finish", c.FinishChunk(a), `{"id":"chatcmpl-m1","object":"chat.completion.chunk","created":1700000000,"model":"my-model","choices":[{"index":0,"delta":{},"finish_reason":"length","logprobs":null}],"usage":null,"system_fingerprint":null,"conversation_id":"c1","retriever_resources":[{"position":1}]}`},
		{"usage", c.UsageChunk(a), `{"id":"chatcmpl-m1","object":"chat.completion.chunk","created":1700000000,"model":"my-model","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3},"system_fingerprint":null}`},
		{"blocking", c.Blocking(a), `{"id":"chatcmpl-m1","object":"chat.completion","created":1700000000,"model":"my-model","choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null},"finish_reason":"length","logprobs":null}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3},"system_fingerprint":null,"conversation_id":"c1","retriever_resources":[{"position":1}]}`},
	} {
		if got := enc(tc.got); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestServesAndModels(t *testing.T) {
	for path, want := range map[string]bool{"/chat/completions": true, "/models": true, "/models/x": true,
		"/chat-messages": false, "/workspaces/current/models/model-types/llm": false} {
		if Serves(path) != want {
			t.Errorf("Serves(%q) = %v", path, !want)
		}
	}
	app := &App{ID: "id1", Name: "Helper", Mode: apps.ModeChat, CreatedAt: time.Unix(5, 0)}
	for _, name := range []string{"id1", "Helper"} {
		if m, err := FindModel(app, name); err != nil || m.ID != "id1" || m.Created != 5 {
			t.Errorf("FindModel(%q) = %+v, %v", name, m, err)
		}
	}
	if _, err := FindModel(app, "helper"); !apperr.Is(err, CodeModelNotFound) {
		t.Errorf("names are matched exactly: %v", err)
	}
}
