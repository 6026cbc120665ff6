package audio

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strings"

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
)

// AutoPlayPieceSize is how many bytes of audio one streamed piece holds
// before base64 encoding. It is a multiple of three, so only the last
// piece is padded and the encoded pieces may also be joined before they
// are decoded.
const AutoPlayPieceSize = 15 << 10

// maxAutoPlayAudio bounds the speech read for one answer.
const maxAutoPlayAudio = 32 << 20

// AutoPlayOn reports whether an app reads its streamed answers aloud: its
// text_to_speech feature is on and set to play automatically.
func AutoPlayOn(def *apps.Definition) bool {
	tts := def.FeatureSwitches().TextToSpeech
	return tts != nil && tts.Enabled && strings.EqualFold(strings.TrimSpace(tts.AutoPlay), "enabled")
}

// AutoPlay synthesises text for appID's auto-play and returns the audio as
// base64 pieces of at most AutoPlayPieceSize bytes each, in order; decoding
// every piece and joining the results gives the audio the model returned.
//
// It returns nil and no error when there is nothing to play: the text is
// blank, the app does not auto-play (see AutoPlayOn), the provider of the
// app's model offers no text-to-speech model (model_currently_not_support,
// as with the builtin provider), or the model returned no audio. Any other
// failure (the app cannot be loaded, the provider is not set up, the
// synthesis fails) comes back as an error. Auto-play is an extra to an
// answer that is already complete, so callers are expected to log such an
// error and send the answer without audio rather than fail it.
//
// The voice is the app's; the app's current settings decide, like for
// Speak.
func (s *Service) AutoPlay(ctx context.Context, appID, text string) ([]string, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	_, def, err := s.apps.Load(ctx, appID)
	if err != nil {
		return nil, err
	}
	if !AutoPlayOn(def) {
		return nil, nil
	}
	model, err := s.speaker(def)
	if apperr.Is(err, apperr.CodeModelNotSupported) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	speech, err := model.Speak(ctx, text, def.FeatureSwitches().TextToSpeech.Voice)
	if err != nil {
		return nil, err
	}
	defer speech.Audio.Close()
	data, err := io.ReadAll(io.LimitReader(speech.Audio, maxAutoPlayAudio+1))
	if err != nil {
		return nil, fmt.Errorf("read synthesised speech: %w", err)
	}
	if len(data) > maxAutoPlayAudio {
		return nil, fmt.Errorf("synthesised speech is larger than %d MB", maxAutoPlayAudio>>20)
	}
	return encodePieces(data, AutoPlayPieceSize), nil
}

// encodePieces splits data into pieces of at most size bytes and encodes
// each with standard base64; no data gives nil.
func encodePieces(data []byte, size int) []string {
	var pieces []string
	for len(data) > 0 {
		n := min(size, len(data))
		pieces = append(pieces, base64.StdEncoding.EncodeToString(data[:n]))
		data = data[n:]
	}
	return pieces
}
