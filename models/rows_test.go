package models_test

import (
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"appkb/db"
	"appkb/models"
)

// TestInsertColumnsCoverModel checks that the plain inserts write every
// column gorm knows for the model, so a field added later is not silently
// left out of the chat path's rows.
func TestInsertColumnsCoverModel(t *testing.T) {
	tests := []struct {
		model   any
		columns []string
	}{
		{&models.Conversation{}, models.ConversationColumns()},
		{&models.Message{}, models.MessageColumns()},
	}
	for _, tc := range tests {
		s, err := schema.Parse(tc.model, &sync.Map{}, schema.NamingStrategy{})
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(s.DBNames)
		got := slices.Clone(tc.columns)
		sort.Strings(want)
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: insert columns %v, model columns %v", s.Table, got, want)
		}
	}
}

// TestInsertRowsReadBackAlike stores rows with the plain inserts and reads
// them back through gorm: every field, NULLs and times included, must come
// back as written (on SQLite, and on PostgreSQL when configured).
func TestInsertRowsReadBackAlike(t *testing.T) {
	gdb := db.OpenTemp(t)
	now := time.Date(2026, 11, 26, 13, 0, 0, 123456000, time.UTC)
	app := models.App{ID: "app-1", Name: "a", Mode: "chat", CreatedAt: now, UpdatedAt: now}
	if err := gdb.Create(&app).Error; err != nil {
		t.Fatal(err)
	}
	user := models.EndUser{ID: "eu-1", AppID: app.ID, ExternalUserID: "u", Type: "service_api", CreatedAt: now, UpdatedAt: now}
	if err := gdb.Create(&user).Error; err != nil {
		t.Fatal(err)
	}
	conv := models.Conversation{AppID: app.ID, EndUserID: user.ID, Mode: "chat", Name: "n", Inputs: `{"a":1}`,
		Introduction: "hi", Status: "normal", DialogueCount: 1, CreatedAt: now, UpdatedAt: now}
	price, currency, errText, replica := "0.0001", "USD", "boom", "r1"
	full := models.Message{AppID: app.ID, ConversationID: &conv.ID, EndUserID: user.ID, TaskID: "t",
		Query: "q", Inputs: "{}", Answer: "a", MessageTokens: 3, AnswerTokens: 4, TotalTokens: 7,
		ProviderResponseLatency: 0.25, TotalPrice: &price, Currency: &currency, Status: "error",
		Error: &errText, Generating: true, MessageFiles: "[]", RetrieverResources: "[]",
		AgentThoughts: "[]", CreatedAt: now, UpdatedAt: now.Add(time.Second), ReplicaID: &replica}
	bare := models.Message{AppID: app.ID, EndUserID: user.ID, Query: "q2", Inputs: "{}", Status: "normal",
		MessageFiles: "[]", RetrieverResources: "[]", AgentThoughts: "[]", CreatedAt: now, UpdatedAt: now}
	err := gdb.Transaction(func(tx *gorm.DB) error {
		if err := models.InsertConversation(tx, &conv); err != nil {
			return err
		}
		full.ConversationID = &conv.ID
		if err := models.InsertMessage(tx, &full); err != nil {
			return err
		}
		return models.InsertMessage(tx, &bare)
	})
	if err != nil {
		t.Fatal(err)
	}
	if conv.ID == "" || full.ID == "" || bare.ID == "" {
		t.Fatal("an ID was not filled in")
	}
	var gotConv models.Conversation
	if err := gdb.Take(&gotConv, "id = ?", conv.ID).Error; err != nil {
		t.Fatal(err)
	}
	if !gotConv.CreatedAt.Equal(conv.CreatedAt) || gotConv.Name != conv.Name || gotConv.Inputs != conv.Inputs ||
		gotConv.DialogueCount != 1 || gotConv.Introduction != "hi" || gotConv.EndUserID != user.ID {
		t.Errorf("conversation read back as %+v, want %+v", gotConv, conv)
	}
	for _, want := range []models.Message{full, bare} {
		var got models.Message
		if err := gdb.Take(&got, "id = ?", want.ID).Error; err != nil {
			t.Fatal(err)
		}
		if !got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
			t.Errorf("times read back as %v / %v, want %v / %v", got.CreatedAt, got.UpdatedAt, want.CreatedAt, want.UpdatedAt)
		}
		got.CreatedAt, got.UpdatedAt = want.CreatedAt, want.UpdatedAt
		if d := diffMessage(got, want); d != "" {
			t.Errorf("message %s: %s", want.Query, d)
		}
	}
	// A duplicate key is reported as gorm reports it.
	err = gdb.Transaction(func(tx *gorm.DB) error { return models.InsertMessage(tx, &bare) })
	if err == nil {
		t.Fatal("inserting the same message twice succeeded")
	}
}

func diffMessage(a, b models.Message) string {
	str := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	type pair struct{ name, x, y string }
	for _, p := range []pair{
		{"conversation_id", str(a.ConversationID), str(b.ConversationID)},
		{"total_price", str(a.TotalPrice), str(b.TotalPrice)},
		{"currency", str(a.Currency), str(b.Currency)},
		{"error", str(a.Error), str(b.Error)},
		{"replica_id", str(a.ReplicaID), str(b.ReplicaID)},
		{"parent_message_id", str(a.ParentMessageID), str(b.ParentMessageID)},
		{"workflow_run_id", str(a.WorkflowRunID), str(b.WorkflowRunID)},
	} {
		if p.x != p.y {
			return p.name + ": " + p.x + " != " + p.y
		}
	}
	a.ConversationID, a.TotalPrice, a.Currency, a.Error, a.ReplicaID, a.ParentMessageID, a.WorkflowRunID = nil, nil, nil, nil, nil, nil, nil
	b.ConversationID, b.TotalPrice, b.Currency, b.Error, b.ReplicaID, b.ParentMessageID, b.WorkflowRunID = nil, nil, nil, nil, nil, nil, nil
	if a != b {
		return "fields differ"
	}
	return ""
}

