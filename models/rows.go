package models

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Plain inserts for the two rows every chat message writes. gorm's Create
// walks the model by reflection and builds the statement anew each time,
// which cost about as much as SQLite's own work on the chat path; these
// send a fixed statement straight to the transaction's connection, where
// the driver's statement cache finds it already prepared. The column
// lists must name every column of the model (TestInsertColumnsCoverModel).

var conversationColumns = []string{"id", "app_id", "end_user_id", "mode", "name", "inputs",
	"introduction", "status", "dialogue_count", "created_at", "updated_at"}

var messageColumns = []string{"id", "app_id", "conversation_id", "end_user_id", "parent_message_id",
	"task_id", "workflow_run_id", "query", "inputs", "answer", "message_tokens", "answer_tokens",
	"total_tokens", "provider_response_latency", "total_price", "currency", "status", "error",
	"generating", "message_files", "retriever_resources", "agent_thoughts", "created_at",
	"updated_at", "replica_id"}

// InsertConversation stores c with one INSERT inside tx (see above); an
// empty ID is filled in first, as Create would.
func InsertConversation(tx *gorm.DB, c *Conversation) error {
	setID(&c.ID)
	return insertRow(tx, "conversations", conversationColumns,
		c.ID, c.AppID, c.EndUserID, c.Mode, c.Name, c.Inputs, c.Introduction, c.Status,
		c.DialogueCount, c.CreatedAt, c.UpdatedAt)
}

// InsertMessage stores m with one INSERT inside tx; an empty ID is filled
// in first.
func InsertMessage(tx *gorm.DB, m *Message) error {
	setID(&m.ID)
	return insertRow(tx, "messages", messageColumns,
		m.ID, m.AppID, m.ConversationID, m.EndUserID, m.ParentMessageID, m.TaskID,
		m.WorkflowRunID, m.Query, m.Inputs, m.Answer, m.MessageTokens, m.AnswerTokens,
		m.TotalTokens, m.ProviderResponseLatency, m.TotalPrice, m.Currency, m.Status, m.Error,
		m.Generating, m.MessageFiles, m.RetrieverResources, m.AgentThoughts, m.CreatedAt,
		m.UpdatedAt, m.ReplicaID)
}

func insertRow(tx *gorm.DB, table string, columns []string, args ...any) error {
	_, err := tx.Statement.ConnPool.ExecContext(tx.Statement.Context,
		insertQuery(tx.Dialector.Name(), table, columns), args...)
	if t, ok := tx.Dialector.(gorm.ErrorTranslator); ok && err != nil && tx.TranslateError {
		return t.Translate(err)
	}
	return err
}

// insertQueries holds the built statements by dialect and table.
var insertQueries sync.Map

// insertQuery is "INSERT INTO table (columns) VALUES (placeholders)" with
// the dialect's placeholders: $1, $2 … for PostgreSQL, ? for SQLite.
func insertQuery(dialect, table string, columns []string) string {
	key := dialect + " " + table
	if q, ok := insertQueries.Load(key); ok {
		return q.(string)
	}
	marks := make([]string, len(columns))
	for i := range marks {
		marks[i] = "?"
		if dialect == "postgres" {
			marks[i] = "$" + strconv.Itoa(i+1)
		}
	}
	q := "INSERT INTO " + table + " (" + strings.Join(columns, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")"
	insertQueries.Store(key, q)
	return q
}

// RenameConversation gives conversation id the name to when it is still
// named from, with one fixed UPDATE inside tx (the rename that follows a
// chat answer whose title came late). It reports whether a row changed.
func RenameConversation(tx *gorm.DB, id, from, to string, now time.Time) (bool, error) {
	q := "UPDATE conversations SET name = ?, updated_at = ? WHERE id = ? AND name = ?"
	if tx.Dialector.Name() == "postgres" {
		q = "UPDATE conversations SET name = $1, updated_at = $2 WHERE id = $3 AND name = $4"
	}
	res, err := tx.Statement.ConnPool.ExecContext(tx.Statement.Context, q, to, now, id, from)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
