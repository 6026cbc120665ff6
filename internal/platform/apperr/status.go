package apperr

import (
	"errors"
	"net/http"
)

// statusOf is the one table of HTTP statuses: every code the domain fails
// with answers with the status written here. A code gets its row when it
// is declared; Fail with a code missing from the table answers 500, which
// the table test catches for the declared ones.
var statusOf = map[string]int{
	CodeInvalidParam:        http.StatusBadRequest,
	CodeBadRequest:          http.StatusBadRequest,
	CodeUnauthorized:        http.StatusUnauthorized,
	CodeForbidden:           http.StatusForbidden,
	CodeNotFound:            http.StatusNotFound,
	CodeMethodNotAllowed:    http.StatusMethodNotAllowed,
	CodeConflict:            http.StatusConflict,
	CodeTooLarge:            http.StatusRequestEntityTooLarge,
	CodeUnsupportedFileType: http.StatusUnsupportedMediaType,
	CodeInternal:            http.StatusInternalServerError,
	CodeNotImplemented:      http.StatusNotImplemented,
	CodeAppUnavailable:      http.StatusBadRequest,
	CodeNotChatApp:          http.StatusBadRequest,
	CodeNotWorkflowApp:      http.StatusBadRequest,

	CodeDatasetNameDuplicate: http.StatusConflict,
	CodeArchivedImmutable:    http.StatusForbidden,
	CodeInvalidAction:        http.StatusBadRequest,
	CodeInvalidMetadata:      http.StatusBadRequest,

	CodeConversationCompleted: http.StatusBadRequest,
	CodeEndUserNotFound:       http.StatusNotFound,

	// A failed model call is the request's problem as far as the client
	// can tell: all four answer 400.
	CodeProviderNotInitialize:  http.StatusBadRequest,
	CodeProviderQuotaExceeded:  http.StatusBadRequest,
	CodeModelNotSupported:      http.StatusBadRequest,
	CodeCompletionRequestError: http.StatusBadRequest,

	// A form that can no longer be answered is a failed precondition.
	CodeFormExpired:     http.StatusPreconditionFailed,
	CodeFormSubmitted:   http.StatusPreconditionFailed,
	CodeInvalidFormData: http.StatusBadRequest,

	CodeNoFileUploaded:       http.StatusBadRequest,
	CodeTooManyFiles:         http.StatusBadRequest,
	CodeFilenameNotExists:    http.StatusBadRequest,
	CodeFileTooLarge:         http.StatusRequestEntityTooLarge,
	CodeFileNotFound:         http.StatusNotFound,
	CodeFileAccessDenied:     http.StatusForbidden,
	CodeExtensionBlocked:     http.StatusBadRequest,
	CodeSpeechToTextDisabled: http.StatusBadRequest,
	CodeNoAudioUploaded:      http.StatusBadRequest,
	CodeAudioTooLarge:        http.StatusRequestEntityTooLarge,
	CodeUnsupportedAudioType: http.StatusUnsupportedMediaType,
}

// StatusOf is the HTTP status that errors with the code answer with; a
// code that is not in the table answers 500.
func StatusOf(code string) int {
	if s, ok := statusOf[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// ClientFault reports whether err is an API error that blames the request
// (a status below 500), whose message is written for the client.
func ClientFault(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status < http.StatusInternalServerError
}
