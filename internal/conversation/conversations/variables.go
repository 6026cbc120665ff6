package conversations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/jsonnum"
	"appkb/models"
)

// VariableQuery selects one page of a conversation's variables.
type VariableQuery struct {
	// LastID is the id of the final variable of the previous page.
	LastID string
	// Limit is the page size, 1 to MaxLimit; 0 means DefaultLimit.
	Limit int
	// Name, when set, keeps only the variable of exactly this name.
	Name string
}

func errNoVariables() *apperr.Error {
	return apperr.Fail(apperr.CodeNotChatApp,
		"Conversation variables are only kept by chat apps; the app's mode does not match the route.")
}

// Variables returns a page of the variables of one of user's conversations,
// in the order they were created (for variables seeded together, the order
// of the app definition). def is the app's parsed definition: a chatflow's
// declared conversation variables are stored for the conversation, with
// their initial values, the first time they are read (see SeedVariables). A
// LastID that is not a variable of the conversation is invalid_param, as the
// contract says.
func (s *Store) Variables(ctx context.Context, app *models.App, def *apps.Definition, user, conversationID string, q VariableQuery) (*Page[models.ConversationVariable], error) {
	if !HasVariables(app.Mode) {
		return nil, errNoVariables()
	}
	conv, err := s.get(ctx, app.ID, user, conversationID)
	if err != nil {
		return nil, err
	}
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	if err := s.SeedVariables(ctx, conv.ID, def); err != nil {
		return nil, err
	}
	db := s.db.WithContext(ctx)
	query := db.Where("conversation_id = ?", conv.ID)
	if q.Name != "" {
		query = query.Where("name = ?", q.Name)
	}
	if q.LastID != "" {
		var n int64
		if err := db.Model(&models.ConversationVariable{}).Where("conversation_id = ? AND id = ?", conv.ID, q.LastID).Count(&n).Error; err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, apperr.InvalidParam("last_id is not a variable of this conversation")
		}
		query = query.Where("(created_at, id) > (SELECT created_at, id FROM conversation_variables WHERE conversation_id = ? AND id = ?)", conv.ID, q.LastID)
	}
	var rows []models.ConversationVariable
	if err := query.Order("created_at ASC, id ASC").Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, err
	}
	return cut(rows, limit), nil
}

// UpdateVariable replaces the value of one variable of one of user's
// conversations and returns the variable as stored. value is decoded JSON
// (string, float64, bool, map[string]any, []any or nil) and must suit the
// variable's value type (see CheckValue), otherwise the error is 400
// bad_request. An unknown conversation or variable is not_found.
func (s *Store) UpdateVariable(ctx context.Context, app *models.App, def *apps.Definition, user, conversationID, variableID string, value any) (*models.ConversationVariable, error) {
	if !HasVariables(app.Mode) {
		return nil, errNoVariables()
	}
	conv, err := s.get(ctx, app.ID, user, conversationID)
	if err != nil {
		return nil, err
	}
	if err := s.SeedVariables(ctx, conv.ID, def); err != nil {
		return nil, err
	}
	db := s.db.WithContext(ctx)
	var v models.ConversationVariable
	err = db.Where("conversation_id = ? AND id = ?", conv.ID, variableID).Take(&v).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, apperr.NotFound("Conversation variable not found.")
	}
	if err != nil {
		return nil, err
	}
	if err := CheckValue(v.ValueType, value); err != nil {
		return nil, apperr.Fail(apperr.CodeBadRequest,
			"Variable %q has type %s; %s.", v.Name, v.ValueType, err.Error())
	}
	text, err := json.Marshal(value)
	if err != nil {
		return nil, apperr.Internal(err)
	}
	now := time.Now().UTC()
	err = db.Model(&models.ConversationVariable{}).
		Where("conversation_id = ? AND id = ?", conv.ID, v.ID).
		Updates(map[string]any{"value": string(text), "updated_at": now}).Error
	if err != nil {
		return nil, err
	}
	v.Value = string(text)
	v.UpdatedAt = now
	return &v, nil
}

