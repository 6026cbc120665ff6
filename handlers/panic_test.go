package handlers_test

import (
	"context"
	"strings"
	"testing"

	"appkb/internal/llm"
)

// panicModels serves a model that panics in the middle of an answer.
type panicModels struct{}

func (panicModels) Chat(string, string) (llm.ChatModel, error) { return panicModel{}, nil }
func (panicModels) Backend(string) (string, error)             { return "fake", nil }

type panicModel struct{}

func (panicModel) Chat(context.Context, llm.ChatRequest) (*llm.ChatResponse, error) {
	panic("the model broke")
}

func (panicModel) Stream(context.Context, llm.ChatRequest, func(llm.Chunk) error) (*llm.ChatResponse, error) {
	panic("the model broke")
}

// A panic while an answer is generated fails that message; the process and
// the server go on.
func TestPanicInGenerationFailsTheMessage(t *testing.T) {
	s := newChatServer(t, chatOptions{models: panicModels{}})
	for _, mode := range []string{"streaming", "blocking"} {
		t.Run(mode, func(t *testing.T) {
			rec := s.post(t, appTravel, "/v1/chat-messages", `{"query":"hi","inputs":{"traveller":"solo"},"user":"u-`+mode+`","response_mode":"`+mode+`"}`)
			if mode == "blocking" && rec.Code != 500 {
				t.Fatalf("blocking: %d %s", rec.Code, rec.Body)
			}
			if mode == "streaming" && (rec.Code != 200 || !strings.Contains(rec.Body.String(), `"event":"error"`)) {
				t.Fatalf("streaming: %d %s", rec.Code, rec.Body)
			}
		})
	}
	var total, stuck int64
	s.db.Raw(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN generating OR status <> 'error' THEN 1 ELSE 0 END), 0) FROM messages`).Row().Scan(&total, &stuck)
	if total != 1 || stuck != 0 {
		t.Fatalf("%d messages (want the streamed one), %d not failed", total, stuck)
	}
}
