package conversations_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/conversation/conversations"
	"appkb/internal/conversation/endusers"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// chatflowVariables replaces the conversation variables of the example
// chatflow, so that every value type has a variable to test with.
const chatflowVariables = `  conversation_variables:
  - id: 11111111-1111-4111-8111-000000000001
    name: topic
    value_type: string
    value: ''
    description: The current topic.
  - id: 11111111-1111-4111-8111-000000000002
    name: turns
    value_type: number
    value: 3
  - id: 11111111-1111-4111-8111-000000000003
    name: profile
    value_type: object
    value: {tier: gold}
  - id: 11111111-1111-4111-8111-000000000004
    name: tags
    value_type: array[string]
    value: [a, b]
  - id: 11111111-1111-4111-8111-000000000005
    name: flags
    value_type: array[boolean]
  - id: 11111111-1111-4111-8111-000000000006
    name: done
    value_type: boolean
    value: false
  - name: no_id
    value_type: array[any]
`

// chatflowDefinition is the example chatflow with the variables above.
func chatflowDefinition(t testing.TB) []byte {
	t.Helper()
	text, err := os.ReadFile("../../../testdata/apps/advanced-chat.yml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(text)
	start := strings.Index(s, "  conversation_variables:\n")
	end := strings.Index(s, "  environment_variables:\n")
	if start < 0 || end < start {
		t.Fatal("advanced-chat.yml no longer has the expected layout")
	}
	return []byte(s[:start] + chatflowVariables + s[end:])
}

// fixture is a database with apps of several modes and helpers to store
// conversations and messages the way the chat runtime would.
type fixture struct {
	t     *testing.T
	db    *gorm.DB
	store *conversations.Store
	ctx   context.Context

	chat, other, chatflow, completion, agent, workflow *models.App
	chatflowDef                                        *apps.Definition

	clock time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	gdb := db.OpenTemp(t)
	f := &fixture{t: t, db: gdb, store: conversations.NewStore(gdb), ctx: context.Background(),
		clock: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	appStore := apps.NewStore(gdb)
	load := func(data []byte) *models.App {
		t.Helper()
		app, err := appStore.Import(f.ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		return app
	}
	file := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile("../../../testdata/apps/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	f.chat = load(file("chat.yml"))
	f.other = load(file("chat.yml"))
	f.chatflow = load(chatflowDefinition(t))
	f.completion = load(file("completion.yml"))
	f.agent = load(file("agent.yml"))
	f.workflow = load(file("workflow.yml"))
	var err error
	if _, f.chatflowDef, err = appStore.Load(f.ctx, f.chatflow.ID); err != nil {
		t.Fatal(err)
	}
	return f
}

// user returns the end user id of name in app, creating it.
func (f *fixture) user(app *models.App, name string) string {
	f.t.Helper()
	eu, err := endusers.NewStore(f.db).Resolve(f.ctx, app.ID, name)
	if err != nil {
		f.t.Fatal(err)
	}
	return eu.ID
}

// tick advances the fixture's clock by a second and returns it.
func (f *fixture) tick() time.Time {
	f.clock = f.clock.Add(time.Second)
	return f.clock
}

// conversation stores a conversation of user in app, created and updated
// at the given times (zero means the next tick).
func (f *fixture) conversation(app *models.App, user, name string, created, updated time.Time) *models.Conversation {
	f.t.Helper()
	if created.IsZero() {
		created = f.tick()
	}
	if updated.IsZero() {
		updated = created
	}
	c := &models.Conversation{AppID: app.ID, EndUserID: f.user(app, user), Mode: app.Mode, Name: name,
		Inputs: `{"city":"Paris"}`, Status: "normal", CreatedAt: created, UpdatedAt: updated}
	if err := f.db.Create(c).Error; err != nil {
		f.t.Fatal(err)
	}
	return c
}

// message stores a message in conv (nil for a text generator message).
func (f *fixture) message(app *models.App, user string, conv *models.Conversation, query string) *models.Message {
	f.t.Helper()
	at := f.tick()
	m := &models.Message{AppID: app.ID, EndUserID: f.user(app, user), TaskID: "task", Query: query,
		Answer: "answer to " + query, Inputs: "{}", Status: "normal",
		MessageFiles: "[]", RetrieverResources: "[]", AgentThoughts: "[]", CreatedAt: at, UpdatedAt: at}
	if conv != nil {
		m.ConversationID = &conv.ID
	}
	if err := f.db.Create(m).Error; err != nil {
		f.t.Fatal(err)
	}
	return m
}

// ids lists the ids of conversations or messages.
func ids[T any](items []T, id func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = id(it)
	}
	return out
}

func convID(c models.Conversation) string { return c.ID }

// wantCode fails unless err is an API error with this status and code.
func wantCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %d %s", status, code)
	}
	e := apperr.From(err)
	if e.Status != status || e.Code != code {
		t.Fatalf("error %v, want %d %s", err, status, code)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func sameIDs(t *testing.T, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ids\n got %v\nwant %v", got, want)
	}
}
