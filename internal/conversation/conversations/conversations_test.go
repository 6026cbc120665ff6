package conversations_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"appkb/internal/conversation/conversations"
	"appkb/models"
)

func TestListPaging(t *testing.T) {
	f := newFixture(t)
	// Five conversations of alice, created a second apart and updated in
	// another order, so that the four sort orders all differ.
	var all []*models.Conversation
	for i, upd := range []int{30, 10, 50, 20, 40} {
		created := f.tick()
		all = append(all, f.conversation(f.chat, "alice", "c"+string(rune('0'+i)), created, created.Add(time.Duration(upd)*time.Second)))
	}
	f.conversation(f.chat, "bob", "bob's", time.Time{}, time.Time{})
	f.conversation(f.other, "alice", "other app", time.Time{}, time.Time{})

	order := func(less func(a, b *models.Conversation) int) []string {
		s := slices.Clone(all)
		slices.SortFunc(s, less)
		return ids(s, func(c *models.Conversation) string { return c.ID })
	}
	byCreated := order(func(a, b *models.Conversation) int { return a.CreatedAt.Compare(b.CreatedAt) })
	byUpdated := order(func(a, b *models.Conversation) int { return a.UpdatedAt.Compare(b.UpdatedAt) })
	reversed := func(s []string) []string { s = slices.Clone(s); slices.Reverse(s); return s }

	tests := []struct {
		name     string
		sortBy   string
		limit    int
		wantAll  []string
		wantMore []bool // has_more of each page
	}{
		{"default is most recently updated first", "", 2, reversed(byUpdated), []bool{true, true, false}},
		{"created_at ascending", conversations.SortCreatedAsc, 2, byCreated, []bool{true, true, false}},
		{"created_at descending", conversations.SortCreatedDesc, 3, reversed(byCreated), []bool{true, false}},
		{"updated_at ascending", conversations.SortUpdatedAsc, 4, byUpdated, []bool{true, false}},
		{"updated_at descending", conversations.SortUpdatedDesc, 1, reversed(byUpdated), []bool{true, true, true, true, false}},
		{"exactly limit conversations: one page, no more", "", 5, reversed(byUpdated), []bool{false}},
		{"limit above the count", "", 100, reversed(byUpdated), []bool{false}},
		{"no limit means 20", "", 0, reversed(byUpdated), []bool{false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var more []bool
			last := ""
			for range 10 {
				page, err := f.store.List(f.ctx, f.chat, "alice", conversations.ListQuery{LastID: last, Limit: tc.limit, SortBy: tc.sortBy})
				must(t, err)
				wantLimit := tc.limit
				if wantLimit == 0 {
					wantLimit = conversations.DefaultLimit
				}
				if page.Limit != wantLimit {
					t.Errorf("limit = %d, want %d", page.Limit, wantLimit)
				}
				got = append(got, ids(page.Data, convID)...)
				more = append(more, page.HasMore)
				if !page.HasMore {
					break
				}
				last = page.Data[len(page.Data)-1].ID
			}
			sameIDs(t, got, tc.wantAll)
			if !slices.Equal(more, tc.wantMore) {
				t.Errorf("has_more per page = %v, want %v", more, tc.wantMore)
			}
		})
	}
}

func TestListWithEqualTimestamps(t *testing.T) {
	f := newFixture(t)
	same := f.tick()
	var want []string
	for range 7 {
		want = append(want, f.conversation(f.chat, "alice", "", same, same).ID)
	}
	slices.Sort(want)
	for _, sortBy := range []string{conversations.SortCreatedAsc, conversations.SortUpdatedDesc} {
		var got []string
		last := ""
		for {
			page, err := f.store.List(f.ctx, f.chat, "alice", conversations.ListQuery{LastID: last, Limit: 3, SortBy: sortBy})
			must(t, err)
			got = append(got, ids(page.Data, convID)...)
			if !page.HasMore {
				break
			}
			last = page.Data[len(page.Data)-1].ID
		}
		slices.Sort(got)
		sameIDs(t, got, want) // every conversation once, none repeated
	}
}

