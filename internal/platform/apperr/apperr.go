// Package apperr holds the one error type of appkb. Every layer returns it (or
// wraps a foreign error in it); the HTTP layer renders it once as the
// contract's error body {"code","message","status"}.
package apperr

import (
	"errors"
	"fmt"
)

// Error codes used by the API. They are part of the wire contract: clients
// branch on them, so they never change spelling.
const (
	CodeInvalidParam        = "invalid_param"
	CodeBadRequest          = "bad_request"
	CodeUnauthorized        = "unauthorized"
	CodeForbidden           = "forbidden"
	CodeNotFound            = "not_found"
	CodeMethodNotAllowed    = "method_not_allowed"
	CodeConflict            = "conflict"
	CodeTooLarge            = "request_entity_too_large"
	CodeUnsupportedFileType = "unsupported_file_type"
	CodeInternal            = "internal_server_error"
	CodeNotImplemented      = "not_implemented"
	CodeAppUnavailable      = "app_unavailable"
	CodeNotChatApp          = "not_chat_app"
	CodeNotWorkflowApp      = "not_workflow_app"

	// A knowledge base with that name exists already (409 on creation).
	CodeDatasetNameDuplicate = "dataset_name_duplicate"

	// Knowledge documents: an archived document cannot change (403); a
	// batch status action or a metadata value that is not understood (400).
	CodeArchivedImmutable = "archived_document_immutable"
	CodeInvalidAction     = "invalid_action"
	CodeInvalidMetadata   = "invalid_metadata"

	// A conversation that can take no more messages.
	CodeConversationCompleted = "conversation_completed"
	// The end user asked for by id does not exist in the app (404).
	CodeEndUserNotFound = "end_user_not_found"

	// Model call failures, all answered with status 400.
	CodeProviderNotInitialize  = "provider_not_initialize"     // not configured, bad credentials, unreachable
	CodeProviderQuotaExceeded  = "provider_quota_exceeded"     // the provider keeps refusing with 429
	CodeModelNotSupported      = "model_currently_not_support" // no such model or endpoint at the provider
	CodeCompletionRequestError = "completion_request_error"    // any other failed model call
)

// Error is an API-facing failure: a stable code, a message that is safe to
// show and the HTTP status the code answers with. Err, when set, is the
// underlying cause; it is logged but never sent to the client.
//
// The domain names a failure by its code only (Fail, FailWith and the
// helpers below); the status comes from the one table in status.go. Only
// the HTTP layer, which answers for the protocol itself (an unknown
// route, a timeout, a rate limit), picks a status directly with New or
// Wrap.
type Error struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Err     error  `json:"-"`
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s (%d): %s: %v", e.Code, e.Status, e.Message, e.Err)
	}
	return fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Fail builds the error of a code; its status is the one the code has in
// the status table.
func Fail(code, format string, args ...any) *Error {
	return &Error{Status: StatusOf(code), Code: code, Message: fmt.Sprintf(format, args...)}
}

// FailWith is Fail with a cause attached.
func FailWith(err error, code, format string, args ...any) *Error {
	e := Fail(code, format, args...)
	e.Err = err
	return e
}

// New builds an error with an explicit status and code. It is for the HTTP
// layer; the domain uses Fail.
func New(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap attaches a cause to a new error with an explicit status (HTTP layer
// only, like New).
func Wrap(err error, status int, code, format string, args ...any) *Error {
	e := New(status, code, format, args...)
	e.Err = err
	return e
}

// InvalidParam reports a request that breaks the API description or a domain rule on its input.
func InvalidParam(format string, args ...any) *Error {
	return Fail(CodeInvalidParam, format, args...)
}

// NotFound reports a missing resource with the generic not_found code.
func NotFound(format string, args ...any) *Error {
	return Fail(CodeNotFound, format, args...)
}

// Unauthorized reports a missing or unusable API key.
func Unauthorized(format string, args ...any) *Error {
	return Fail(CodeUnauthorized, format, args...)
}

// Forbidden reports a valid key acting outside what it may touch.
func Forbidden(format string, args ...any) *Error {
	return Fail(CodeForbidden, format, args...)
}

// NotImplemented marks an operation that appkb does not serve yet.
func NotImplemented(operation string) *Error {
	return Fail(CodeNotImplemented, "%s is not implemented yet", operation)
}

// Internal wraps an unexpected failure. Its message is deliberately generic.
func Internal(err error) *Error {
	return FailWith(err, CodeInternal, "The server encountered an internal error.")
}

// From returns err as an *Error. Foreign errors become an internal error, so
// that nothing but a generic message ever leaves the process.
func From(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Internal(err)
}

// Is reports whether err is an API error with the given code.
func Is(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Codes of the human input form operations.
const (
	CodeFormExpired     = "human_input_form_expired"
	CodeFormSubmitted   = "human_input_form_submitted"
	CodeInvalidFormData = "invalid_form_data"
)
