package models

import (
	"database/sql"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Plain inserts for the rows every chat message and every workflow node
// writes. gorm's Create
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

var workflowRunColumns = []string{"id", "app_id", "workflow_id", "task_id", "end_user_id",
	"triggered_from", "created_from", "conversation_id", "message_id", "status", "inputs", "outputs",
	"error", "elapsed_time", "total_tokens", "total_steps", "exceptions_count", "created_at",
	"finished_at", "pause_state", "replica_id"}

var nodeExecutionColumns = []string{"id", "workflow_run_id", "node_id", "node_type", "title",
	"node_index", "predecessor_node_id", "inputs", "process_data", "outputs", "status", "error",
	"elapsed_time", "execution_metadata", "created_at", "finished_at"}

var (
	insertConversationSQL = insertSQL("conversations", conversationColumns)
	insertMessageSQL      = insertSQL("messages", messageColumns)
	// The conversation's insert runs as a data-modifying WITH clause of the
	// message's (PostgreSQL only); the message's foreign key is checked at
	// the end of the statement, when the conversation is there.
	insertConversationWithMessageSQL = "WITH conversation AS (" + insertConversationSQL + ") " + insertMessageSQL
	insertWorkflowRunSQL             = insertSQL("workflow_runs", workflowRunColumns)
	insertNodeExecutionSQL           = insertSQL("workflow_node_executions", nodeExecutionColumns)
)

func insertSQL(table string, columns []string) string {
	return "INSERT INTO " + table + " (" + strings.Join(columns, ", ") + ") VALUES (" +
		strings.TrimSuffix(strings.Repeat("?, ", len(columns)), ", ") + ")"
}

// InsertConversation stores c with one INSERT inside tx (see above); an
// empty ID is filled in first, as Create would.
func InsertConversation(tx *gorm.DB, c *Conversation) error {
	setID(&c.ID)
	_, err := execFixed(tx, insertConversationSQL, conversationArgs(c)...)
	return err
}

// InsertMessage stores m with one INSERT inside tx; an empty ID is filled
// in first.
func InsertMessage(tx *gorm.DB, m *Message) error {
	setID(&m.ID)
	_, err := execFixed(tx, insertMessageSQL, messageArgs(m)...)
	return err
}

// InsertConversationWithMessage stores a new conversation and its first
// message inside tx (m names c as its conversation); empty IDs are filled
// in first.
// On PostgreSQL both rows go in one statement, which saves a round trip to
// the server while the shared write queue's leader waits; SQLite, in
// process, takes two.
func InsertConversationWithMessage(tx *gorm.DB, c *Conversation, m *Message) error {
	if tx.Dialector.Name() != "postgres" {
		if err := InsertConversation(tx, c); err != nil {
			return err
		}
		return InsertMessage(tx, m)
	}
	setID(&c.ID)
	setID(&m.ID)
	_, err := execFixed(tx, insertConversationWithMessageSQL, append(conversationArgs(c), messageArgs(m)...)...)
	return err
}

func conversationArgs(c *Conversation) []any {
	return []any{c.ID, c.AppID, c.EndUserID, c.Mode, c.Name, c.Inputs, c.Introduction, c.Status,
		c.DialogueCount, c.CreatedAt, c.UpdatedAt}
}

func messageArgs(m *Message) []any {
	return []any{m.ID, m.AppID, m.ConversationID, m.EndUserID, m.ParentMessageID, m.TaskID,
		m.WorkflowRunID, m.Query, m.Inputs, m.Answer, m.MessageTokens, m.AnswerTokens,
		m.TotalTokens, m.ProviderResponseLatency, m.TotalPrice, m.Currency, m.Status, m.Error,
		m.Generating, m.MessageFiles, m.RetrieverResources, m.AgentThoughts, m.CreatedAt,
		m.UpdatedAt, m.ReplicaID}
}

// InsertWorkflowRun stores r with one INSERT inside tx; an empty ID is
// filled in first.
func InsertWorkflowRun(tx *gorm.DB, r *WorkflowRun) error {
	setID(&r.ID)
	_, err := execFixed(tx, insertWorkflowRunSQL,
		r.ID, r.AppID, r.WorkflowID, r.TaskID, r.EndUserID, r.TriggeredFrom, r.CreatedFrom,
		r.ConversationID, r.MessageID, r.Status, r.Inputs, r.Outputs, r.Error, r.ElapsedTime,
		r.TotalTokens, r.TotalSteps, r.ExceptionsCount, r.CreatedAt, r.FinishedAt, r.PauseState,
		r.ReplicaID)
	return err
}

// InsertNodeExecution stores e with one INSERT inside tx; an empty ID is
// filled in first.
func InsertNodeExecution(tx *gorm.DB, e *WorkflowNodeExecution) error {
	setID(&e.ID)
	_, err := execFixed(tx, insertNodeExecutionSQL,
		e.ID, e.WorkflowRunID, e.NodeID, e.NodeType, e.Title, e.NodeIndex, e.PredecessorNodeID,
		e.Inputs, e.ProcessData, e.Outputs, e.Status, e.Error, e.ElapsedTime, e.ExecutionMetadata,
		e.CreatedAt, e.FinishedAt)
	return err
}

// RenameConversation gives conversation id the name to when it is still
// named from, with one fixed UPDATE inside tx (the rename that follows a
// chat answer whose title came late). It reports whether a row changed.
func RenameConversation(tx *gorm.DB, id, from, to string, now time.Time) (bool, error) {
	res, err := execFixed(tx, "UPDATE conversations SET name = ?, updated_at = ? WHERE id = ? AND name = ?",
		to, now, id, from)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// FinishMessage stores the outcome of message m, inserted while it was
// being generated (a stream), with one fixed UPDATE inside tx; the row
// stops generating and its updated_at becomes now.
func FinishMessage(tx *gorm.DB, m *Message, now time.Time) error {
	_, err := execFixed(tx, `UPDATE messages SET answer = ?, message_tokens = ?, answer_tokens = ?,
		total_tokens = ?, provider_response_latency = ?, total_price = ?, currency = ?, status = ?, error = ?,
		agent_thoughts = ?, generating = ?, message_files = ?, updated_at = ? WHERE id = ?`,
		m.Answer, m.MessageTokens, m.AnswerTokens, m.TotalTokens, m.ProviderResponseLatency, m.TotalPrice,
		m.Currency, m.Status, m.Error, m.AgentThoughts, false, m.MessageFiles, now, m.ID)
	return err
}

// CountExchange adds one exchange to conversation id, with one fixed
// UPDATE inside tx; a name that is not empty becomes its name.
func CountExchange(tx *gorm.DB, id, name string, now time.Time) error {
	if name == "" {
		_, err := execFixed(tx, "UPDATE conversations SET dialogue_count = dialogue_count + 1, updated_at = ? WHERE id = ?",
			now, id)
		return err
	}
	_, err := execFixed(tx, "UPDATE conversations SET dialogue_count = dialogue_count + 1, updated_at = ?, name = ? WHERE id = ?",
		now, name, id)
	return err
}

// WorkflowRunEnd is what the end of a workflow run (or its pause) stores
// in its row.
type WorkflowRunEnd struct {
	Status          string
	Outputs         string // JSON object
	Error           *string
	ElapsedTime     float64
	TotalTokens     int
	TotalSteps      int
	ExceptionsCount int
	FinishedAt      time.Time
	// PauseState is the snapshot of a run that paused, nil otherwise.
	PauseState *string
}

// FinishWorkflowRun stores the end of run id with one fixed UPDATE inside
// tx.
func FinishWorkflowRun(tx *gorm.DB, id string, e *WorkflowRunEnd) error {
	_, err := execFixed(tx, `UPDATE workflow_runs SET pause_state = ?, status = ?, outputs = ?, error = ?,
		elapsed_time = ?, total_tokens = ?, total_steps = ?, exceptions_count = ?, finished_at = ? WHERE id = ?`,
		e.PauseState, e.Status, e.Outputs, e.Error, e.ElapsedTime, e.TotalTokens, e.TotalSteps,
		e.ExceptionsCount, e.FinishedAt, id)
	return err
}

// execFixed runs a fixed statement, written with ? placeholders (and no ?
// anywhere else), on tx's connection, bypassing gorm's statement
// building. Errors are translated as gorm translates its own.
func execFixed(tx *gorm.DB, query string, args ...any) (sql.Result, error) {
	if tx.Dialector.Name() == "postgres" {
		query = postgresPlaceholders(query)
	}
	res, err := tx.Statement.ConnPool.ExecContext(tx.Statement.Context, query, args...)
	if t, ok := tx.Dialector.(gorm.ErrorTranslator); ok && err != nil && tx.TranslateError {
		err = t.Translate(err)
	}
	return res, err
}

// pgQueries holds the PostgreSQL form of each fixed statement.
var pgQueries sync.Map

// postgresPlaceholders numbers the ? placeholders of query as $1, $2 …
func postgresPlaceholders(query string) string {
	if q, ok := pgQueries.Load(query); ok {
		return q.(string)
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	pgQueries.Store(query, b.String())
	return b.String()
}