// SeedVariables stores, for one conversation, each conversation variable
// that def declares and the conversation does not have yet, with the
// declared initial value. Variables already stored keep their values, so
// calling it again is cheap and safe, also concurrently; variables added to
// the definition later are picked up on the next call. Apps without a
// workflow declare none. The rows of one call get creation times one
// microsecond apart, which keeps the definition's order when listed.
func (s *Store) SeedVariables(ctx context.Context, conversationID string, def *apps.Definition) error {
	if def == nil || def.Workflow == nil || len(def.Workflow.ConversationVariables) == 0 {
		return nil
	}
	db := s.db.WithContext(ctx)
	var have []string
	if err := db.Model(&models.ConversationVariable{}).Where("conversation_id = ?", conversationID).Pluck("id", &have).Error; err != nil {
		return err
	}
	stored := make(map[string]bool, len(have))
	for _, id := range have {
		stored[id] = true
	}
	now := time.Now().UTC()
	var rows []models.ConversationVariable
	for _, d := range def.Workflow.ConversationVariables {
		id := VariableID(d)
		if stored[id] {
			continue
		}
		stored[id] = true // a definition that repeats an id seeds it once
		value, err := json.Marshal(initialValue(d.ValueType, d.Value))
		if err != nil {
			return fmt.Errorf("conversation variable %q: initial value: %w", d.Name, err)
		}
		at := now.Add(time.Duration(len(rows)) * time.Microsecond)
		rows = append(rows, models.ConversationVariable{
			ID:             id,
			ConversationID: conversationID,
			Name:           d.Name,
			ValueType:      d.ValueType,
			Value:          string(value),
			Description:    d.Description,
			CreatedAt:      at,
			UpdatedAt:      at,
		})
	}
	if len(rows) == 0 {
		return nil
	}
	return db.Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error
}

// variableNamespace derives ids for declared variables that lack one.
var variableNamespace = uuid.MustParse("3f2b8c1e-9a4d-4e6f-b7a0-5c1d2e3f4a5b")

// VariableID is the id a declared conversation variable is stored under: the
// id from the app definition, or, when the definition gives none, one
// derived from the variable's name, the same every time.
func VariableID(d apps.Variable) string {
	if id := strings.TrimSpace(d.ID); id != "" {
		return id
	}
	return uuid.NewSHA1(variableNamespace, []byte(d.Name)).String()
}

// initialValue is the declared value, or the empty value of its type when
// the definition leaves it out.
func initialValue(valueType string, v any) any {
	if v != nil {
		return normalizeYAML(v)
	}
	switch {
	case valueType == apps.TypeString || valueType == apps.TypeSecret:
		return ""
	case valueType == apps.TypeNumber || valueType == apps.TypeInteger || valueType == apps.TypeFloat:
		return 0
	case valueType == apps.TypeBoolean:
		return false
	case valueType == apps.TypeObject:
		return map[string]any{}
	case strings.HasPrefix(valueType, "array["):
		return []any{}
	}
	return nil
}

// normalizeYAML turns maps with non-string keys, which YAML allows and JSON
// does not, into maps with string keys.
func normalizeYAML(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = normalizeYAML(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[fmt.Sprint(k)] = normalizeYAML(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = normalizeYAML(e)
		}
		return out
	}
	return v
}

// CheckValue reports whether value, decoded JSON, suits a variable of
// valueType. Strings (and secrets) take a string, numbers a number (integer
// a whole one), booleans true or false, objects and files a JSON object, and
// array[T] an array whose every element suits T; array[any] takes any array.
// null suits no type. A value type appkb does not know takes any value but
// null. The error says what was given instead.
func CheckValue(valueType string, value any) error {
	if value == nil {
		return errors.New("null is not accepted")
	}
	if elem, ok := strings.CutPrefix(valueType, "array["); ok && strings.HasSuffix(elem, "]") {
		elem = strings.TrimSuffix(elem, "]")
		list, ok := value.([]any)
		if !ok {
			return fmt.Errorf("an array is needed, not %s", jsonKind(value))
		}
		if elem == "any" {
			return nil
		}
		for i, e := range list {
			if e == nil || !fits(elem, e) {
				return fmt.Errorf("element %d must be of type %s, not %s", i, elem, jsonKind(e))
			}
		}
		return nil
	}
	if !fits(valueType, value) {
		return fmt.Errorf("a value of type %s is needed, not %s", valueType, jsonKind(value))
	}
	return nil
}

// fits checks one non-array value against a scalar or object type.
func fits(valueType string, v any) bool {
	switch valueType {
	case apps.TypeString, apps.TypeSecret:
		_, ok := v.(string)
		return ok
	case apps.TypeNumber, apps.TypeFloat:
		_, ok := jsonnum.Float(v)
		return ok
	case apps.TypeInteger:
		f, ok := jsonnum.Float(v)
		return ok && f == math.Trunc(f)
	case apps.TypeBoolean:
		_, ok := v.(bool)
		return ok
	case apps.TypeObject, apps.TypeFile:
		_, ok := v.(map[string]any)
		return ok
	}
	return true
}

// jsonKind names the JSON type of a decoded value, for error messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64, float32, int, int64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// ValueText is a stored value as the API shows it: a string as itself,
// anything else as its JSON text, and a stored null as nil.
func ValueText(stored string) *string {
	trimmed := strings.TrimSpace(stored)
	if trimmed == "" || trimmed == "null" {
		return nil
	}
	var s string
	if strings.HasPrefix(trimmed, `"`) && json.Unmarshal([]byte(trimmed), &s) == nil {
		return &s
	}
	return &trimmed
}
