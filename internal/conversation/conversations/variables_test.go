package conversations_test

import (
	"encoding/json"
	"testing"
	"time"

	"appkb/internal/apps"
	"appkb/internal/conversation/conversations"
	"appkb/models"
)

const (
	varTopic   = "11111111-1111-4111-8111-000000000001"
	varTurns   = "11111111-1111-4111-8111-000000000002"
	varProfile = "11111111-1111-4111-8111-000000000003"
	varTags    = "11111111-1111-4111-8111-000000000004"
	varFlags   = "11111111-1111-4111-8111-000000000005"
	varDone    = "11111111-1111-4111-8111-000000000006"
)

func varIDs(vs []models.ConversationVariable) []string {
	return ids(vs, func(v models.ConversationVariable) string { return v.ID })
}

func TestVariablesSeedingAndPaging(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation(f.chatflow, "alice", "", time.Time{}, time.Time{})
	noID := conversations.VariableID(apps.Variable{Name: "no_id"})
	declared := []string{varTopic, varTurns, varProfile, varTags, varFlags, varDone, noID}
	list := func(q conversations.VariableQuery) (*conversations.Page[models.ConversationVariable], error) {
		return f.store.Variables(f.ctx, f.chatflow, f.chatflowDef, "alice", conv.ID, q)
	}

	page, err := list(conversations.VariableQuery{})
	must(t, err)
	sameIDs(t, varIDs(page.Data), declared)
	want := map[string]string{
		varTopic: `""`, varTurns: `3`, varProfile: `{"tier":"gold"}`, varTags: `["a","b"]`,
		varFlags: `[]`, varDone: `false`, noID: `[]`,
	}
	for _, v := range page.Data {
		if v.Value != want[v.ID] {
			t.Errorf("%s: seeded value %s, want %s", v.Name, v.Value, want[v.ID])
		}
	}
	if page.Data[0].Description != "The current topic." || page.Data[0].ValueType != "string" {
		t.Errorf("first variable: %+v", page.Data[0])
	}

	tests := []struct {
		name       string
		q          conversations.VariableQuery
		want       []string
		wantMore   bool
		wantStatus int
		wantCode   string
	}{
		{"first page", conversations.VariableQuery{Limit: 3}, declared[:3], true, 0, ""},
		{"next page after last_id", conversations.VariableQuery{LastID: varProfile, Limit: 3}, declared[3:6], true, 0, ""},
		{"exactly the rest: no more", conversations.VariableQuery{LastID: varDone, Limit: 1}, declared[6:], false, 0, ""},
		{"exactly limit: no more", conversations.VariableQuery{Limit: 7}, declared, false, 0, ""},
		{"filter by name", conversations.VariableQuery{Name: "tags"}, []string{varTags}, false, 0, ""},
		{"filter matches names exactly", conversations.VariableQuery{Name: "tag"}, []string{}, false, 0, ""},
		{"unknown last_id → 400", conversations.VariableQuery{LastID: "nope"}, nil, false, 400, "invalid_param"},
		{"limit out of range → 400", conversations.VariableQuery{Limit: 500}, nil, false, 400, "invalid_param"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			page, err := list(tc.q)
			if tc.wantStatus != 0 {
				wantCode(t, err, tc.wantStatus, tc.wantCode)
				return
			}
			must(t, err)
			sameIDs(t, varIDs(page.Data), tc.want)
			if page.HasMore != tc.wantMore {
				t.Errorf("has_more = %v, want %v", page.HasMore, tc.wantMore)
			}
		})
	}

	t.Run("reading again keeps changed values", func(t *testing.T) {
		_, err := f.store.UpdateVariable(f.ctx, f.chatflow, f.chatflowDef, "alice", conv.ID, varTopic, "billing")
		must(t, err)
		page, err := list(conversations.VariableQuery{Name: "topic"})
		must(t, err)
		if len(page.Data) != 1 || page.Data[0].Value != `"billing"` {
			t.Errorf("after update: %+v", page.Data)
		}
		var n int64
		must(t, f.db.Model(&models.ConversationVariable{}).Where("conversation_id = ?", conv.ID).Count(&n).Error)
		if n != int64(len(declared)) {
			t.Errorf("%d rows, want %d", n, len(declared))
		}
	})

	t.Run("variables are per conversation", func(t *testing.T) {
		second := f.conversation(f.chatflow, "alice", "", time.Time{}, time.Time{})
		page, err := f.store.Variables(f.ctx, f.chatflow, f.chatflowDef, "alice", second.ID, conversations.VariableQuery{Name: "topic"})
		must(t, err)
		if len(page.Data) != 1 || page.Data[0].Value != `""` {
			t.Errorf("second conversation: %+v", page.Data)
		}
	})
}

