package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"appkb/internal/platform/apperr"
)

// The builtin backend speaks and listens offline with programs from
// Debian's archive, found on PATH when a model is asked for:
//
//   - text to speech: espeak-ng synthesises a WAV, which ffmpeg (or lame)
//     encodes as MP3;
//   - speech to text: ffmpeg decodes any recording it understands (mp3,
//     mp4, mpeg, mpga, m4a, wav, webm, ...) to 16 kHz mono PCM, which
//     pocketsphinx transcribes with its US English model.
//
// A missing program is reported as 400 model_currently_not_support naming
// the package that provides it.

// DefaultBuiltinVoice is the espeak-ng voice used when none is given or the
// given one is not an espeak-ng voice (e.g. an OpenAI voice name). The Klatt
// variant is both clearer to listen to and better recognised by
// pocketsphinx than the default formant voice.
const DefaultBuiltinVoice = "en-us+klatt2"

// MaxBuiltinSpeech bounds the MP3 the builtin speaker returns.
const MaxBuiltinSpeech = 64 << 20

// pocketsphinxModel is where Debian's pocketsphinx-en-us installs the US
// English acoustic model, language model and dictionary.
const pocketsphinxModel = "/usr/share/pocketsphinx/model/en-us"

// espeakVoice accepts the shape of espeak-ng voice names: a language code
// with optional region and variant, such as en, en-gb, en-us+klatt2.
var espeakVoice = regexp.MustCompile(`^[a-z]{2,3}(-[a-z0-9]{2,8})*(\+[a-z0-9]+)?$`)

// audioExt is an extension safe to give the temporary copy of a recording.
var audioExt = regexp.MustCompile(`^\.[a-z0-9]{1,5}$`)

// program finds a program on PATH or explains which Debian package has it.
func program(name, pkg, purpose string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", modelError(apperr.CodeModelNotSupported, err,
			"The builtin model provider needs %s for %s; install the Debian package %s.", name, purpose, pkg)
	}
	return p, nil
}

// mp3Encoder returns a command line that reads WAV on stdin and writes MP3
// on stdout: ffmpeg when present, else lame.
func mp3Encoder() ([]string, error) {
	if p, err := exec.LookPath("ffmpeg"); err == nil {
		return []string{p, "-hide_banner", "-loglevel", "error", "-f", "wav", "-i", "pipe:0",
			"-codec:a", "libmp3lame", "-q:a", "4", "-f", "mp3", "pipe:1"}, nil
	}
	if p, err := exec.LookPath("lame"); err == nil {
		return []string{p, "--quiet", "-V", "4", "-", "-"}, nil
	}
	return nil, modelError(apperr.CodeModelNotSupported, nil,
		"The builtin model provider needs ffmpeg or lame to encode speech as MP3; install the Debian package ffmpeg (or lame).")
}

// builtinSpeaker is the builtin text-to-speech model.
type builtinSpeaker struct{}

// Speak returns MP3 audio of text read by espeak-ng.
func (builtinSpeaker) Speak(ctx context.Context, text, voice string) (*Speech, error) {
	espeak, err := program("espeak-ng", "espeak-ng", "text to speech")
	if err != nil {
		return nil, err
	}
	encoder, err := mp3Encoder()
	if err != nil {
		return nil, err
	}
	voice = strings.ToLower(strings.TrimSpace(voice))
	if !espeakVoice.MatchString(voice) {
		voice = DefaultBuiltinVoice
	}
	wav, err := synthesise(ctx, espeak, voice, text)
	if err != nil && voice != DefaultBuiltinVoice {
		// Names like "nova" look like voices but espeak-ng has none of them.
		wav, err = synthesise(ctx, espeak, DefaultBuiltinVoice, text)
	}
	if err != nil {
		return nil, err
	}
	mp3, err := run(ctx, encoder, bytes.NewReader(wav), MaxBuiltinSpeech)
	if err != nil {
		return nil, modelError(apperr.CodeCompletionRequestError, err, "Encoding speech as MP3 failed.")
	}
	return &Speech{ContentType: "audio/mpeg", Audio: io.NopCloser(bytes.NewReader(mp3))}, nil
}

