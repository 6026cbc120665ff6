package models_test

import (
	"encoding/json"
	"fmt"
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
		{&models.WorkflowRun{}, models.WorkflowRunColumns()},
		{&models.WorkflowNodeExecution{}, models.NodeExecutionColumns()},
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

// TestInsertConversationWithMessage stores a conversation and its first
// message together (one statement on PostgreSQL): both read back as
// written, and when the message cannot be stored, neither row is.
func TestInsertConversationWithMessage(t *testing.T) {
	gdb := db.OpenTemp(t)
	now := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	app := models.App{ID: "app-1", Name: "a", Mode: "chat", CreatedAt: now, UpdatedAt: now}
	user := models.EndUser{ID: "eu-1", AppID: app.ID, ExternalUserID: "u", Type: "service_api", CreatedAt: now, UpdatedAt: now}
	if err := gdb.Create(&app).Error; err != nil {
		t.Fatal(err)
	}
	if err := gdb.Create(&user).Error; err != nil {
		t.Fatal(err)
	}
	pair := func(convID, msgID string) (*models.Conversation, *models.Message) {
		c := &models.Conversation{ID: convID, AppID: app.ID, EndUserID: user.ID, Mode: "chat", Name: "New conversation",
			Inputs: "{}", Status: "normal", DialogueCount: 1, CreatedAt: now, UpdatedAt: now}
		m := &models.Message{ID: msgID, AppID: app.ID, ConversationID: &c.ID, EndUserID: user.ID, TaskID: "t",
			Query: "q " + msgID, Inputs: "{}", Answer: "a", Status: "normal", MessageFiles: "[]",
			RetrieverResources: "[]", AgentThoughts: "[]", CreatedAt: now, UpdatedAt: now}
		return c, m
	}
	insert := func(c *models.Conversation, m *models.Message) error {
		return gdb.Transaction(func(tx *gorm.DB) error { return models.InsertConversationWithMessage(tx, c, m) })
	}
	tests := []struct {
		name, conv, msg string
		wantErr         bool
	}{
		{"both stored", "c-1", "m-1", false},
		{"ids filled in", "", "", false},
		{"message id taken: neither stored", "c-2", "m-1", true},
		{"conversation id taken: neither stored", "c-1", "m-3", true},
	}
	for _, tc := range tests {
		c, m := pair(tc.conv, tc.msg)
		err := insert(c, m)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: error %v", tc.name, err)
		}
		var convs, msgs int64
		gdb.Model(&models.Conversation{}).Where("id = ?", c.ID).Count(&convs)
		gdb.Model(&models.Message{}).Where("id = ? AND conversation_id = ?", m.ID, c.ID).Count(&msgs)
		switch {
		case !tc.wantErr && (c.ID == "" || m.ID == "" || convs != 1 || msgs != 1):
			t.Errorf("%s: conversation %q (%d rows), message %q (%d rows)", tc.name, c.ID, convs, m.ID, msgs)
		case tc.wantErr && tc.conv == "c-2" && convs != 0:
			t.Errorf("%s: the conversation was stored without its message", tc.name)
		}
	}
	var convs, msgs int64
	gdb.Model(&models.Conversation{}).Count(&convs)
	gdb.Model(&models.Message{}).Count(&msgs)
	if convs != 2 || msgs != 2 {
		t.Errorf("in the end %d conversations and %d messages, want 2 and 2", convs, msgs)
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

// TestWorkflowRowsReadBackAlike stores a run and its node executions with
// the plain inserts and reads them back through gorm: every field, NULLs
// and times included, comes back as written.
func TestWorkflowRowsReadBackAlike(t *testing.T) {
	gdb := db.OpenTemp(t)
	now := time.Date(2026, 11, 28, 1, 0, 0, 654321000, time.UTC)
	later := now.Add(1500 * time.Millisecond)
	app := models.App{ID: "app-w", Name: "w", Mode: "workflow", CreatedAt: now, UpdatedAt: now}
	if err := gdb.Create(&app).Error; err != nil {
		t.Fatal(err)
	}
	user := models.EndUser{ID: "eu", AppID: app.ID, ExternalUserID: "u", Type: "service_api", CreatedAt: now, UpdatedAt: now}
	version := models.WorkflowVersion{ID: "wf", AppID: app.ID, DefinitionHash: "h", Definition: "d", Version: "v", CreatedAt: now}
	for _, row := range []any{&user, &version} {
		if err := gdb.Create(row).Error; err != nil {
			t.Fatal(err)
		}
	}
	str := func(s string) *string { return &s }
	runs := []models.WorkflowRun{
		{AppID: app.ID, WorkflowID: "wf", TaskID: "t1", EndUserID: str("eu"), TriggeredFrom: "app-run",
			CreatedFrom: "service-api", ConversationID: str("c"), MessageID: str("m"), Status: "succeeded",
			Inputs: `{"a":1}`, Outputs: str(`{"b":2}`), Error: str("e"), ElapsedTime: 1.25, TotalTokens: 9,
			TotalSteps: 3, ExceptionsCount: 1, CreatedAt: now, FinishedAt: &later, PauseState: str(`{}`),
			ReplicaID: str("r1")},
		{AppID: app.ID, WorkflowID: "wf", TaskID: "t2", TriggeredFrom: "app-run", CreatedFrom: "service-api",
			Status: "running", Inputs: "{}", CreatedAt: now},
	}
	execs := []models.WorkflowNodeExecution{
		{NodeID: "n1", NodeType: "llm", Title: "LLM", NodeIndex: 2, PredecessorNodeID: str("start"),
			Inputs: `{"q":"x"}`, ProcessData: str(`{"p":1}`), Outputs: str(`{"text":"y"}`), Status: "failed",
			Error: str("boom"), ElapsedTime: 0.5, ExecutionMetadata: `{"total_tokens":3}`, CreatedAt: now,
			FinishedAt: &later},
		{NodeID: "n2", NodeType: "start", NodeIndex: 1, Inputs: "{}", Status: "succeeded",
			ExecutionMetadata: "{}", CreatedAt: now},
	}
	err := gdb.Transaction(func(tx *gorm.DB) error {
		for i := range runs {
			if err := models.InsertWorkflowRun(tx, &runs[i]); err != nil {
				return err
			}
		}
		for i := range execs {
			execs[i].WorkflowRunID = runs[0].ID
			if err := models.InsertNodeExecution(tx, &execs[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range runs {
		var got models.WorkflowRun
		if err := gdb.Take(&got, "id = ?", want.ID).Error; err != nil {
			t.Fatal(err)
		}
		if d := cmpTimed(got, want); d != "" {
			t.Errorf("run %s: %s", want.TaskID, d)
		}
	}
	for _, want := range execs {
		var got models.WorkflowNodeExecution
		if err := gdb.Take(&got, "id = ?", want.ID).Error; err != nil {
			t.Fatal(err)
		}
		if d := cmpTimed(got, want); d != "" {
			t.Errorf("node execution %s: %s", want.NodeID, d)
		}
	}
}

// cmpTimed compares two rows field by field through their JSON form, in
// which times are compared as instants and pointers by what they point
// at; it describes the first difference.
func cmpTimed(got, want any) string {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	var gm, wm map[string]any
	_ = json.Unmarshal(g, &gm)
	_ = json.Unmarshal(w, &wm)
	for k, wv := range wm {
		gv := gm[k]
		if ws, ok := wv.(string); ok {
			if wt, err := time.Parse(time.RFC3339Nano, ws); err == nil {
				if gt, err := time.Parse(time.RFC3339Nano, fmt.Sprint(gv)); err == nil && gt.Equal(wt) {
					continue
				}
			}
		}
		if fmt.Sprint(gv) != fmt.Sprint(wv) {
			return fmt.Sprintf("%s: got %v, want %v", k, gv, wv)
		}
	}
	return ""
}

// TestFinishWorkflowRunLikeUpdates ends runs with FinishWorkflowRun and,
// for each, a twin run with the gorm map update it replaces; read back,
// the two rows must be alike in every column but the id and task.
func TestFinishWorkflowRunLikeUpdates(t *testing.T) {
	gdb := db.OpenTemp(t)
	now := time.Date(2026, 11, 28, 4, 0, 0, 250000000, time.UTC)
	later := now.Add(2345 * time.Millisecond)
	app := models.App{ID: "app-f", Name: "f", Mode: "advanced-chat", CreatedAt: now, UpdatedAt: now}
	version := models.WorkflowVersion{ID: "wf", AppID: app.ID, DefinitionHash: "h", Definition: "d", Version: "v", CreatedAt: now}
	for _, row := range []any{&app, &version} {
		if err := gdb.Create(row).Error; err != nil {
			t.Fatal(err)
		}
	}
	str := func(s string) *string { return &s }
	tests := []struct {
		name string
		end  models.WorkflowRunEnd
	}{
		{"succeeded", models.WorkflowRunEnd{Status: "succeeded", Outputs: `{"answer":"hi"}`, ElapsedTime: 0.125,
			TotalTokens: 84, TotalSteps: 3, FinishedAt: later}},
		{"failed", models.WorkflowRunEnd{Status: "failed", Outputs: "{}", Error: str("boom"), ElapsedTime: 1.5,
			TotalSteps: 2, ExceptionsCount: 1, FinishedAt: later}},
		{"paused", models.WorkflowRunEnd{Status: "paused", Outputs: "{}", ElapsedTime: 0.25, TotalTokens: 5,
			TotalSteps: 4, FinishedAt: later, PauseState: str(`{"steps":4}`)}},
	}
	for _, tc := range tests {
		var rows [2]models.WorkflowRun
		for i := range rows {
			// Running rows as RunStarted stores them; the first is ended
			// the old way, the second the new.
			rows[i] = models.WorkflowRun{AppID: app.ID, WorkflowID: version.ID, TaskID: fmt.Sprintf("%s-%d", tc.name, i),
				TriggeredFrom: "app-run", CreatedFrom: "service-api", ConversationID: str("c"), MessageID: str("m"),
				Status: "running", Inputs: `{"q":1}`, CreatedAt: now, PauseState: str("stale")}
			if err := gdb.Transaction(func(tx *gorm.DB) error { return models.InsertWorkflowRun(tx, &rows[i]) }); err != nil {
				t.Fatal(err)
			}
		}
		e := tc.end
		err := gdb.Model(&models.WorkflowRun{}).Where("id = ?", rows[0].ID).Updates(map[string]any{
			"pause_state": e.PauseState, "status": e.Status, "outputs": e.Outputs, "error": e.Error,
			"elapsed_time": e.ElapsedTime, "total_tokens": e.TotalTokens, "total_steps": e.TotalSteps,
			"exceptions_count": e.ExceptionsCount, "finished_at": e.FinishedAt,
		}).Error
		if err != nil {
			t.Fatal(err)
		}
		if err := gdb.Transaction(func(tx *gorm.DB) error { return models.FinishWorkflowRun(tx, rows[1].ID, &e) }); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var old, got models.WorkflowRun
		if err := gdb.Take(&old, "id = ?", rows[0].ID).Error; err != nil {
			t.Fatal(err)
		}
		if err := gdb.Take(&got, "id = ?", rows[1].ID).Error; err != nil {
			t.Fatal(err)
		}
		old.ID, old.TaskID = got.ID, got.TaskID
		if d := cmpTimed(got, old); d != "" {
			t.Errorf("%s: %s", tc.name, d)
		}
		if got.Status != e.Status || got.FinishedAt == nil || !got.FinishedAt.Equal(later) {
			t.Errorf("%s: status %q, finished %v", tc.name, got.Status, got.FinishedAt)
		}
	}
}
