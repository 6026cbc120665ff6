package handlers_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"appkb/models"
)

// TestOfficialGoClient points OpenAI's own Go SDK at appkb: blocking and
// streaming chat completions (the stream read with the SDK's
// accumulator), the model list and lookup, and an error.
func TestOfficialGoClient(t *testing.T) {
	m := newRecModel("Hello ", "from ", "appkb.")
	s := newOpenAIServer(t, m)
	srv := httptest.NewServer(s.e)
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(s.keys[appDemoChat]),
		option.WithMaxRetries(0))
	ctx := context.Background()

	params := openai.ChatCompletionNewParams{
		Model: "demo",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Be brief."),
			openai.UserMessage("Hi"),
			openai.AssistantMessage("Hello!"),
			openai.UserMessage("Say hello"),
		},
		Temperature: openai.Float(0.4),
		MaxTokens:   openai.Int(32),
		User:        openai.String("go-sdk"),
	}
	res, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 1 || res.Choices[0].Message.Content != "Hello from appkb." || res.Choices[0].FinishReason != "stop" {
		t.Errorf("choices %+v", res.Choices)
	}
	if res.Model != "demo" || res.Usage.TotalTokens != 15 || !strings.HasPrefix(res.ID, "chatcmpl-") {
		t.Errorf("model %q, usage %+v, id %q", res.Model, res.Usage, res.ID)
	}
	sent := m.sent(t, "Say hello")
	if len(sent.Messages) != 4 || sent.Params["temperature"] != 0.4 || sent.Params["max_tokens"] != 32 {
		t.Errorf("the model got %d messages, params %v", len(sent.Messages), sent.Params)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	var pieces []string
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			pieces = append(pieces, chunk.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"Hello ", "from ", "appkb."}; !reflect.DeepEqual(pieces, want) {
		t.Errorf("pieces %q, want %q", pieces, want)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Hello from appkb." || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("accumulated %+v", acc.Choices)
	}
	if acc.Usage.PromptTokens != 11 || acc.Usage.CompletionTokens != 4 || acc.Usage.TotalTokens != 15 {
		t.Errorf("accumulated usage %+v", acc.Usage)
	}

	var app models.App
	if err := s.db.Take(&app, "id = ?", s.appID).Error; err != nil {
		t.Fatal(err)
	}
	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != app.ID || page.Data[0].OwnedBy != "appkb" {
		t.Errorf("models %+v", page.Data)
	}
	got, err := client.Models.Get(ctx, app.Name)
	if err != nil || got.ID != app.ID {
		t.Errorf("get by name: %+v, %v", got, err)
	}

	_, err = client.Models.Get(ctx, "gpt-4o")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || apiErr.Type != "invalid_request_error" {
		t.Errorf("unknown model: %v", err)
	}
	bad := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("app-wrong"), option.WithMaxRetries(0))
	_, err = bad.Chat.Completions.New(ctx, params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Errorf("wrong key: %v", err)
	}
}
