package handlers

import (
	"context"
	"net/http"

	"appkb/gen"
	"appkb/handlers/forms"
	"appkb/internal/conversation/audio"
	"appkb/internal/platform/apperr"
)

// AudioToText serves POST /audio-to-text: the transcript of the recording
// in the form's `file` part.
func (s *Server) AudioToText(ctx context.Context, req gen.AudioToTextRequestObject) (gen.AudioToTextResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	// A missing body is a form without a file. The recording is read
	// straight from its part; later parts (such as `user`) are never read
	// and do not change the result.
	var text string
	err = forms.Read(req.Body, forms.Spec{
		NoFile:     apperr.New(http.StatusBadRequest, apperr.CodeNoAudioUploaded, "No audio file was uploaded."),
		StopAtFile: true,
		File: func(f forms.File) (err error) {
			text, err = s.speech.Transcribe(ctx, p.AppID, f.Body, f.Name, f.ContentType)
			return err
		},
	})
	if err != nil {
		return nil, err
	}
	return gen.AudioToText200JSONResponse{Text: text}, nil
}

// TextToAudioChat serves POST /text-to-audio: MP3 audio of the given text
// or of a message's answer.
func (s *Server) TextToAudioChat(ctx context.Context, req gen.TextToAudioChatRequestObject) (gen.TextToAudioChatResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, apperr.InvalidParam("request body is required")
	}
	b := req.Body
	speech, err := s.speech.Speak(ctx, p.AppID, audio.SpeakRequest{
		MessageID: strOrEmpty(b.MessageId),
		Text:      strOrEmpty(b.Text),
		Voice:     strOrEmpty(b.Voice),
		User:      strOrEmpty(b.User),
	})
	if err != nil {
		return nil, err
	}
	// The response closes the audio once it is written.
	return gen.TextToAudioChat200AudiompegResponse{Body: speech.Audio}, nil
}

// strOrEmpty reads an optional string, "" when absent.
func strOrEmpty(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
