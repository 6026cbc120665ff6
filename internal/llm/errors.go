package llm

import (
	"appkb/internal/platform/apperr"

	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// maxUpstreamMessage bounds how much of a provider's own error text is
// passed on.
const maxUpstreamMessage = 300

// secretLike matches text that looks like a credential, so that it is
// blanked out of upstream messages.
var secretLike = regexp.MustCompile(`(?i)(bearer\s+\S+|\b(sk|key|token|api[-_]?key)[-_][A-Za-z0-9*._\-]{6,})`)

// fail turns an SDK error into the package's API error. res is the last
// HTTP response, if any; its status is used when the SDK could not parse the
// error body.
func (c *remoteClient) fail(ctx context.Context, res *http.Response, err error, model string) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return modelError(apperr.CodeCompletionRequestError, errors.Join(ctxErr, err), "The model request was cancelled.")
	}
	status := 0
	upstream, code := "", ""
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		status, upstream, code = apiErr.StatusCode, apiErr.Message, apiErr.Code+" "+apiErr.Type
		if upstream == "" && apiErr.Response != nil {
			upstream = readSmall(apiErr.Response)
		}
	} else if res != nil && res.StatusCode >= 400 {
		status = res.StatusCode
		upstream = readSmall(res)
	}
	var streamErr *ssestream.StreamError
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return modelError(apperr.CodeProviderNotInitialize, err, "Model provider %q rejected the credentials (HTTP %d).", c.name, status)
	case status == http.StatusTooManyRequests:
		if strings.Contains(code, "insufficient_quota") || strings.Contains(upstream, "insufficient_quota") {
			return modelError(apperr.CodeProviderQuotaExceeded, err, "Model provider %q reports that the quota is used up (HTTP 429).", c.name)
		}
		return modelError(apperr.CodeProviderQuotaExceeded, err, "Model provider %q is still rate limiting after retries (HTTP 429).", c.name)
	case status == http.StatusNotFound:
		return modelError(apperr.CodeModelNotSupported, err, "Model %q is not available at provider %q (HTTP 404).", model, c.name)
	case status != 0:
		if msg := c.scrub(upstream); msg != "" {
			return modelError(apperr.CodeCompletionRequestError, err, "Model provider %q answered HTTP %d: %s", c.name, status, msg)
		}
		return modelError(apperr.CodeCompletionRequestError, err, "Model provider %q answered HTTP %d.", c.name, status)
	case errors.As(err, &streamErr):
		return modelError(apperr.CodeCompletionRequestError, err, "Model provider %q reported an error while streaming: %s", c.name, c.scrub(streamErr.Message))
	case errors.Is(err, context.DeadlineExceeded):
		return modelError(apperr.CodeCompletionRequestError, err, "Model provider %q did not answer in time.", c.name)
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return modelError(apperr.CodeProviderNotInitialize, err, "Model provider %q cannot be reached.", c.name)
	}
	return modelError(apperr.CodeCompletionRequestError, err, "The call to model provider %q failed.", c.name)
}

// readSmall reads the start of an error body the SDK left readable and
// picks the message out of the usual JSON error shapes
// ({"error": "..."}, {"error": {"message": "..."}}, {"message": "..."},
// {"detail": "..."}); other bodies are returned as they are.
func readSmall(res *http.Response) string {
	if res.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	var body map[string]any
	if json.Unmarshal(b, &body) != nil {
		return string(b)
	}
	if e, ok := body["error"].(map[string]any); ok {
		body = e
	}
	for _, k := range []string{"error", "message", "detail"} {
		if s, ok := body[k].(string); ok && s != "" {
			return s
		}
	}
	return string(b)
}

// scrub makes an upstream error text safe to show: the configured key and
// anything that looks like a credential is replaced, white space is folded
// and the text is cut short.
func (c *remoteClient) scrub(msg string) string {
	if len(c.apiKey) >= 4 {
		msg = strings.ReplaceAll(msg, c.apiKey, "***")
	}
	msg = secretLike.ReplaceAllString(msg, "***")
	msg = strings.Join(strings.Fields(msg), " ")
	if utf8.RuneCountInString(msg) > maxUpstreamMessage {
		msg = string([]rune(msg)[:maxUpstreamMessage]) + "…"
	}
	return msg
}
