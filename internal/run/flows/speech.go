package flows

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"appkb/internal/run/chat"
	"appkb/internal/run/workflow"
)

// Names of the events that carry an answer's speech when the app
// auto-plays it.
const (
	EventTTSMessage    = "tts_message"
	EventTTSMessageEnd = "tts_message_end"
)

// ChatTTS is one piece of a chat, completion or chatflow answer's speech
// (tts_message, base64 audio) or the mark after the last piece
// (tts_message_end, no audio). It repeats the ids of the answer's other
// events.
type ChatTTS struct {
	Event string `json:"event"`
	chat.StreamBase
	Audio string `json:"audio"`
}

// EventName implements chat.Event.
func (e ChatTTS) EventName() string { return e.Event }

// WorkflowTTS is a piece of a workflow run's speech (tts_message) or the
// mark after the last one (tts_message_end).
type WorkflowTTS struct {
	Event         string `json:"event"`
	TaskID        string `json:"task_id"`
	WorkflowRunID string `json:"workflow_run_id"`
	CreatedAt     int64  `json:"created_at"`
	Audio         string `json:"audio"`
}

// speakAround sends the speech of an answer around the event that ends
// it: the tts_message pieces, then end, then tts_message_end when there
// was speech. It stops at the first event the consumer cannot take.
func (s *Service) speakAround(r *Run, pieces []string, base chat.StreamBase, end Event) {
	for _, piece := range pieces {
		if r.emit(chatEv(ChatTTS{Event: EventTTSMessage, StreamBase: base, Audio: piece})) != nil {
			return
		}
	}
	if r.emit(end) != nil || len(pieces) == 0 {
		return
	}
	_ = r.emit(chatEv(ChatTTS{Event: EventTTSMessageEnd, StreamBase: base}))
}

// speakWorkflow sends the speech of a workflow run that went through,
// after its workflow_finished: tts_message pieces, then tts_message_end.
func (s *Service) speakWorkflow(ctx context.Context, r *Run, in workflow.RunInput, text string) {
	pieces := s.autoPlay(ctx, in.AppID, text)
	if len(pieces) == 0 {
		return
	}
	for _, piece := range pieces {
		if r.emit(Event{Name: EventTTSMessage, Payload: WorkflowTTS{Event: EventTTSMessage, TaskID: in.TaskID,
			WorkflowRunID: in.RunID, CreatedAt: time.Now().Unix(), Audio: piece}}) != nil {
			return
		}
	}
	_ = r.emit(Event{Name: EventTTSMessageEnd, Payload: WorkflowTTS{Event: EventTTSMessageEnd, TaskID: in.TaskID,
		WorkflowRunID: in.RunID, CreatedAt: time.Now().Unix()}})
}

// spoken reports whether a run that ended with status has an answer worth
// reading aloud: it went through, not stopped, paused or failed.
func spoken(status string) bool {
	return status == workflow.RunSucceeded || status == workflow.RunPartialSucceeded
}

// TextOutputs is a run's text outputs, ordered by name and separated by
// blank lines: what is read aloud for a run that streamed no text, and the
// answer of a workflow run for clients that expect one text.
func TextOutputs(outputs map[string]any) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(outputs)) {
		if t, ok := outputs[name].(string); ok && strings.TrimSpace(t) != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n\n")
}

// autoPlay is the speech of an answer for an app that auto-plays answers,
// as base64 pieces, or nil (see audio.Service.AutoPlay). Speech is an
// extra: when synthesis fails the failure is logged and the answer goes
// out without audio.
func (s *Service) autoPlay(ctx context.Context, appID, text string) []string {
	if appID == "" || ctx.Err() != nil {
		return nil
	}
	pieces, err := s.speech.AutoPlay(ctx, appID, text)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("text to speech: auto-play failed, the answer goes out without audio", "app_id", appID, "error", err)
		}
		return nil
	}
	return pieces
}
