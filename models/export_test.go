package models

// The column lists of the plain inserts, for the tests of package models_test.
func ConversationColumns() []string  { return conversationColumns }
func MessageColumns() []string       { return messageColumns }
func WorkflowRunColumns() []string   { return workflowRunColumns }
func NodeExecutionColumns() []string { return nodeExecutionColumns }
