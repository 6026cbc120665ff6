package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"appkb/internal/conversation/endusers"
	"appkb/internal/llm"
	"appkb/models"
)

// fakeSpeech is an OpenAI-compatible server with a transcription and a
// speech endpoint; it remembers what it was asked.
type fakeSpeech struct {
	*httptest.Server
	mu        sync.Mutex
	filenames []string
	spoken    []map[string]any
}

func newFakeSpeech(t *testing.T) *fakeSpeech {
	t.Helper()
	f := &fakeSpeech{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/audio/transcriptions":
			_, hdr, err := r.FormFile("file")
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			f.mu.Lock()
			f.filenames = append(f.filenames, hdr.Filename)
			f.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"text":"hello from the recording"}`)
		case "/v1/audio/speech":
			var body map[string]any
			json.NewDecoder(r.Body).Decode(&body)
			f.mu.Lock()
			f.spoken = append(f.spoken, body)
			f.mu.Unlock()
			w.Header().Set("Content-Type", "audio/mpeg")
			io.WriteString(w, "ID3fake-mp3")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// speechRegistry points the media app's provider at the fake server.
func speechRegistry(t *testing.T, f *fakeSpeech) *llm.Registry {
	t.Helper()
	reg, err := llm.Parse([]byte(`providers:
  - name: speechy
    base_url: `+f.URL+`/v1
    max_retries: 0
    defaults: {chat: chatty, speech_to_text: stt-1, text_to_speech: tts-1}
`), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestAudioToText(t *testing.T) {
	fake := newFakeSpeech(t)
	s := newMediaServer(t, speechRegistry(t, fake))
	mp3 := []byte("ID3 not really an mp3")

	tests := []struct {
		name       string
		srv        *mediaServer
		key        func(*mediaServer) string
		parts      []formPart
		wantStatus int
		wantCode   string
	}{
		{"transcribes with the app's provider", s, nil, []formPart{fileField("note.mp3", "audio/mpeg", mp3), userField("alice")}, 200, ""},
		{"octet-stream is judged by the name", s, nil, []formPart{fileField("note.wav", "application/octet-stream", mp3)}, 200, ""},
		{"speech to text switched off → 400", s, func(s *mediaServer) string { return s.appKey }, []formPart{fileField("note.mp3", "audio/mpeg", mp3)}, 400, "speech_to_text_disabled"},
		{"not audio → 415", s, nil, []formPart{fileField("cat.png", "image/png", mp3)}, 415, "unsupported_audio_type"},
		{"empty recording → 400", s, nil, []formPart{fileField("note.mp3", "audio/mpeg", nil)}, 400, "no_audio_uploaded"},
		{"no file part → 400", s, nil, []formPart{userField("alice")}, 400, "no_audio_uploaded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.srv.mediaKey
			if tc.key != nil {
				key = tc.key(tc.srv)
			}
			body, ct := multipartForm(t, tc.parts...)
			rec := tc.srv.do(t, request{method: "POST", path: "/v1/audio-to-text", key: key, body: body, contentType: ct})
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, truncate(rec.Body.String()))
			}
			if tc.wantCode != "" {
				if got := errorCode(t, rec); got != tc.wantCode {
					t.Errorf("code %q, want %q", got, tc.wantCode)
				}
				return
			}
			if !strings.Contains(rec.Body.String(), `"text":"hello from the recording"`) {
				t.Errorf("body %s", rec.Body)
			}
		})
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.filenames) != 2 || fake.filenames[0] != "note.mp3" || fake.filenames[1] != "note.wav" {
		t.Errorf("the model was sent %v", fake.filenames)
	}
}

func TestTextToAudio(t *testing.T) {
	fake := newFakeSpeech(t)
	s := newMediaServer(t, speechRegistry(t, fake))

	// A stored answer of alice's.
	ctx := context.Background()
	alice, err := endusers.NewStore(s.db).Resolve(ctx, s.mediaAppID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := endusers.NewStore(s.db).Resolve(ctx, s.mediaAppID, "bob"); err != nil {
		t.Fatal(err)
	}
	msg := models.Message{AppID: s.mediaAppID, EndUserID: alice.ID, TaskID: "t1", Query: "hi", Answer: "The stored answer."}
	if err := s.db.Create(&msg).Error; err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		srv        *mediaServer
		key        func(*mediaServer) string
		body       string
		wantStatus int
		wantCode   string
		wantInput  string
		wantVoice  string
	}{
		{"text with the app's voice", s, nil, `{"text":"Read me.","user":"alice"}`, 200, "", "Read me.", "nova"},
		{"a voice of the caller's choice", s, nil, `{"text":"Read me.","voice":"echo"}`, 200, "", "Read me.", "echo"},
		{"a message's answer wins over text", s, nil, `{"message_id":"` + msg.ID + `","text":"ignored","user":"alice"}`, 200, "", "The stored answer.", "nova"},
		{"a message without a user", s, nil, `{"message_id":"` + msg.ID + `"}`, 200, "", "The stored answer.", "nova"},
		{"another user's message → 400", s, nil, `{"message_id":"` + msg.ID + `","user":"bob"}`, 400, "invalid_param", "", ""},
		{"an unknown message → 400", s, nil, `{"message_id":"3f8c1c9e-0000-4000-8000-000000000000"}`, 400, "invalid_param", "", ""},
		{"nothing to speak → 400", s, nil, `{"text":"  "}`, 400, "invalid_param", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.srv.mediaKey
			if tc.key != nil {
				key = tc.key(tc.srv)
			}
			fake.mu.Lock()
			before := len(fake.spoken)
			fake.mu.Unlock()
			rec := tc.srv.do(t, request{method: "POST", path: "/v1/text-to-audio", key: key, body: tc.body})
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, truncate(rec.Body.String()))
			}
			if tc.wantCode != "" {
				if got := errorCode(t, rec); got != tc.wantCode {
					t.Errorf("code %q, want %q", got, tc.wantCode)
				}
				return
			}
			if rec.Header().Get("Content-Type") != "audio/mpeg" || rec.Body.String() != "ID3fake-mp3" {
				t.Errorf("answer %s %q", rec.Header().Get("Content-Type"), rec.Body)
			}
			fake.mu.Lock()
			defer fake.mu.Unlock()
			if len(fake.spoken) != before+1 {
				t.Fatalf("the model was called %d times", len(fake.spoken)-before)
			}
			got := fake.spoken[before]
			if got["input"] != tc.wantInput || got["voice"] != tc.wantVoice || got["model"] != "tts-1" {
				t.Errorf("the model was asked %v", got)
			}
		})
	}

	t.Run("text to speech switched off → 400", func(t *testing.T) {
		rec := s.do(t, request{method: "POST", path: "/v1/text-to-audio", key: s.appKey, body: `{"text":"Read me."}`})
		if rec.Code != 400 || errorCode(t, rec) != "invalid_param" {
			t.Errorf("%d %s", rec.Code, rec.Body)
		}
	})
}

// TestBuiltinSpeechAPI reads a sentence aloud with the builtin provider and
// sends the MP3 back to be transcribed.
func TestBuiltinSpeechAPI(t *testing.T) {
	for _, p := range []string{"espeak-ng", "ffmpeg", "pocketsphinx_continuous"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (Debian packages espeak-ng, ffmpeg, pocketsphinx, pocketsphinx-en-us)", p)
		}
	}
	s := newMediaServer(t, nil)
	rec := s.do(t, request{method: "POST", path: "/v1/text-to-audio", key: s.mediaKey, body: `{"text":"the weather is nice today","user":"alice"}`})
	expectStatus(t, rec, 200, "")
	mp3 := rec.Body.Bytes()
	if rec.Header().Get("Content-Type") != "audio/mpeg" || len(mp3) < 500 {
		t.Fatalf("answer %s of %d bytes", rec.Header().Get("Content-Type"), len(mp3))
	}

	tests := []struct {
		name, file, contentType string
		data                    []byte
		wantStatus              int
		wantCode, wantText      string
	}{
		{"the spoken MP3 is transcribed", "weather.mp3", "audio/mpeg", mp3, 200, "", "the weather is nice today"},
		{"a recording that is not audio → 400", "noise.mp3", "audio/mpeg", []byte("ID3 not really"), 400, "completion_request_error", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body, ct := multipartForm(t, fileField(tc.file, tc.contentType, tc.data), userField("alice"))
			rec := s.do(t, request{method: "POST", path: "/v1/audio-to-text", key: s.mediaKey, body: body, contentType: ct})
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
			if tc.wantText != "" && !strings.Contains(rec.Body.String(), `"text":"`+tc.wantText+`"`) {
				t.Errorf("transcript %s", rec.Body)
			}
		})
	}
}
