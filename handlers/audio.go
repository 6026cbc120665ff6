package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// AudioToText serves POST /audio-to-text.
func (s *Server) AudioToText(ctx context.Context, req gen.AudioToTextRequestObject) (gen.AudioToTextResponseObject, error) {
	return nil, apperr.NotImplemented("POST /audio-to-text")
}

// TextToAudioChat serves POST /text-to-audio.
func (s *Server) TextToAudioChat(ctx context.Context, req gen.TextToAudioChatRequestObject) (gen.TextToAudioChatResponseObject, error) {
	return nil, apperr.NotImplemented("POST /text-to-audio")
}
