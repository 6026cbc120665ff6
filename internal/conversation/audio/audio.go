// Package audio turns an app's speech into text and its text into speech,
// with the models its provider configuration names, subject to the app's
// speech_to_text and text_to_speech features.
package audio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"

	"gorm.io/gorm"

	"appkb/internal/apps"
	"appkb/internal/conversation/endusers"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// MaxAudioSize is the largest recording that is transcribed.
const MaxAudioSize = 30 << 20

// audioExtension maps the accepted recording types to the extension the
// transcription model is told (it guesses the format from the name).
var audioExtension = map[string]string{
	"audio/mp3":   "mp3",
	"audio/mpeg":  "mp3",
	"audio/mpga":  "mp3",
	"audio/mp4":   "m4a",
	"audio/m4a":   "m4a",
	"audio/x-m4a": "m4a",
	"audio/wav":   "wav",
	"audio/x-wav": "wav",
	"audio/wave":  "wav",
	"audio/webm":  "webm",
	"audio/amr":   "amr",
}

// Service runs speech models for apps.
type Service struct {
	db     *gorm.DB
	models *llm.Registry
	apps   *apps.Store
}

// NewService returns a service over db using the models of registry (nil:
// the builtin models only, which have no speech support).
func NewService(db *gorm.DB, registry *llm.Registry) *Service {
	return &Service{db: db, models: registry, apps: apps.NewStore(db)}
}

// Transcribe returns the text spoken in a recording sent to appID. The
// app's speech_to_text feature must be on (else 400
// speech_to_text_disabled); the recording must be of an accepted audio type
// (else 415 unsupported_audio_type; application/octet-stream is judged by
// the file name), not empty (400 no_audio_uploaded) and at most
// MaxAudioSize bytes (413 audio_too_large). The model is the speech-to-text
// default of the provider of the app's model; the builtin provider has none
// and answers 400 model_currently_not_support.
func (s *Service) Transcribe(ctx context.Context, appID string, recording io.Reader, filename, contentType string) (string, error) {
	_, def, err := s.apps.Load(ctx, appID)
	if err != nil {
		return "", err
	}
	if !def.FeatureSwitches().SpeechToText.On() {
		return "", apperr.Fail(apperr.CodeSpeechToTextDisabled, "Speech to text is not enabled for this app.")
	}
	ext, ok := recordingExtension(filename, contentType)
	if !ok {
		return "", apperr.Fail(apperr.CodeUnsupportedAudioType,
			"Audio of type %q is not accepted; send mp3, m4a, wav, webm or amr.", contentType)
	}
	data, err := io.ReadAll(io.LimitReader(recording, MaxAudioSize+1))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return "", apperr.Fail(apperr.CodeTooLarge, "The request body is too large.")
		}
		return "", apperr.FailWith(err, apperr.CodeInvalidParam, "The audio could not be read.")
	}
	if len(data) == 0 {
		return "", apperr.Fail(apperr.CodeNoAudioUploaded, "The audio file is empty.")
	}
	if len(data) > MaxAudioSize {
		return "", apperr.Fail(apperr.CodeAudioTooLarge,
			"The audio is larger than %d MB.", MaxAudioSize>>20)
	}
	model, err := s.models.SpeechToText(ModelProvider(def), "")
	if err != nil {
		return "", err
	}
	name := path.Base(strings.ReplaceAll(filename, `\`, "/"))
	if name == "." || name == "/" || strings.ToLower(strings.TrimPrefix(path.Ext(name), ".")) != ext {
		name = "audio." + ext
	}
	return model.Transcribe(ctx, bytes.NewReader(data), name)
}

// recordingExtension works out a recording's format from its declared type,
// or from its name when the type says nothing.
func recordingExtension(filename, contentType string) (string, bool) {
	mt, _, _ := mime.ParseMediaType(contentType)
	mt = strings.ToLower(mt)
	if mt == "" || mt == "application/octet-stream" {
		mt = strings.ToLower(mime.TypeByExtension(path.Ext(filename)))
		mt, _, _ = mime.ParseMediaType(mt)
	}
	ext, ok := audioExtension[mt]
	return ext, ok
}

// SpeakRequest says what to speak: the answer of MessageID when it is
// set, else Text. Voice overrides the app's voice; User, when set, must be
// the end user the message belongs to.
type SpeakRequest struct {
	MessageID string
	Text      string
	Voice     string
	User      string
}

// Speak synthesises speech for appID with the text-to-speech default of
// the provider of the app's model. The app's text_to_speech feature must
// be on, and there must be something to speak; both are 400 invalid_param
// otherwise, as is a message that is unknown or belongs to another app or
// end user. The caller closes the returned audio.
func (s *Service) Speak(ctx context.Context, appID string, req SpeakRequest) (*llm.Speech, error) {
	_, def, err := s.apps.Load(ctx, appID)
	if err != nil {
		return nil, err
	}
	tts := def.FeatureSwitches().TextToSpeech
	if tts == nil || !tts.Enabled {
		return nil, apperr.InvalidParam("Text to speech is not enabled for this app.")
	}
	text := req.Text
	if id := strings.TrimSpace(req.MessageID); id != "" {
		text, err = s.answerOf(ctx, appID, id, req.User)
		if err != nil {
			return nil, err
		}
	}
	if strings.TrimSpace(text) == "" {
		return nil, apperr.InvalidParam("There is no text to speak: give text or the id of a message with an answer.")
	}
	voice := strings.TrimSpace(req.Voice)
	if voice == "" {
		voice = tts.Voice
	}
	model, err := s.speaker(def)
	if err != nil {
		return nil, err
	}
	return model.Speak(ctx, text, voice)
}

// speaker is the text-to-speech default of the provider of def's model;
// Speak and AutoPlay both read answers aloud with it.
func (s *Service) speaker(def *apps.Definition) (llm.Speaker, error) {
	return s.models.TextToSpeech(ModelProvider(def), "")
}

// answerOf returns the answer of one of appID's messages.
func (s *Service) answerOf(ctx context.Context, appID, messageID, user string) (string, error) {
	var m models.Message
	err := s.db.WithContext(ctx).Select("id", "end_user_id", "answer").
		Where("id = ? AND app_id = ?", messageID, appID).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", apperr.InvalidParam("Message %s not found.", messageID)
	}
	if err != nil {
		return "", err
	}
	if user = strings.TrimSpace(user); user != "" {
		eu, err := endusers.NewStore(s.db).Find(ctx, appID, user)
		if apperr.Is(err, apperr.CodeNotFound) || (err == nil && eu.ID != m.EndUserID) {
			return "", apperr.InvalidParam("Message %s not found.", messageID)
		}
		if err != nil {
			return "", err
		}
	}
	return m.Answer, nil
}

// ModelProvider returns the provider of the model an app runs on: the
// model of an easy-UI app, the first LLM node of a graph app, or the model
// of an agent app. Speech models come from the same provider. It is empty
// when the app names none.
func ModelProvider(def *apps.Definition) string {
	if def.ModelConfig != nil && def.ModelConfig.Model.Provider != "" {
		return def.ModelConfig.Model.Provider
	}
	for _, n := range def.Workflow.NodesOfKind(apps.NodeLLM) {
		if p := providerIn(n.Data["model"]); p != "" {
			return p
		}
	}
	return providerIn(def.Agent["model"])
}

func providerIn(v any) string {
	m, _ := v.(map[string]any)
	p, _ := m["provider"].(string)
	return p
}
