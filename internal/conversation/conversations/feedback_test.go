package conversations_test

import (
	"testing"
	"time"

	"appkb/internal/conversation/conversations"
	"appkb/models"
)

func TestSetFeedback(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation(f.chat, "alice", "", time.Time{}, time.Time{})
	msg := f.message(f.chat, "alice", conv, "hi")
	bobConv := f.conversation(f.chat, "bob", "", time.Time{}, time.Time{})
	bobMsg := f.message(f.chat, "bob", bobConv, "yo")
	gen := f.message(f.completion, "alice", nil, "write a poem")
	comment := "spot on"

	stored := func() *models.MessageFeedback {
		var fbs []models.MessageFeedback
		must(t, f.db.Where("message_id = ?", msg.ID).Find(&fbs).Error)
		if len(fbs) == 0 {
			return nil
		}
		return &fbs[0]
	}

	// The steps run in order; each one starts from the state the last left.
	steps := []struct {
		name        string
		app         *models.App
		user, msgID string
		rating      string
		content     *string
		wantStatus  int
		wantCode    string
		wantRating  string // rating stored on alice's message afterwards; "" for none
	}{
		{"withdrawing when there is nothing → 400", f.chat, "alice", msg.ID, "", nil, 400, "invalid_param", ""},
		{"like with a comment", f.chat, "alice", msg.ID, "like", &comment, 0, "", "like"},
		{"changing to dislike", f.chat, "alice", msg.ID, "dislike", nil, 0, "", "dislike"},
		{"another user cannot rate it → 404", f.chat, "bob", msg.ID, "like", nil, 404, "not_found", "dislike"},
		{"another user cannot withdraw it → 404", f.chat, "bob", msg.ID, "", nil, 404, "not_found", "dislike"},
		{"a user who never called → 404", f.chat, "mallory", msg.ID, "like", nil, 404, "not_found", "dislike"},
		{"the same user through another app → 404", f.other, "alice", msg.ID, "like", nil, 404, "not_found", "dislike"},
		{"unknown message → 404", f.chat, "alice", "nope", "like", nil, 404, "not_found", "dislike"},
		{"blank user → 400", f.chat, " ", msg.ID, "like", nil, 400, "invalid_param", "dislike"},
		{"unknown rating → 400", f.chat, "alice", msg.ID, "meh", nil, 400, "invalid_param", "dislike"},
		{"withdrawing", f.chat, "alice", msg.ID, "", nil, 0, "", ""},
		{"bob rates his own message", f.chat, "bob", bobMsg.ID, "like", nil, 0, "", ""},
		{"text generator messages can be rated", f.completion, "alice", gen.ID, "like", nil, 0, "", ""},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			err := f.store.SetFeedback(f.ctx, st.app, st.user, st.msgID, st.rating, st.content)
			if st.wantStatus != 0 {
				wantCode(t, err, st.wantStatus, st.wantCode)
			} else {
				must(t, err)
			}
			fb := stored()
			switch {
			case st.wantRating == "" && fb != nil:
				t.Errorf("feedback left: %+v", fb)
			case st.wantRating != "" && (fb == nil || fb.Rating != st.wantRating):
				t.Errorf("stored %+v, want rating %s", fb, st.wantRating)
			}
			if st.name == "changing to dislike" && fb.Content != nil {
				t.Errorf("content of the replaced rating kept: %q", *fb.Content)
			}
		})
	}
}

func TestFeedbackPage(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation(f.chat, "alice", "", time.Time{}, time.Time{})
	var want []string // newest first
	for i := range 5 {
		m := f.message(f.chat, "alice", conv, "q")
		must(t, f.store.SetFeedback(f.ctx, f.chat, "alice", m.ID, []string{"like", "dislike"}[i%2], nil))
		var fb models.MessageFeedback
		must(t, f.db.Where("message_id = ?", m.ID).Take(&fb).Error)
		// Spread the creation times so that the order does not depend on
		// how fast the loop runs.
		must(t, f.db.Model(&fb).Update("created_at", f.tick()).Error)
		want = append([]string{fb.ID}, want...)
	}
	otherConv := f.conversation(f.other, "alice", "", time.Time{}, time.Time{})
	otherMsg := f.message(f.other, "alice", otherConv, "q")
	must(t, f.store.SetFeedback(f.ctx, f.other, "alice", otherMsg.ID, "like", nil))
	genMsg := f.message(f.completion, "alice", nil, "poem")
	must(t, f.store.SetFeedback(f.ctx, f.completion, "alice", genMsg.ID, "like", nil))

	feedbackID := func(fb conversations.Feedback) string { return fb.ID }
	tests := []struct {
		name        string
		page, limit int
		want        []string
		wantStatus  int
	}{
		{"defaults", 0, 0, want, 0},
		{"first page", 1, 2, want[:2], 0},
		{"second page", 2, 2, want[2:4], 0},
		{"last, partial page", 3, 2, want[4:], 0},
		{"past the end → empty", 4, 2, []string{}, 0},
		{"limit 101 is allowed", 1, 101, want, 0},
		{"limit 102 → 400", 1, 102, nil, 400},
		{"negative page → 400", -1, 10, nil, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.store.FeedbackPage(f.ctx, f.chat, tc.page, tc.limit)
			if tc.wantStatus != 0 {
				wantCode(t, err, tc.wantStatus, "invalid_param")
				return
			}
			must(t, err)
			sameIDs(t, ids(got, feedbackID), tc.want)
		})
	}

	got, err := f.store.FeedbackPage(f.ctx, f.chat, 1, 1)
	must(t, err)
	fb := got[0]
	if fb.AppID != f.chat.ID || fb.ConversationID == nil || *fb.ConversationID != conv.ID ||
		fb.FromSource != "user" || fb.FromEndUserID == nil || *fb.FromEndUserID != f.user(f.chat, "alice") ||
		fb.CreatedAt.Location() != time.UTC {
		t.Errorf("item %+v", fb)
	}
	gens, err := f.store.FeedbackPage(f.ctx, f.completion, 1, 10)
	must(t, err)
	if len(gens) != 1 || gens[0].ConversationID != nil {
		t.Errorf("text generator feedback: %+v", gens)
	}
}