func TestListEdgeCases(t *testing.T) {
	f := newFixture(t)
	mine := f.conversation(f.chat, "alice", "mine", time.Time{}, time.Time{})
	bobs := f.conversation(f.chat, "bob", "bob's", time.Time{}, time.Time{})
	f.user(f.chat, "carol") // known, but without conversations

	tests := []struct {
		name       string
		app        *models.App
		user       string
		q          conversations.ListQuery
		wantIDs    []string
		wantStatus int
		wantCode   string
	}{
		{"user without conversations → empty", f.chat, "carol", conversations.ListQuery{}, []string{}, 0, ""},
		{"user who never called the app → empty", f.chat, "nobody", conversations.ListQuery{}, []string{}, 0, ""},
		{"no user → empty", f.chat, "", conversations.ListQuery{}, []string{}, 0, ""},
		{"user names are trimmed like the runtime does", f.chat, "  alice ", conversations.ListQuery{}, []string{mine.ID}, 0, ""},
		{"same user string in another app → empty", f.other, "alice", conversations.ListQuery{}, []string{}, 0, ""},
		{"last_id of the only conversation → empty, no more", f.chat, "alice", conversations.ListQuery{LastID: mine.ID}, []string{}, 0, ""},
		{"unknown last_id → 404", f.chat, "alice", conversations.ListQuery{LastID: "nope"}, nil, 404, "not_found"},
		{"last_id of another user's conversation → 404", f.chat, "alice", conversations.ListQuery{LastID: bobs.ID}, nil, 404, "not_found"},
		{"last_id for a user who never called → 404", f.chat, "nobody", conversations.ListQuery{LastID: mine.ID}, nil, 404, "not_found"},
		{"limit above 100 → 400", f.chat, "alice", conversations.ListQuery{Limit: 101}, nil, 400, "invalid_param"},
		{"negative limit → 400", f.chat, "alice", conversations.ListQuery{Limit: -1}, nil, 400, "invalid_param"},
		{"unknown sort → 400", f.chat, "alice", conversations.ListQuery{SortBy: "name"}, nil, 400, "invalid_param"},
		{"text generator → 400 not_chat_app", f.completion, "alice", conversations.ListQuery{}, nil, 400, "not_chat_app"},
		{"workflow → 400 not_chat_app", f.workflow, "alice", conversations.ListQuery{}, nil, 400, "not_chat_app"},
		{"agent app has conversations", f.agent, "alice", conversations.ListQuery{}, []string{}, 0, ""},
		{"chatflow has conversations", f.chatflow, "alice", conversations.ListQuery{}, []string{}, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			page, err := f.store.List(f.ctx, tc.app, tc.user, tc.q)
			if tc.wantStatus != 0 {
				wantCode(t, err, tc.wantStatus, tc.wantCode)
				return
			}
			must(t, err)
			sameIDs(t, ids(page.Data, convID), tc.wantIDs)
			if page.HasMore {
				t.Error("has_more is true")
			}
			if page.Data == nil {
				t.Error("data is nil, want an empty list")
			}
		})
	}
}

func TestIsolation(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation(f.chat, "alice", "alice's", time.Time{}, time.Time{})
	msg := f.message(f.chat, "alice", conv, "hello")
	f.user(f.chat, "bob")
	f.user(f.other, "alice")

	callers := []struct {
		name string
		app  *models.App
		user string
	}{
		{"another user", f.chat, "bob"},
		{"a user who never called", f.chat, "mallory"},
		{"no user", f.chat, ""},
		{"the same user string through another app", f.other, "alice"},
	}
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.store.Get(f.ctx, c.app, c.user, conv.ID)
			wantCode(t, err, 404, "not_found")
			_, err = f.store.History(f.ctx, c.app, c.user, conv.ID, conversations.HistoryQuery{})
			wantCode(t, err, 404, "not_found")
			_, err = f.store.RenameConversation(f.ctx, c.app, c.user, conv.ID, conversations.Rename{Name: "stolen"})
			wantCode(t, err, 404, "not_found")
			err = f.store.Delete(f.ctx, c.app, c.user, conv.ID)
			wantCode(t, err, 404, "not_found")
			if c.user != "" {
				err = f.store.SetFeedback(f.ctx, c.app, c.user, msg.ID, conversations.RatingDislike, nil)
				wantCode(t, err, 404, "not_found")
			}
		})
	}
	// Nothing of alice's changed.
	got, err := f.store.Get(f.ctx, f.chat, "alice", conv.ID)
	must(t, err)
	if got.Name != "alice's" {
		t.Errorf("name = %q", got.Name)
	}
	page, err := f.store.History(f.ctx, f.chat, "alice", conv.ID, conversations.HistoryQuery{})
	must(t, err)
	if len(page.Data) != 1 || page.Data[0].Rating != "" {
		t.Errorf("history after others' attempts: %+v", page.Data)
	}
}