func synthesise(ctx context.Context, espeak, voice, text string) ([]byte, error) {
	// The text goes in on stdin so that nothing in it is read as an option.
	wav, err := run(ctx, []string{espeak, "-v", voice, "--stdin", "--stdout"}, strings.NewReader(text), MaxBuiltinSpeech)
	if err != nil {
		return nil, modelError(apperr.CodeCompletionRequestError, err, "espeak-ng could not speak the text with voice %q.", voice)
	}
	return wav, nil
}

// builtinTranscriber is the builtin speech-to-text model.
type builtinTranscriber struct{}

// Transcribe returns the words pocketsphinx hears in a recording. filename
// only gives the temporary copy its extension; ffmpeg judges the format by
// the content.
func (builtinTranscriber) Transcribe(ctx context.Context, audio io.Reader, filename string) (string, error) {
	ffmpeg, err := program("ffmpeg", "ffmpeg", "decoding speech")
	if err != nil {
		return "", err
	}
	sphinx, err := program("pocketsphinx_continuous", "pocketsphinx", "speech to text")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(pocketsphinxModel, "en-us")); err != nil {
		return "", modelError(apperr.CodeModelNotSupported, err,
			"The builtin model provider needs the US English speech model; install the Debian package pocketsphinx-en-us.")
	}

	dir, err := os.MkdirTemp("", "appkb-speech-")
	if err != nil {
		return "", fmt.Errorf("speech to text: %w", err)
	}
	defer os.RemoveAll(dir)
	// ffmpeg reads from a file: MP4 and M4A may keep their index at the
	// end, which a pipe cannot seek to.
	ext := strings.ToLower(filepath.Ext(filename))
	if !audioExt.MatchString(ext) {
		ext = ".audio"
	}
	in := filepath.Join(dir, "in"+ext)
	f, err := os.Create(in)
	if err != nil {
		return "", fmt.Errorf("speech to text: %w", err)
	}
	if _, err := io.Copy(f, audio); err != nil {
		f.Close()
		return "", fmt.Errorf("speech to text: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("speech to text: %w", err)
	}
	pcm := filepath.Join(dir, "speech.raw")
	if _, err := run(ctx, []string{ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-i", in,
		"-vn", "-ar", "16000", "-ac", "1", "-f", "s16le", pcm}, nil, 0); err != nil {
		return "", modelError(apperr.CodeCompletionRequestError, err, "The recording could not be decoded.")
	}
	out, err := run(ctx, []string{sphinx, "-infile", pcm, "-logfn", os.DevNull,
		"-hmm", filepath.Join(pocketsphinxModel, "en-us"),
		"-lm", filepath.Join(pocketsphinxModel, "en-us.lm.bin"),
		"-dict", filepath.Join(pocketsphinxModel, "cmudict-en-us.dict")}, nil, 1<<20)
	if err != nil {
		return "", modelError(apperr.CodeCompletionRequestError, err, "pocketsphinx could not transcribe the recording.")
	}
	// One line per utterance.
	return strings.Join(strings.Fields(string(out)), " "), nil
}

// run executes a command with stdin and returns its stdout, at most max
// bytes (0: stdout is discarded). The start of stderr goes into the error.
func run(ctx context.Context, argv []string, stdin io.Reader, max int64) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = stdin
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 4 << 10}
	cmd.Stdout = io.Discard
	if max > 0 {
		cmd.Stdout = &limitedBuffer{buf: &stdout, max: max}
	}
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errOutputTooLarge) {
			return nil, fmt.Errorf("%s: output larger than %d bytes", filepath.Base(argv[0]), max)
		}
		return nil, fmt.Errorf("%s: %w: %s", filepath.Base(argv[0]), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

var errOutputTooLarge = errors.New("output too large")

// limitedBuffer keeps at most max bytes and fails the write beyond that.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int64
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if int64(b.buf.Len()+len(p)) > b.max {
		return 0, errOutputTooLarge
	}
	return b.buf.Write(p)
}

// tailBuffer keeps the first max bytes written and drops the rest.
type tailBuffer struct {
	bytes.Buffer
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
