package conversations_test

import (
	"slices"
	"testing"
	"time"

	"appkb/internal/conversation/conversations"
	"appkb/models"
)

func historyIDs(items []conversations.HistoryItem) []string {
	return ids(items, func(h conversations.HistoryItem) string { return h.Message.ID })
}

func TestHistoryPaging(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation(f.chat, "alice", "", time.Time{}, time.Time{})
	other := f.conversation(f.chat, "alice", "", time.Time{}, time.Time{})
	empty := f.conversation(f.chat, "alice", "", time.Time{}, time.Time{})
	var msgs []string // oldest first
	for i := range 5 {
		msgs = append(msgs, f.message(f.chat, "alice", conv, "q"+string(rune('0'+i))).ID)
	}
	otherMsg := f.message(f.chat, "alice", other, "elsewhere")

	tests := []struct {
		name       string
		conv       string
		q          conversations.HistoryQuery
		want       []string
		wantMore   bool
		wantStatus int
		wantCode   string
	}{
		{"latest page, oldest first within it", conv.ID, conversations.HistoryQuery{Limit: 2}, msgs[3:], true, 0, ""},
		{"first_id pages back in time", conv.ID, conversations.HistoryQuery{FirstID: msgs[3], Limit: 2}, msgs[1:3], true, 0, ""},
		{"the last page back has no more", conv.ID, conversations.HistoryQuery{FirstID: msgs[1], Limit: 2}, msgs[:1], false, 0, ""},
		{"first_id of the oldest message → empty", conv.ID, conversations.HistoryQuery{FirstID: msgs[0]}, []string{}, false, 0, ""},
		{"exactly limit messages: no more", conv.ID, conversations.HistoryQuery{Limit: 5}, msgs, false, 0, ""},
		{"limit + 1 messages: more", conv.ID, conversations.HistoryQuery{Limit: 4}, msgs[1:], true, 0, ""},
		{"default limit", conv.ID, conversations.HistoryQuery{}, msgs, false, 0, ""},
		{"conversation without messages", empty.ID, conversations.HistoryQuery{}, []string{}, false, 0, ""},
		{"unknown first_id → 404", conv.ID, conversations.HistoryQuery{FirstID: "nope"}, nil, false, 404, "not_found"},
		{"first_id from another conversation → 404", conv.ID, conversations.HistoryQuery{FirstID: otherMsg.ID}, nil, false, 404, "not_found"},
		{"unknown conversation → 404", "nope", conversations.HistoryQuery{}, nil, false, 404, "not_found"},
		{"empty conversation id → 404", "", conversations.HistoryQuery{}, nil, false, 404, "not_found"},
		{"limit out of range → 400", conv.ID, conversations.HistoryQuery{Limit: 101}, nil, false, 400, "invalid_param"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			page, err := f.store.History(f.ctx, f.chat, "alice", tc.conv, tc.q)
			if tc.wantStatus != 0 {
				wantCode(t, err, tc.wantStatus, tc.wantCode)
				return
			}
			must(t, err)
			sameIDs(t, historyIDs(page.Data), tc.want)
			if page.HasMore != tc.wantMore {
				t.Errorf("has_more = %v, want %v", page.HasMore, tc.wantMore)
			}
		})
	}

	t.Run("walking back page by page yields every message once", func(t *testing.T) {
		var got []string
		first := ""
		for {
			page, err := f.store.History(f.ctx, f.chat, "alice", conv.ID, conversations.HistoryQuery{FirstID: first, Limit: 2})
			must(t, err)
			got = append(slices.Clone(historyIDs(page.Data)), got...)
			if !page.HasMore {
				break
			}
			first = page.Data[0].Message.ID
		}
		sameIDs(t, got, msgs)
	})

	t.Run("text generator → 400 not_chat_app", func(t *testing.T) {
		_, err := f.store.History(f.ctx, f.completion, "alice", conv.ID, conversations.HistoryQuery{})
		wantCode(t, err, 400, "not_chat_app")
	})
}

func TestHistoryItemContents(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation(f.chat, "alice", "", time.Time{}, time.Time{})
	m := f.message(f.chat, "alice", conv, "hi")
	plain := f.message(f.chat, "alice", conv, "plain")
	price, currency, parent := "0.0012", "USD", plain.ID
	must(t, f.db.Model(&models.Message{}).Where("id = ?", m.ID).Updates(map[string]any{
		"inputs":              `{"city":"Paris","n":2}`,
		"message_files":       `[{"id":"f1","filename":"a.png","type":"image","url":"https://x/a.png","transfer_method":"remote_url","belongs_to":"user"}]`,
		"retriever_resources": `[{"position":1,"dataset_id":"d1","content":"chunk","score":0.5}]`,
		"agent_thoughts":      `[{"id":"t1","message_id":"` + m.ID + `","position":1,"thought":"think","tool":"search","tool_labels":{"search":{"en_US":"Search"}},"files":[]}]`,
		"total_price":         price,
		"currency":            currency,
		"parent_message_id":   parent,
	}).Error)
	must(t, f.store.SetFeedback(f.ctx, f.chat, "alice", m.ID, conversations.RatingLike, nil))

	page, err := f.store.History(f.ctx, f.chat, "alice", conv.ID, conversations.HistoryQuery{})
	must(t, err)
	if len(page.Data) != 2 {
		t.Fatalf("%d items", len(page.Data))
	}
	got, other := page.Data[0], page.Data[1]
	if got.Message.ID != m.ID {
		t.Fatalf("order: %v", historyIDs(page.Data))
	}
	if got.Rating != "like" || other.Rating != "" {
		t.Errorf("ratings %q / %q", got.Rating, other.Rating)
	}
	if got.Inputs["city"] != "Paris" || len(got.Files) != 1 || got.Files[0].Filename != "a.png" ||
		len(got.RetrieverResources) != 1 || got.RetrieverResources[0].Content != "chunk" ||
		len(got.AgentThoughts) != 1 || got.AgentThoughts[0].ToolLabels["search"] == nil {
		t.Errorf("decoded columns: %+v", got)
	}
	if other.Files == nil || other.RetrieverResources == nil || other.AgentThoughts == nil || other.Inputs == nil {
		t.Errorf("empty columns must decode to empty values, not nil: %+v", other)
	}

	t.Run("a corrupt column is an internal error", func(t *testing.T) {
		must(t, f.db.Model(&models.Message{}).Where("id = ?", plain.ID).Update("agent_thoughts", "{not json").Error)
		_, err := f.store.History(f.ctx, f.chat, "alice", conv.ID, conversations.HistoryQuery{})
		wantCode(t, err, 500, "internal_server_error")
	})
}
