package handlers

import (
	"strings"

	"github.com/labstack/echo/v4"

	"appkb/handlers/oaicompat"
)

// The OpenAI-compatible operations (POST /chat/completions, GET /models,
// GET /models/{model}) are served by the openai.Endpoint embedded in
// Server; this file holds the raw route and tells their paths apart.

// openAIPath reports whether a request path belongs to the
// OpenAI-compatible operations, whose errors take OpenAI's shape.
func openAIPath(path string) bool {
	rest, ok := strings.CutPrefix(path, basePath)
	return ok && oaicompat.Serves(rest)
}

// CreateOpenAIChatCompletion serves POST /chat/completions, blocking or
// streaming.
func (a api) CreateOpenAIChatCompletion(c echo.Context) error { return a.srv.ServeChatCompletion(c) }
