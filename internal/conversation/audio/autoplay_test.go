package audio

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
)

// autoPlayApp is a chat app on the provider "voicy" whose text_to_speech
// feature is filled in by the test.
func autoPlayApp(tts string) string {
	return `version: 0.3.0
kind: app
app: {name: auto play, mode: chat}
model_config:
  model: {provider: langgenius/voicy/voicy, name: chatty, mode: chat}
  text_to_speech: ` + tts + "\n"
}

func TestAutoPlay(t *testing.T) {
	long := bytes.Repeat([]byte("0123456789abcdef"), 2*AutoPlayPieceSize/16+7) // a bit over two pieces
	var calls atomic.Int32
	var answer atomic.Value // []byte; nil makes the server fail
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/speech" {
			http.NotFound(w, r)
			return
		}
		calls.Add(1)
		b, _ := answer.Load().([]byte)
		if b == nil {
			http.Error(w, `{"error":{"message":"speech is down"}}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "audio/mpeg")
		w.Write(b)
	}))
	defer srv.Close()
	reg, err := llm.Parse([]byte(`providers:
  - name: voicy
    base_url: `+srv.URL+`/v1
    max_retries: 0
    defaults: {chat: chatty, text_to_speech: tts-1}
`), nil, false)
	if err != nil {
		t.Fatal(err)
	}

	gdb := db.OpenTemp(t)
	ctx := context.Background()
	store := apps.NewStore(gdb)
	appID := func(def string) string {
		app, err := store.Import(ctx, []byte(def))
		if err != nil {
			t.Fatal(err)
		}
		return app.ID
	}
	on := appID(autoPlayApp(`{enabled: true, voice: nova, autoPlay: enabled}`))
	manual := appID(autoPlayApp(`{enabled: true, voice: nova, autoPlay: disabled}`))
	off := appID(autoPlayApp(`{enabled: false, autoPlay: enabled}`))
	builtin, err := store.Import(ctx, []byte(strings.Replace(autoPlayApp(`{enabled: true, autoPlay: enabled}`),
		"langgenius/voicy/voicy", "appkb", 1)))
	if err != nil {
		t.Fatal(err)
	}
	svc := NewService(gdb, reg)

	tests := []struct {
		name      string
		app, text string
		audio     []byte // what the model answers; nil: it fails
		want      []byte // the audio the pieces add up to; nil: no pieces
		wantErr   bool
		wantCalls int32
	}{
		{"short audio is one piece", on, "Hello.", []byte("ID3short"), []byte("ID3short"), false, 1},
		{"long audio is split", on, "Hello.", long, long, false, 1},
		{"no audio, no pieces", on, "Hello.", []byte{}, nil, false, 1},
		{"blank text is not spoken", on, " \n", []byte("ID3"), nil, false, 0},
		{"auto-play disabled", manual, "Hello.", []byte("ID3"), nil, false, 0},
		{"text to speech off", off, "Hello.", []byte("ID3"), nil, false, 0},
		{"a failing provider is an error", on, "Hello.", nil, nil, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			answer.Store(tc.audio)
			before := calls.Load()
			pieces, err := svc.AutoPlay(ctx, tc.app, tc.text)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error %v", err, tc.wantErr)
			}
			if got := calls.Load() - before; got != tc.wantCalls {
				t.Errorf("the model was called %d times, want %d", got, tc.wantCalls)
			}
			if tc.want == nil {
				if pieces != nil {
					t.Errorf("pieces %v, want none", pieces)
				}
				return
			}
			var joined []byte
			for i, p := range pieces {
				b, err := base64.StdEncoding.DecodeString(p)
				if err != nil {
					t.Fatalf("piece %d: %v", i, err)
				}
				if len(b) > AutoPlayPieceSize || (i < len(pieces)-1 && len(b) != AutoPlayPieceSize) {
					t.Errorf("piece %d holds %d bytes", i, len(b))
				}
				joined = append(joined, b...)
			}
			if !bytes.Equal(joined, tc.want) {
				t.Errorf("pieces add up to %d bytes, want %d", len(joined), len(tc.want))
			}
			// The size is a multiple of three, so the encoded pieces join too.
			if whole, err := base64.StdEncoding.DecodeString(strings.Join(pieces, "")); err != nil || !bytes.Equal(whole, tc.want) {
				t.Errorf("joined encoding does not decode to the audio: %v", err)
			}
		})
	}

	t.Run("the builtin provider reads aloud offline", func(t *testing.T) {
		if speechCode("espeak-ng", "ffmpeg") == apperr.CodeModelNotSupported {
			t.Skip("espeak-ng or ffmpeg is not installed")
		}
		pieces, err := svc.AutoPlay(ctx, builtin.ID, "Hello.")
		if err != nil {
			t.Fatal(err)
		}
		mp3, err := base64.StdEncoding.DecodeString(strings.Join(pieces, ""))
		if err != nil || len(mp3) < 500 || !(bytes.HasPrefix(mp3, []byte("ID3")) || mp3[0] == 0xff) {
			t.Errorf("%d pieces of %d bytes in all, not MP3 (%v)", len(pieces), len(mp3), err)
		}
	})

	t.Run("an unknown app is an error", func(t *testing.T) {
		if _, err := svc.AutoPlay(ctx, "3f8c1c9e-0000-4000-8000-000000000000", "Hello."); err == nil {
			t.Error("no error")
		}
	})
}

func TestEncodePieces(t *testing.T) {
	tests := []struct {
		data string
		size int
		want []string
	}{
		{"", 3, nil},
		{"abc", 3, []string{"YWJj"}},
		{"abcdefg", 3, []string{"YWJj", "ZGVm", "Zw=="}},
	}
	for _, tc := range tests {
		got := encodePieces([]byte(tc.data), tc.size)
		if strings.Join(got, ",") != strings.Join(tc.want, ",") || (got == nil) != (tc.want == nil) {
			t.Errorf("encodePieces(%q, %d) = %q, want %q", tc.data, tc.size, got, tc.want)
		}
	}
}
