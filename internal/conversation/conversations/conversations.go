// Package conversations is the read-and-manage side of chat: an end user's
// conversations (list, rename, delete), the message history of one of them,
// the variables a chatflow keeps per conversation, and the ratings end users
// give to answers. Creating conversations and messages is the chat runtime's
// job; this package only works on what is stored.
//
// Everything is scoped by app and by the `user` string the client sends. A
// `user` that never called the app, or none at all, owns nothing: lists come
// back empty and any id it names is not found, exactly as if the id did not
// exist. Nothing here creates end users.
package conversations

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"appkb/internal/apps"
	"appkb/internal/conversation/endusers"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// Page sizes shared by the list operations.
const (
	DefaultLimit = 20
	MaxLimit     = 100
)

// Sort orders of List. A leading "-" means newest first.
const (
	SortCreatedAsc  = "created_at"
	SortCreatedDesc = "-created_at"
	SortUpdatedAsc  = "updated_at"
	SortUpdatedDesc = "-updated_at"
)

// DefaultSort is the order List uses when none is asked for.
const DefaultSort = SortUpdatedDesc

// sortColumns maps each accepted sort value to its column and direction.
var sortColumns = map[string]struct {
	column string
	desc   bool
}{
	SortCreatedAsc:  {"created_at", false},
	SortCreatedDesc: {"created_at", true},
	SortUpdatedAsc:  {"updated_at", false},
	SortUpdatedDesc: {"updated_at", true},
}

// Page is one window of a cursor-paged list.
type Page[T any] struct {
	// Limit is the page size that was applied.
	Limit int
	// HasMore reports whether the list goes on past this page.
	HasMore bool
	Data    []T
}

// Store works on the conversations, messages, conversation variables and
// feedback of every app.
type Store struct {
	db    *gorm.DB
	users *endusers.Store
}

// NewStore returns a Store over db.
func NewStore(db *gorm.DB) *Store {
	return &Store{db: db, users: endusers.NewStore(db)}
}

// IsChatMode reports whether apps of the mode hold conversations: chatbots,
// agent chats, chatflows and agents.
func IsChatMode(mode string) bool {
	switch mode {
	case apps.ModeChat, apps.ModeAgentChat, apps.ModeAdvancedChat, apps.ModeAgent:
		return true
	}
	return false
}

// HasVariables reports whether apps of the mode can keep conversation
// variables. The contract offers the variable operations to chatbots, agent
// chats and chatflows, but not to agent apps.
func HasVariables(mode string) bool {
	switch mode {
	case apps.ModeChat, apps.ModeAgentChat, apps.ModeAdvancedChat:
		return true
	}
	return false
}

// ErrNotChatApp is the answer to a conversation operation on an app that has
// no conversations (a text generator or a workflow).
func ErrNotChatApp() *apperr.Error {
	return apperr.Fail(apperr.CodeNotChatApp,
		"This operation is only for chat apps; the app's mode does not match the route.")
}

func requireChatApp(app *models.App) error {
	if !IsChatMode(app.Mode) {
		return ErrNotChatApp()
	}
	return nil
}

func conversationNotFound() *apperr.Error {
	return apperr.NotFound("Conversation not found.")
}

// ListQuery selects one page of an end user's conversations.
type ListQuery struct {
	// LastID is the id of the final conversation of the previous page; empty
	// for the first page.
	LastID string
	// Limit is the page size, 1 to MaxLimit; 0 means DefaultLimit.
	Limit int
	// SortBy is one of the Sort… constants; empty means DefaultSort.
	SortBy string
}

// List returns one page of the conversations that user has with app, in the
// order SortBy asks for. Conversations with the same timestamp are ordered by
// id, so that paging never skips or repeats one. A LastID that is not one of
// the user's conversations is not_found.
func (s *Store) List(ctx context.Context, app *models.App, user string, q ListQuery) (*Page[models.Conversation], error) {
	if err := requireChatApp(app); err != nil {
		return nil, err
	}
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	if q.SortBy == "" {
		q.SortBy = DefaultSort
	}
	order, ok := sortColumns[q.SortBy]
	if !ok {
		return nil, apperr.InvalidParam("sort_by must be one of created_at, -created_at, updated_at, -updated_at")
	}
	ownerID, err := s.owner(ctx, app.ID, user)
	if err != nil {
		return nil, err
	}
	if ownerID == "" && q.LastID == "" {
		return &Page[models.Conversation]{Limit: limit, Data: []models.Conversation{}}, nil
	}

	db := s.db.WithContext(ctx)
	mine := func() *gorm.DB {
		return db.Model(&models.Conversation{}).Where("app_id = ? AND end_user_id = ?", app.ID, ownerID)
	}
	query := mine()
	if q.LastID != "" {
		var n int64
		if err := mine().Where("id = ?", q.LastID).Count(&n).Error; err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, apperr.NotFound("The conversation given as last_id does not exist.")
		}
		// Row values compare the sort column first and the id second, the
		// same way the ORDER BY below sorts.
		cmp := ">"
		if order.desc {
			cmp = "<"
		}
		query = query.Where(fmt.Sprintf("(%[1]s, id) %[2]s (SELECT %[1]s, id FROM conversations WHERE id = ?)", order.column, cmp), q.LastID)
	}
	dir := " ASC"
	if order.desc {
		dir = " DESC"
	}
	var rows []models.Conversation
	if err := query.Order(order.column + dir + ", id" + dir).Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, err
	}
	return cut(rows, limit), nil
}