func TestVariablesByAppMode(t *testing.T) {
	f := newFixture(t)
	chatConv := f.conversation(f.chat, "alice", "", time.Time{}, time.Time{})
	agentConv := f.conversation(f.agent, "alice", "", time.Time{}, time.Time{})
	flowConv := f.conversation(f.chatflow, "alice", "", time.Time{}, time.Time{})

	page, err := f.store.Variables(f.ctx, f.chat, nil, "alice", chatConv.ID, conversations.VariableQuery{})
	must(t, err)
	if len(page.Data) != 0 || page.Data == nil {
		t.Errorf("a chatbot declares no variables: %+v", page.Data)
	}
	_, err = f.store.Variables(f.ctx, f.agent, nil, "alice", agentConv.ID, conversations.VariableQuery{})
	wantCode(t, err, 400, "not_chat_app")
	_, err = f.store.Variables(f.ctx, f.completion, nil, "alice", chatConv.ID, conversations.VariableQuery{})
	wantCode(t, err, 400, "not_chat_app")
	_, err = f.store.UpdateVariable(f.ctx, f.workflow, nil, "alice", chatConv.ID, varTopic, "x")
	wantCode(t, err, 400, "not_chat_app")
	_, err = f.store.Variables(f.ctx, f.chatflow, f.chatflowDef, "bob", flowConv.ID, conversations.VariableQuery{})
	wantCode(t, err, 404, "not_found")
	_, err = f.store.Variables(f.ctx, f.chatflow, f.chatflowDef, "alice", "nope", conversations.VariableQuery{})
	wantCode(t, err, 404, "not_found")
}

func TestUpdateVariable(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation(f.chatflow, "alice", "", time.Time{}, time.Time{})
	f.user(f.chatflow, "bob")
	decode := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name       string
		user       string
		conv       string
		variable   string
		value      string // JSON
		wantStored string
		wantStatus int
		wantCode   string
	}{
		{"string", "alice", conv.ID, varTopic, `"refunds"`, `"refunds"`, 0, ""},
		{"number", "alice", conv.ID, varTurns, `4.5`, `4.5`, 0, ""},
		{"object", "alice", conv.ID, varProfile, `{"tier":"silver","n":[1]}`, `{"n":[1],"tier":"silver"}`, 0, ""},
		{"array of strings", "alice", conv.ID, varTags, `["x"]`, `["x"]`, 0, ""},
		{"empty array", "alice", conv.ID, varFlags, `[]`, `[]`, 0, ""},
		{"boolean", "alice", conv.ID, varDone, `true`, `true`, 0, ""},
		{"number for a string → 400", "alice", conv.ID, varTopic, `1`, "", 400, "bad_request"},
		{"string for a number → 400", "alice", conv.ID, varTurns, `"4"`, "", 400, "bad_request"},
		{"array for an object → 400", "alice", conv.ID, varProfile, `[]`, "", 400, "bad_request"},
		{"mixed array → 400", "alice", conv.ID, varTags, `["x",1]`, "", 400, "bad_request"},
		{"null → 400", "alice", conv.ID, varDone, `null`, "", 400, "bad_request"},
		{"unknown variable → 404", "alice", conv.ID, "22222222-2222-4222-8222-222222222222", `"x"`, "", 404, "not_found"},
		{"another user's conversation → 404", "bob", conv.ID, varTopic, `"x"`, "", 404, "not_found"},
		{"unknown conversation → 404", "alice", "nope", varTopic, `"x"`, "", 404, "not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.store.UpdateVariable(f.ctx, f.chatflow, f.chatflowDef, tc.user, tc.conv, tc.variable, decode(tc.value))
			if tc.wantStatus != 0 {
				wantCode(t, err, tc.wantStatus, tc.wantCode)
				return
			}
			must(t, err)
			if got.Value != tc.wantStored {
				t.Errorf("value = %s, want %s", got.Value, tc.wantStored)
			}
			var stored models.ConversationVariable
			must(t, f.db.Where("conversation_id = ? AND id = ?", conv.ID, tc.variable).Take(&stored).Error)
			if stored.Value != tc.wantStored || !stored.UpdatedAt.After(stored.CreatedAt) {
				t.Errorf("stored %+v", stored)
			}
		})
	}
}

func TestCheckValue(t *testing.T) {
	tests := []struct {
		valueType string
		value     any
		ok        bool
	}{
		{"string", "a", true},
		{"string", 1.0, false},
		{"secret", "s", true},
		{"number", 1.5, true},
		{"number", json.Number("2"), true},
		{"number", true, false},
		{"integer", 2.0, true},
		{"integer", 2.5, false},
		{"float", 2.5, true},
		{"boolean", false, true},
		{"boolean", "false", false},
		{"object", map[string]any{}, true},
		{"object", []any{}, false},
		{"file", map[string]any{"id": "x"}, true},
		{"array[string]", []any{"a", "b"}, true},
		{"array[string]", []any{"a", nil}, false},
		{"array[number]", []any{1.0, 2.0}, true},
		{"array[number]", []any{"1"}, false},
		{"array[boolean]", []any{true}, true},
		{"array[object]", []any{map[string]any{}}, true},
		{"array[object]", []any{1.0}, false},
		{"array[file]", []any{map[string]any{}}, true},
		{"array[any]", []any{1.0, "a", nil}, true},
		{"array[any]", "a", false},
		{"array[string]", map[string]any{}, false},
		{"string", nil, false},
		{"something-new", 1.0, true},
		{"something-new", nil, false},
	}
	for _, tc := range tests {
		err := conversations.CheckValue(tc.valueType, tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("CheckValue(%s, %#v) = %v, want ok=%v", tc.valueType, tc.value, err, tc.ok)
		}
	}
}

func TestValueText(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		stored string
		want   *string
	}{
		{`"hello"`, str("hello")},
		{`""`, str("")},
		{`3`, str("3")},
		{`{"a":1}`, str(`{"a":1}`)},
		{`["a"]`, str(`["a"]`)},
		{`true`, str("true")},
		{`null`, nil},
		{``, nil},
	}
	for _, tc := range tests {
		got := conversations.ValueText(tc.stored)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("ValueText(%s) = %v, want %v", tc.stored, got, tc.want)
		}
	}
}
