package audio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"testing"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/conversation/endusers"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

const speechApp = `version: 0.3.0
kind: app
app: {name: speech, mode: chat}
model_config:
  model: {provider: appkb, name: builtin, mode: chat}
  speech_to_text: {enabled: true}
  text_to_speech: {enabled: true}
`

func wantCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Status != status || ae.Code != code {
		t.Fatalf("error = %v, want %d %s", err, status, code)
	}
}

func TestRecordingExtension(t *testing.T) {
	tests := []struct {
		name, ct, want string
		ok             bool
	}{
		{"a.mp3", "audio/mpeg", "mp3", true},
		{"a", "audio/mp3", "mp3", true},
		{"a.bin", "audio/x-wav", "wav", true},
		{"a.m4a", "audio/mp4; codecs=mp4a", "m4a", true},
		{"a.webm", "AUDIO/WEBM", "webm", true},
		{"a.wav", "application/octet-stream", "wav", true},
		{"a.mp3", "", "mp3", true},
		{"a.png", "image/png", "", false},
		{"a.txt", "application/octet-stream", "", false},
		{"a", "", "", false},
	}
	for _, tc := range tests {
		got, ok := recordingExtension(tc.name, tc.ct)
		if got != tc.want || ok != tc.ok {
			t.Errorf("recordingExtension(%q, %q) = %q, %v", tc.name, tc.ct, got, ok)
		}
	}
}

func TestModelProvider(t *testing.T) {
	for path, want := range map[string]string{
		"../../../testdata/apps/chat.yml":          "",
		"../../../testdata/apps/advanced-chat.yml": "langgenius/openai/openai",
		"../../cli/demo/chat.yml":                  "appkb",
	} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		def, err := apps.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		got := ModelProvider(def)
		if want == "" {
			want = def.ModelConfig.Model.Provider
		}
		if got != want || got == "" {
			t.Errorf("%s: provider %q, want %q", path, got, want)
		}
	}
}

func TestTranscribeLimits(t *testing.T) {
	gdb := db.OpenTemp(t)
	app, err := apps.NewStore(gdb).Import(context.Background(), []byte(speechApp))
	if err != nil {
		t.Fatal(err)
	}
	s := NewService(gdb, nil)
	ctx := context.Background()
	tooBig := io.LimitReader(zeros{}, MaxAudioSize+1)
	_, err = s.Transcribe(ctx, app.ID, tooBig, "a.mp3", "audio/mpeg")
	wantCode(t, err, 413, apperr.CodeAudioTooLarge)
	// Within the limit it gets as far as the builtin model, which cannot
	// decode three bytes (or, without ffmpeg, says which package it needs).
	_, err = s.Transcribe(ctx, app.ID, bytes.NewReader([]byte("ID3")), "a.mp3", "audio/mpeg")
	wantCode(t, err, 400, speechCode("ffmpeg", "pocketsphinx_continuous"))
}

// speechCode is the error the builtin speech models give for bad input:
// completion_request_error when the programs are installed, else
// model_currently_not_support.
func speechCode(programs ...string) string {
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			return apperr.CodeModelNotSupported
		}
	}
	return apperr.CodeCompletionRequestError
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestSpeakFindsOnlyTheAppsMessages(t *testing.T) {
	gdb := db.OpenTemp(t)
	ctx := context.Background()
	store := apps.NewStore(gdb)
	one, err := store.Import(ctx, []byte(speechApp))
	if err != nil {
		t.Fatal(err)
	}
	two, err := store.Import(ctx, []byte(speechApp))
	if err != nil {
		t.Fatal(err)
	}
	eu, err := endusers.NewStore(gdb).Resolve(ctx, one.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	msg := models.Message{AppID: one.ID, EndUserID: eu.ID, TaskID: "t", Answer: "hello"}
	if err := gdb.Create(&msg).Error; err != nil {
		t.Fatal(err)
	}
	s := NewService(gdb, nil)
	if got, err := s.answerOf(ctx, one.ID, msg.ID, "alice"); err != nil || got != "hello" {
		t.Errorf("own message: %q, %v", got, err)
	}
	_, err = s.answerOf(ctx, two.ID, msg.ID, "")
	wantCode(t, err, 400, apperr.CodeInvalidParam)
	_, err = s.answerOf(ctx, one.ID, msg.ID, "bob")
	wantCode(t, err, 400, apperr.CodeInvalidParam)
	// With the text found, the builtin provider reads it out as MP3.
	speech, err := s.Speak(ctx, one.ID, SpeakRequest{MessageID: msg.ID})
	if speechCode("espeak-ng", "ffmpeg") == apperr.CodeModelNotSupported {
		wantCode(t, err, 400, apperr.CodeModelNotSupported)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer speech.Audio.Close()
	if mp3, _ := io.ReadAll(speech.Audio); speech.ContentType != "audio/mpeg" || len(mp3) < 500 {
		t.Errorf("speech %s of %d bytes", speech.ContentType, len(mp3))
	}
}
