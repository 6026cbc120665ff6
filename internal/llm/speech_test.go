package llm

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"appkb/internal/platform/apperr"
)

// needSpeechTools skips when the Debian speech packages are missing (CI
// installs them; see .ci/run).
func needSpeechTools(t *testing.T) {
	t.Helper()
	for _, p := range []string{"espeak-ng", "ffmpeg", "pocketsphinx_continuous"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed", p)
		}
	}
}

// TestBuiltinSpeechRoundTrip speaks a sentence, transcribes the MP3 and
// the same speech in other containers, and checks the words.
func TestBuiltinSpeechRoundTrip(t *testing.T) {
	needSpeechTools(t)
	ctx := context.Background()
	var r *Registry // nil: the default registry, served by the builtin backend
	speaker, err := r.TextToSpeech("appkb", "")
	if err != nil {
		t.Fatal(err)
	}
	const sentence = "the weather is nice today"
	// "nova" is an OpenAI voice: the builtin speaker falls back to its own.
	speech, err := speaker.Speak(ctx, sentence, "nova")
	if err != nil {
		t.Fatal(err)
	}
	defer speech.Audio.Close()
	mp3, err := io.ReadAll(speech.Audio)
	if err != nil {
		t.Fatal(err)
	}
	if speech.ContentType != "audio/mpeg" || len(mp3) < 1000 {
		t.Fatalf("speech %q of %d bytes", speech.ContentType, len(mp3))
	}
	if !bytes.HasPrefix(mp3, []byte("ID3")) && !(mp3[0] == 0xff && mp3[1]&0xe0 == 0xe0) {
		t.Fatalf("not MP3: % x", mp3[:4])
	}

	listener, err := r.SpeechToText("appkb", "")
	if err != nil {
		t.Fatal(err)
	}
	recordings := map[string][]byte{"speech.mp3": mp3}
	for _, ext := range []string{"wav", "webm", "m4a"} {
		recordings["speech."+ext] = convert(t, mp3, ext)
	}
	for name, data := range recordings {
		t.Run(name, func(t *testing.T) {
			text, err := listener.Transcribe(ctx, bytes.NewReader(data), name)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{"weather", "nice", "today"} {
				if !strings.Contains(" "+text+" ", " "+w+" ") {
					t.Errorf("transcript %q lacks %q", text, w)
				}
			}
		})
	}

	if _, err := listener.Transcribe(ctx, strings.NewReader("not audio at all"), "x.mp3"); !apperr.Is(err, apperr.CodeCompletionRequestError) {
		t.Errorf("garbage: %v, want completion_request_error", err)
	}
}

// convert re-encodes MP3 into another container with ffmpeg.
func convert(t *testing.T, mp3 []byte, ext string) []byte {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.mp3"), filepath.Join(dir, "out."+ext)
	if err := os.WriteFile(in, mp3, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(context.Background(), []string{"ffmpeg", "-loglevel", "error", "-i", in, out}, nil, 0); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestBuiltinSpeechNamesMissingPackage checks the error when a program is
// not on PATH.
func TestBuiltinSpeechNamesMissingPackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := builtinSpeaker{}.Speak(context.Background(), "hello", "")
	if !apperr.Is(err, apperr.CodeModelNotSupported) || !strings.Contains(apperr.From(err).Message, "espeak-ng") {
		t.Errorf("speak: %v", err)
	}
	_, err = builtinTranscriber{}.Transcribe(context.Background(), strings.NewReader("x"), "a.wav")
	if !apperr.Is(err, apperr.CodeModelNotSupported) || !strings.Contains(apperr.From(err).Message, "Debian package ffmpeg") {
		t.Errorf("transcribe: %v", err)
	}
}