func TestDelete(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation(f.chatflow, "alice", "doomed", time.Time{}, time.Time{})
	kept := f.conversation(f.chatflow, "alice", "kept", time.Time{}, time.Time{})
	m1 := f.message(f.chatflow, "alice", conv, "one")
	f.message(f.chatflow, "alice", conv, "two")
	keptMsg := f.message(f.chatflow, "alice", kept, "three")
	must(t, f.store.SetFeedback(f.ctx, f.chatflow, "alice", m1.ID, conversations.RatingLike, nil))
	must(t, f.store.SetFeedback(f.ctx, f.chatflow, "alice", keptMsg.ID, conversations.RatingLike, nil))
	for _, c := range []*models.Conversation{conv, kept} {
		_, err := f.store.Variables(f.ctx, f.chatflow, f.chatflowDef, "alice", c.ID, conversations.VariableQuery{})
		must(t, err)
	}

	must(t, f.store.Delete(f.ctx, f.chatflow, "alice", conv.ID))

	count := func(model any, where string, args ...any) int64 {
		var n int64
		must(t, f.db.Model(model).Where(where, args...).Count(&n).Error)
		return n
	}
	if n := count(&models.Conversation{}, "id = ?", conv.ID); n != 0 {
		t.Error("conversation still there")
	}
	if n := count(&models.Message{}, "conversation_id = ?", conv.ID); n != 0 {
		t.Errorf("%d messages left", n)
	}
	if n := count(&models.MessageFeedback{}, "message_id = ?", m1.ID); n != 0 {
		t.Error("feedback left")
	}
	if n := count(&models.ConversationVariable{}, "conversation_id = ?", conv.ID); n != 0 {
		t.Errorf("%d variables left", n)
	}
	if count(&models.Message{}, "conversation_id = ?", kept.ID) != 1 ||
		count(&models.MessageFeedback{}, "message_id = ?", keptMsg.ID) != 1 ||
		count(&models.ConversationVariable{}, "conversation_id = ?", kept.ID) == 0 {
		t.Error("the other conversation lost data")
	}
	err := f.store.Delete(f.ctx, f.chatflow, "alice", conv.ID)
	wantCode(t, err, 404, "not_found")
	err = f.store.Delete(f.ctx, f.completion, "alice", kept.ID)
	wantCode(t, err, 400, "not_chat_app")
}

func TestRename(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation(f.chat, "alice", "old", time.Time{}, time.Time{})
	empty := f.conversation(f.chat, "alice", "empty", time.Time{}, time.Time{})
	f.message(f.chat, "alice", conv, "  How do I reset my router password   after the update of last week?")
	f.message(f.chat, "alice", conv, "second question")

	tests := []struct {
		name       string
		id         string
		r          conversations.Rename
		wantName   string
		wantStatus int
		wantCode   string
	}{
		{"plain name", conv.ID, conversations.Rename{Name: "Router help"}, "Router help", 0, ""},
		{"name is trimmed", conv.ID, conversations.Rename{Name: "  Router  "}, "Router", 0, ""},
		{"blank name → 400", conv.ID, conversations.Rename{Name: "   "}, "", 400, "invalid_param"},
		{"auto_generate uses the first query", conv.ID, conversations.Rename{AutoGenerate: true, Name: "ignored"},
			"How do I reset my router password after", 0, ""},
		{"auto_generate without messages → 400", empty.ID, conversations.Rename{AutoGenerate: true}, "", 400, "invalid_param"},
		{"unknown conversation → 404", "nope", conversations.Rename{Name: "x"}, "", 404, "not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, err := f.store.Get(f.ctx, f.chat, "alice", conv.ID)
			must(t, err)
			got, err := f.store.RenameConversation(f.ctx, f.chat, "alice", tc.id, tc.r)
			if tc.wantStatus != 0 {
				wantCode(t, err, tc.wantStatus, tc.wantCode)
				return
			}
			must(t, err)
			if got.Name != tc.wantName {
				t.Errorf("name = %q, want %q", got.Name, tc.wantName)
			}
			stored, err := f.store.Get(f.ctx, f.chat, "alice", tc.id)
			must(t, err)
			if stored.Name != tc.wantName || stored.UpdatedAt.Before(before.UpdatedAt) || stored.UpdatedAt.Equal(before.UpdatedAt) {
				t.Errorf("stored %q updated %v (before %v)", stored.Name, stored.UpdatedAt, before.UpdatedAt)
			}
		})
	}
}

func TestNameFromQuery(t *testing.T) {
	long := strings.Repeat("x", 80)
	word := strings.Repeat("w", 25)
	tests := []struct{ query, want string }{
		{"hello", "hello"},
		{"  what\tis\nthe   weather  ", "what is the weather"},
		{"one two three four five six seven eight nine ten", "one two three four five six seven eight"},
		{long, strings.Repeat("x", 60)},
		{word + " " + word + " " + word, word + " " + word},
		{"日本語の質問です", "日本語の質問です"},
		{"   ", conversations.DefaultName},
		{"", conversations.DefaultName},
	}
	for _, tc := range tests {
		if got := conversations.NameFromQuery(tc.query); got != tc.want {
			t.Errorf("NameFromQuery(%q) = %q, want %q", tc.query, got, tc.want)
		}
	}
}