// Get returns one of user's conversations with app, or not_found.
func (s *Store) Get(ctx context.Context, app *models.App, user, id string) (*models.Conversation, error) {
	if err := requireChatApp(app); err != nil {
		return nil, err
	}
	return s.get(ctx, app.ID, user, id)
}

func (s *Store) get(ctx context.Context, appID, user, id string) (*models.Conversation, error) {
	ownerID, err := s.owner(ctx, appID, user)
	if err != nil {
		return nil, err
	}
	if ownerID == "" || id == "" {
		return nil, conversationNotFound()
	}
	var conv models.Conversation
	err = s.db.WithContext(ctx).
		Where("id = ? AND app_id = ? AND end_user_id = ?", id, appID, ownerID).
		Take(&conv).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, conversationNotFound()
	}
	if err != nil {
		return nil, err
	}
	return &conv, nil
}

// Delete removes one of user's conversations together with its messages,
// their feedback and the conversation's variables.
func (s *Store) Delete(ctx context.Context, app *models.App, user, id string) error {
	conv, err := s.Get(ctx, app, user, id)
	if err != nil {
		return err
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// The foreign keys cascade too; deleting explicitly keeps the
		// outcome independent of whether they are enforced.
		steps := []struct {
			sql  string
			args []any
		}{
			{`DELETE FROM message_feedbacks WHERE message_id IN (SELECT id FROM messages WHERE conversation_id = ?)`, []any{conv.ID}},
			{`DELETE FROM messages WHERE conversation_id = ?`, []any{conv.ID}},
			{`DELETE FROM conversation_variables WHERE conversation_id = ?`, []any{conv.ID}},
			{`DELETE FROM conversations WHERE id = ?`, []any{conv.ID}},
		}
		for _, st := range steps {
			if err := tx.Exec(st.sql, st.args...).Error; err != nil {
				return err
			}
		}
		return nil
	})
}

// Rename is what RenameConversation sets.
type Rename struct {
	// Name is the new name; it must not be blank unless AutoGenerate is set.
	Name string
	// AutoGenerate derives the name from the conversation's first query
	// (see NameFromQuery) and ignores Name.
	AutoGenerate bool
}

// RenameConversation gives one of user's conversations a new name and
// returns it updated. Generating a name for a conversation without messages
// is invalid_param.
func (s *Store) RenameConversation(ctx context.Context, app *models.App, user, id string, r Rename) (*models.Conversation, error) {
	conv, err := s.Get(ctx, app, user, id)
	if err != nil {
		return nil, err
	}
	db := s.db.WithContext(ctx)
	var name string
	if r.AutoGenerate {
		var first []models.Message
		if err := db.Where("conversation_id = ?", conv.ID).Order("created_at ASC, id ASC").Limit(1).Find(&first).Error; err != nil {
			return nil, err
		}
		if len(first) == 0 {
			return nil, apperr.InvalidParam("The conversation has no messages to generate a name from.")
		}
		name = NameFromQuery(first[0].Query)
	} else {
		name = strings.TrimSpace(r.Name)
		if name == "" {
			return nil, apperr.InvalidParam("name is required unless auto_generate is true")
		}
	}
	now := time.Now().UTC()
	err = db.Model(&models.Conversation{}).Where("id = ?", conv.ID).
		Updates(map[string]any{"name": name, "updated_at": now}).Error
	if err != nil {
		return nil, err
	}
	conv.Name = name
	conv.UpdatedAt = now
	return conv, nil
}

// Limits of the built-in naming.
const (
	nameMaxWords = 8
	nameMaxRunes = 60
	// DefaultName is what a conversation is called when its query has no
	// words at all.
	DefaultName = "New conversation"
)

// NameFromQuery is appkb's built-in conversation naming, used where no model
// is asked to do it: the first eight words of the query on one line, fewer
// when the next word would take the name past 60 characters. A first word
// longer than that is cut at 60 characters. A query without words gives
// DefaultName. The chat runtime names new conversations for the built-in
// model the same way, so renaming with auto_generate gives the same name.
func NameFromQuery(query string) string {
	words := strings.Fields(query)
	if len(words) == 0 {
		return DefaultName
	}
	name := words[0]
	for _, w := range words[1:min(len(words), nameMaxWords)] {
		if utf8.RuneCountInString(name)+1+utf8.RuneCountInString(w) > nameMaxRunes {
			break
		}
		name += " " + w
	}
	if utf8.RuneCountInString(name) > nameMaxRunes {
		name = string([]rune(name)[:nameMaxRunes])
	}
	return name
}

// owner returns the id of the end user called user in appID, or "" when
// there is no such end user (or user is blank): such a caller owns nothing.
func (s *Store) owner(ctx context.Context, appID, user string) (string, error) {
	user = strings.TrimSpace(user)
	if user == "" {
		return "", nil
	}
	eu, err := s.users.Find(ctx, appID, user)
	if apperr.Is(err, apperr.CodeNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return eu.ID, nil
}

// pageLimit applies the default page size and rejects sizes out of range.
func pageLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultLimit, nil
	case limit < 1 || limit > MaxLimit:
		return 0, apperr.InvalidParam("limit must be between 1 and %d", MaxLimit)
	}
	return limit, nil
}

// cut turns up to limit+1 fetched rows into a page: the extra row only
// tells that more follow.
func cut[T any](rows []T, limit int) *Page[T] {
	p := &Page[T]{Limit: limit, Data: rows}
	if len(rows) > limit {
		p.HasMore = true
		p.Data = rows[:limit]
	}
	if p.Data == nil {
		p.Data = []T{}
	}
	return p
}
