package flows

import (
	"context"

	"appkb/internal/apps"
	"appkb/internal/run/chat"
)

// Chat starts a chat message: chat and agent apps answer with one model
// call, chatflows with their graph (see chatflow). Apps that hold no
// conversations are refused.
func (s *Service) Chat(ctx context.Context, req Request) (*Run, error) {
	app, err := s.apps.Cached(ctx, req.AppID)
	if err != nil {
		return nil, err
	}
	if app.Mode == apps.ModeAdvancedChat {
		return s.chatflow(ctx, app, req)
	}
	req.App = app // loaded above: the chat service does not look it up again
	g, err := s.chat.PrepareChat(ctx, req.Request)
	if err != nil {
		return nil, err
	}
	return s.generate(ctx, req.AppID, g), nil
}

// Completion starts the answer of a text generator; a conversation id is
// ignored (PrepareCompletion drops it).
func (s *Service) Completion(ctx context.Context, req Request) (*Run, error) {
	g, err := s.chat.PrepareCompletion(ctx, req.Request)
	if err != nil {
		return nil, err
	}
	return s.generate(ctx, req.AppID, g), nil
}

// generate runs a prepared chat or completion answer. A blocking run
// produces no events. A streaming one hands on every event of the
// generation; a failure once the generation began is reported as its
// error event (the message is stored with the error by then), unless the
// run was cancelled. When the app auto-plays answers, message_end is held
// back until the answer has been spoken: its tts_message pieces go out
// first, then message_end, then tts_message_end. A stopped answer is not
// spoken.
func (s *Service) generate(ctx context.Context, appID string, g *chat.Generation) *Run {
	errorEvent := func(err error) any { return g.ErrorEvent(err) }
	return s.launch(ctx, g.TaskID, errorEvent, func(ctx context.Context, r *Run) (*Result, error) {
		result := func(res *chat.Result) *Result {
			return &Result{TaskID: g.TaskID, MessageID: g.MessageID, ConversationID: g.ConversationID, Mode: g.Mode,
				Answer: res.Answer, Stopped: res.Stopped, TotalTokens: res.Metadata.Usage.TotalTokens,
				PromptTokens: res.Metadata.Usage.PromptTokens, CompletionTokens: res.Metadata.Usage.CompletionTokens,
				FinishReason: res.FinishReason, Citations: res.Metadata.RetrieverResources,
				Body: g.BlockingResponse(res)}
		}
		if !g.Streaming {
			res, err := g.Run(ctx, nil)
			if err != nil {
				return nil, err
			}
			return result(res), nil
		}
		var end *chat.MessageEndEvent
		res, err := g.Run(ctx, func(ev chat.Event) error {
			if e, ok := ev.(chat.MessageEndEvent); ok {
				end = &e
				return nil
			}
			return r.emit(chatEv(ev))
		})
		if err != nil {
			if ctx.Err() == nil {
				r.errSent = r.emit(chatEv(g.ErrorEvent(err))) == nil
			} else {
				r.errSent = true // nobody is listening any more
			}
			return nil, err
		}
		if end == nil {
			return result(res), nil
		}
		var pieces []string
		if !res.Stopped {
			pieces = s.autoPlay(ctx, appID, res.Answer)
		}
		s.speakAround(r, pieces, end.StreamBase, chatEv(*end))
		return result(res), nil
	})
}
