package handlers_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"appkb/internal/llm"
)

// spokenAnswer is what the canned model answers, and so what auto-play
// reads aloud.
const spokenAnswer = "Hello there, this is the spoken answer."

// cannedModels serves every provider with a model that always gives
// spokenAnswer, streamed word by word.
type cannedModels struct{}

func (cannedModels) Chat(string, string) (llm.ChatModel, error) { return cannedModel{}, nil }
func (cannedModels) Backend(string) (string, error)             { return "fake", nil }

type cannedModel struct{}

func (cannedModel) Chat(context.Context, llm.ChatRequest) (*llm.ChatResponse, error) {
	return &llm.ChatResponse{Content: spokenAnswer, Usage: llm.Usage{PromptTokens: 4, CompletionTokens: 7, TotalTokens: 11}}, nil
}

func (m cannedModel) Stream(ctx context.Context, req llm.ChatRequest, onChunk func(llm.Chunk) error) (*llm.ChatResponse, error) {
	for _, word := range strings.SplitAfter(spokenAnswer, " ") {
		if onChunk == nil {
			break
		}
		if err := onChunk(llm.Chunk{Delta: word}); err != nil {
			return nil, err
		}
	}
	return m.Chat(ctx, req)
}

// newVoiceServer is a fake OpenAI-compatible speech endpoint, like
// newFakeSpeech, that answers with audio, or fails with 500 when audio is
// nil. It remembers what it was asked.
func newVoiceServer(t *testing.T, audio []byte) *fakeSpeech {
	t.Helper()
	f := &fakeSpeech{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/speech" {
			http.NotFound(w, r)
			return
		}
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.spoken = append(f.spoken, body)
		f.mu.Unlock()
		if audio == nil {
			http.Error(w, `{"error":{"message":"the voice is gone"}}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "audio/mpeg")
		w.Write(audio)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeSpeech) asked() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.spoken)
}

// Apps on the provider "speechy" that read their answers aloud (autoPlay
// enabled) or only on request (disabled).
func ttsChatApp(name, mode, autoPlay string) string {
	return `version: 0.3.0
kind: app
app: {name: ` + name + `, mode: ` + mode + `}
model_config:
  model: {provider: langgenius/speechy/speechy, name: chatty, mode: chat}
  pre_prompt: Answer briefly.
  text_to_speech: {enabled: true, voice: nova, language: en-US, autoPlay: ` + autoPlay + `}
`
}

// ttsOutputsApp is a workflow app whose output is not streamed as text
// chunks (a template rewrites the model's text), so its outputs are
// spoken.
const ttsOutputsApp = `version: 0.3.0
kind: app
app: {name: tts outputs, mode: workflow}
workflow:
  features:
    text_to_speech: {enabled: true, voice: nova, autoPlay: enabled}
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: ask
      data: {type: llm, title: Ask, model: {provider: langgenius/speechy/speechy, name: chatty, mode: chat},
        prompt_template: [{role: user, text: 'Say hello.'}]}
    - id: tpl
      data: {type: template-transform, title: Said, template: 'Said: {{ t }}', variables: [{variable: t, value_selector: [ask, text]}]}
    - id: end
      data: {type: end, title: End, outputs: [{variable: said, value_selector: [tpl, output]}, {variable: count, value_selector: [ask, usage]}]}
    edges:
    - {source: start, sourceHandle: source, target: ask}
    - {source: ask, sourceHandle: source, target: tpl}
    - {source: tpl, sourceHandle: source, target: end}
`

func ttsFlowApp(name, mode, autoPlay, last string) string {
	return `version: 0.3.0
kind: app
app: {name: ` + name + `, mode: ` + mode + `}
workflow:
  features:
    text_to_speech: {enabled: true, voice: nova, language: en-US, autoPlay: ` + autoPlay + `}
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: ask
      data: {type: llm, title: Ask, model: {provider: langgenius/speechy/speechy, name: chatty, mode: chat},
        prompt_template: [{role: user, text: 'Say hello.'}]}
    - id: last
      data: ` + last + `
    edges:
    - {source: start, sourceHandle: source, target: ask}
    - {source: ask, sourceHandle: source, target: last}
`
}

const (
	answerNode = `{type: answer, title: Answer, answer: '{{#ask.text#}}'}`
	endNode    = `{type: end, title: End, outputs: [{variable: text, value_selector: [ask, text]}]}`
)

// ttsApps are the apps of every auto-play test server, by name.
var ttsApps = map[string]string{
	"chat":         ttsChatApp("tts chat", "chat", "enabled"),
	"writer":       ttsChatApp("tts writer", "completion", "enabled"),
	"chatflow":     ttsFlowApp("tts chatflow", "advanced-chat", "enabled", answerNode),
	"workflow":     ttsFlowApp("tts workflow", "workflow", "enabled", endNode),
	"quiet chat":   ttsChatApp("quiet chat", "chat", "disabled"),
	"quiet flow":   ttsFlowApp("quiet chatflow", "advanced-chat", "disabled", answerNode),
	"quiet runner": ttsFlowApp("quiet workflow", "workflow", "disabled", endNode),
	"outputs":      ttsOutputsApp,
}

func TestAutoPlayInStreams(t *testing.T) {
	fake := newFakeSpeech(t) // answers "ID3fake-mp3"
	bigAudio := bytes.Repeat([]byte("ID3-big-mp3-frame"), 3000)
	big := newVoiceServer(t, bigAudio) // a little over three pieces
	broken := newVoiceServer(t, nil)
	server := func(f *fakeSpeech) *chatServer {
		return newChatServer(t, chatOptions{llm: speechRegistry(t, f), models: cannedModels{}, extra: ttsApps})
	}
	withFake, withBig, withBroken := server(fake), server(big), server(broken)

	const (
		chatBody     = `{"query":"hi","inputs":{},"user":"alice","response_mode":"streaming"}`
		writerBody   = `{"inputs":{},"user":"alice","response_mode":"streaming"}`
		workflowBody = `{"inputs":{},"user":"alice","response_mode":"streaming"}`
	)
	tests := []struct {
		name       string
		srv        *chatServer
		voice      *fakeSpeech
		app, path  string
		body       string
		closing    string // the event that closes the answer
		wantAudio  []byte // what the tts_message pieces add up to; nil: no speech events
		wantAsked  bool   // whether the speech model is called
		isWorkflow bool
		wantSaid   string // the text spoken; spokenAnswer when empty
	}{
		{"chat app speaks its answer", withFake, fake, "chat", "/v1/chat-messages", chatBody, "message_end", []byte("ID3fake-mp3"), true, false, ""},
		{"long speech comes in pieces", withBig, big, "chat", "/v1/chat-messages", chatBody, "message_end", bigAudio, true, false, ""},
		{"completion app speaks its text", withFake, fake, "writer", "/v1/completion-messages", writerBody, "message_end", []byte("ID3fake-mp3"), true, false, ""},
		{"chatflow app speaks its answer", withFake, fake, "chatflow", "/v1/chat-messages", chatBody, "message_end", []byte("ID3fake-mp3"), true, false, ""},
		{"chatflow app in pieces", withBig, big, "chatflow", "/v1/chat-messages", chatBody, "message_end", bigAudio, true, false, ""},
		{"workflow app speaks its output", withFake, fake, "workflow", "/v1/workflows/run", workflowBody, "workflow_finished", []byte("ID3fake-mp3"), true, true, ""},
		{"workflow app in pieces", withBig, big, "workflow", "/v1/workflows/run", workflowBody, "workflow_finished", bigAudio, true, true, ""},
		{"workflow app without text chunks speaks its text outputs", withFake, fake, "outputs", "/v1/workflows/run", workflowBody, "workflow_finished", []byte("ID3fake-mp3"), true, true, "Said: " + spokenAnswer},
		{"chat app without auto-play is silent", withFake, fake, "quiet chat", "/v1/chat-messages", chatBody, "message_end", nil, false, false, ""},
		{"chatflow app without auto-play is silent", withFake, fake, "quiet flow", "/v1/chat-messages", chatBody, "message_end", nil, false, false, ""},
		{"workflow app without auto-play is silent", withFake, fake, "quiet runner", "/v1/workflows/run", workflowBody, "workflow_finished", nil, false, true, ""},
		{"a failing voice leaves the chat answer whole", withBroken, broken, "chat", "/v1/chat-messages", chatBody, "message_end", nil, true, false, ""},
		{"a failing voice leaves the chatflow answer whole", withBroken, broken, "chatflow", "/v1/chat-messages", chatBody, "message_end", nil, true, false, ""},
		{"a failing voice leaves the workflow run whole", withBroken, broken, "workflow", "/v1/workflows/run", workflowBody, "workflow_finished", nil, true, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(tc.voice.asked())
			rec := tc.srv.post(t, tc.app, tc.path, tc.body)
			expectStatus(t, rec, 200, "")
			var events []frame
			for _, f := range readFrames(t, rec.Body.String()) {
				if f.str("event") != "ping" {
					events = append(events, f)
				}
			}
			names := make([]string, len(events))
			for i, f := range events {
				names[i] = f.str("event")
			}

			said := tc.wantSaid
			if said == "" {
				said = spokenAnswer
			}
			asked := tc.voice.asked()[before:]
			if got := len(asked) > 0; got != tc.wantAsked {
				t.Errorf("speech model asked %d times, want asked = %v", len(asked), tc.wantAsked)
			}
			for _, a := range asked {
				if a["input"] != said || a["voice"] != "nova" || a["model"] != "tts-1" {
					t.Errorf("speech model asked %v", a)
				}
			}

			if tc.wantAudio == nil {
				if slices.Contains(names, "tts_message") || slices.Contains(names, "tts_message_end") {
					t.Errorf("speech events in a silent stream: %v", names)
				}
				if n := len(names); n == 0 || names[n-1] != tc.closing {
					t.Errorf("stream does not end with %s: %v", tc.closing, names)
				}
				if !tc.isWorkflow && answerOf(events) != spokenAnswer {
					t.Errorf("answer %q", answerOf(events))
				}
				return
			}

			// The speech comes after the text: tts_message pieces, the
			// closing event and tts_message_end last (chat streams), or
			// workflow_finished, the pieces and tts_message_end (workflow
			// streams).
			pieces := 0
			for _, name := range names {
				if name == "tts_message" {
					pieces++
				}
			}
			tail := slices.Repeat([]string{"tts_message"}, pieces)
			if tc.isWorkflow {
				tail = append(append([]string{tc.closing}, tail...), "tts_message_end")
			} else {
				tail = append(tail, tc.closing, "tts_message_end")
			}
			if pieces == 0 || len(names) < len(tail) || !slices.Equal(names[len(names)-len(tail):], tail) {
				t.Fatalf("stream order %v, want it to end with %v", names, tail)
			}
			if want := (len(tc.wantAudio) + 15<<10 - 1) / (15 << 10); pieces != want {
				t.Errorf("%d pieces, want %d", pieces, want)
			}

			var audio []byte
			var closing frame
			for _, f := range events {
				switch f.str("event") {
				case "tts_message":
					b, err := base64.StdEncoding.DecodeString(f.str("audio"))
					if err != nil {
						t.Fatalf("audio piece is not base64: %v", err)
					}
					audio = append(audio, b...)
				case "tts_message_end":
					if a, ok := f["audio"]; !ok || a != "" {
						t.Errorf("tts_message_end audio = %v, want empty", a)
					}
				case tc.closing:
					closing = f
				}
			}
			if !bytes.Equal(audio, tc.wantAudio) {
				t.Errorf("pieces add up to %d bytes %q…, want %d bytes", len(audio), truncate(string(audio)), len(tc.wantAudio))
			}
			ids := []string{"task_id", "message_id", "conversation_id"}
			if tc.isWorkflow {
				ids = []string{"task_id", "workflow_run_id"}
			}
			for _, f := range events {
				if !strings.HasPrefix(f.str("event"), "tts_") {
					continue
				}
				for _, k := range ids {
					if f[k] != closing[k] {
						t.Errorf("%s %s = %v, the closing event has %v", f.str("event"), k, f[k], closing[k])
					}
				}
				if _, ok := f["created_at"]; !ok {
					t.Errorf("%s has no created_at", f.str("event"))
				}
			}
			if !tc.isWorkflow && answerOf(events) != spokenAnswer {
				t.Errorf("answer %q", answerOf(events))
			}
		})
	}

	t.Run("blocking answers carry no speech", func(t *testing.T) {
		for _, tc := range []struct{ app, path, body string }{
			{"chat", "/v1/chat-messages", `{"query":"hi","inputs":{},"user":"alice"}`},
			{"chatflow", "/v1/chat-messages", `{"query":"hi","inputs":{},"user":"alice"}`},
			{"workflow", "/v1/workflows/run", `{"inputs":{},"user":"alice","response_mode":"blocking"}`},
		} {
			before := len(fake.asked())
			rec := withFake.post(t, tc.app, tc.path, tc.body)
			expectStatus(t, rec, 200, "")
			if strings.Contains(rec.Body.String(), "tts_message") {
				t.Errorf("%s: blocking answer mentions speech: %s", tc.app, truncate(rec.Body.String()))
			}
			if n := len(fake.asked()) - before; n != 0 {
				t.Errorf("%s: speech model asked %d times for a blocking answer", tc.app, n)
			}
		}
	})
}

// answerOf joins the text of a stream's message events.
func answerOf(events []frame) string {
	var b strings.Builder
	for _, f := range events {
		if f.str("event") == "message" {
			b.WriteString(f.str("answer"))
		}
	}
	return b.String()
}