// TestRenameConversationOnlyFromExpectedName checks that the late rename
// changes a conversation only while it still has the name it expects.
func TestRenameConversationOnlyFromExpectedName(t *testing.T) {
	gdb, now, conv, _ := newConversation(t)
	later := now.Add(time.Minute)
	tests := []struct {
		from, to    string
		wantChanged bool
		wantName    string
	}{
		{"New conversation", "Weather in Paris", true, "Weather in Paris"},
		// The name moved on meanwhile (a client renamed it): left alone.
		{"New conversation", "Something else", false, "Weather in Paris"},
	}
	for _, tc := range tests {
		var changed bool
		err := gdb.Transaction(func(tx *gorm.DB) error {
			var err error
			changed, err = models.RenameConversation(tx, conv.ID, tc.from, tc.to, later)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var got models.Conversation
		if err := gdb.Take(&got, "id = ?", conv.ID).Error; err != nil {
			t.Fatal(err)
		}
		if changed != tc.wantChanged || got.Name != tc.wantName || !got.UpdatedAt.Equal(later) {
			t.Errorf("rename %q -> %q: changed %v, name %q, updated %v; want %v, %q, %v",
				tc.from, tc.to, changed, got.Name, got.UpdatedAt, tc.wantChanged, tc.wantName, later)
		}
	}
}

// TestFinishMessageAndCountExchange checks the two UPDATEs that end a
// streamed message: the message row takes its outcome and stops
// generating, and the conversation counts the exchange, named or not.
func TestFinishMessageAndCountExchange(t *testing.T) {
	gdb, now, conv, user := newConversation(t)
	msg := models.Message{ID: "m-1", AppID: conv.AppID, ConversationID: &conv.ID, EndUserID: user.ID, Query: "q", Inputs: "{}",
		Status: "normal", Generating: true, MessageFiles: "[]", RetrieverResources: "[]", AgentThoughts: "[]",
		CreatedAt: now, UpdatedAt: now}
	if err := gdb.Create(&msg).Error; err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Minute)
	price, currency, errText := "0.002", "USD", "stopped"
	done := msg
	done.Answer, done.MessageTokens, done.AnswerTokens, done.TotalTokens = "the answer", 5, 7, 12
	done.ProviderResponseLatency, done.TotalPrice, done.Currency = 0.5, &price, &currency
	done.Status, done.Error, done.AgentThoughts, done.MessageFiles = "error", &errText, `[{"id":"t"}]`, `[{"id":"f"}]`
	tests := []struct {
		name      string
		rename    string
		wantName  string
		wantCount int
	}{
		{"named with the first exchange", "Weather", "Weather", 1},
		{"counted without a new name", "", "Weather", 2},
	}
	for _, tc := range tests {
		err := gdb.Transaction(func(tx *gorm.DB) error {
			if err := models.FinishMessage(tx, &done, later); err != nil {
				return err
			}
			return models.CountExchange(tx, conv.ID, tc.rename, later)
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var gotConv models.Conversation
		if err := gdb.Take(&gotConv, "id = ?", conv.ID).Error; err != nil {
			t.Fatal(err)
		}
		if gotConv.Name != tc.wantName || gotConv.DialogueCount != tc.wantCount || !gotConv.UpdatedAt.Equal(later) {
			t.Errorf("%s: conversation %q, %d exchanges, updated %v", tc.name, gotConv.Name, gotConv.DialogueCount, gotConv.UpdatedAt)
		}
	}
	var got models.Message
	if err := gdb.Take(&got, "id = ?", msg.ID).Error; err != nil {
		t.Fatal(err)
	}
	if !got.UpdatedAt.Equal(later) || !got.CreatedAt.Equal(now) {
		t.Errorf("times %v / %v", got.CreatedAt, got.UpdatedAt)
	}
	want := done
	want.Generating = false
	got.CreatedAt, got.UpdatedAt = want.CreatedAt, want.UpdatedAt
	if d := diffMessage(got, want); d != "" {
		t.Errorf("finished message: %s", d)
	}
}

// TestNewIDIsOrderedUUID checks the ids of new rows: valid UUIDs of
// version 7, each sorting after the one made before it.
func TestNewIDIsOrderedUUID(t *testing.T) {
	prev := ""
	for i := range 2000 {
		id := models.NewID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Fatalf("id %q: version %v, variant %v, err %v", id, u.Version(), u.Variant(), err)
		}
		if id <= prev {
			t.Fatalf("id %d %q does not sort after %q", i, id, prev)
		}
		prev = id
	}
}

// newConversation stores an app, an end user and a conversation of theirs
// named "New conversation", all created at now.
func newConversation(t *testing.T) (*gorm.DB, time.Time, *models.Conversation, *models.EndUser) {
	t.Helper()
	gdb := db.OpenTemp(t)
	now := time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC)
	app := models.App{ID: "app-1", Name: "a", Mode: "chat", CreatedAt: now, UpdatedAt: now}
	user := models.EndUser{ID: "eu-1", AppID: app.ID, ExternalUserID: "u", Type: "service_api", CreatedAt: now, UpdatedAt: now}
	conv := models.Conversation{ID: "c-1", AppID: app.ID, EndUserID: user.ID, Mode: "chat", Name: "New conversation",
		Inputs: "{}", Status: "normal", CreatedAt: now, UpdatedAt: now}
	for _, row := range []any{&app, &user, &conv} {
		if err := gdb.Create(row).Error; err != nil {
			t.Fatal(err)
		}
	}
	return gdb, now, &conv, &user
}
