package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"
)

// The tools of the base64_codec plugin (bowenliang123/base64_codec) that
// work on text, and its image decoder.

var b64URLSafe = Param{Name: "url_safe", Type: paramBoolean, Default: false, Description: "Use the URL-safe alphabet (- and _ instead of + and /)."}

func b64Encoding(args map[string]any) *base64.Encoding {
	if flag(args, "url_safe") {
		return base64.URLEncoding
	}
	return base64.StdEncoding
}

// decodeBase64 accepts padded and unpadded text, and a data: URL prefix.
func decodeBase64(s string, enc *base64.Encoding) ([]byte, error) {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, ";base64,"); strings.HasPrefix(s, "data:") && i > 0 {
		s = s[i+len(";base64,"):]
	}
	s = strings.Join(strings.Fields(s), "")
	if data, err := enc.DecodeString(s); err == nil {
		return data, nil
	}
	data, err := enc.WithPadding(base64.NoPadding).DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, errors.New("the text is not valid Base64")
	}
	return data, nil
}

var toolBase64Encode = &Tool{
	Provider: "base64_codec", Name: "base64_encoder", Label: "Base64 encoder",
	Description: "Encodes text as Base64.",
	Params: []Param{
		{Name: "input_text", Type: paramString, Required: true, LLM: true, Description: "The text to encode."},
		b64URLSafe,
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		return textOut(b64Encoding(args).EncodeToString([]byte(str(args, "input_text")))), nil
	},
}

var toolBase64Decode = &Tool{
	Provider: "base64_codec", Name: "base64_decoder", Label: "Base64 decoder",
	Description: "Decodes Base64 text back into text.",
	Params: []Param{
		{Name: "input_text", Type: paramString, Required: true, LLM: true, Description: "The Base64 text to decode."},
		b64URLSafe,
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		data, err := decodeBase64(str(args, "input_text"), b64Encoding(args))
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(data) {
			return nil, errors.New("the decoded bytes are not text; use base64_image_decoder for images")
		}
		return textOut(string(data)), nil
	},
}

var toolBase64ImageDecode = &Tool{
	Provider: "base64_codec", Name: "base64_image_decoder", Label: "Base64 image decoder",
	Description: "Turns Base64 text (optionally a data: URL) of a PNG, JPEG, GIF or WebP image into an image file.",
	Params: []Param{
		{Name: "input_text", Type: paramString, Required: true, LLM: true, Description: "The Base64 text of the image."},
		{Name: "output_filename", Type: paramString, Description: "Name of the file, without extension; image when left out."},
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		data, err := decodeBase64(str(args, "input_text"), base64.StdEncoding)
		if err != nil {
			return nil, err
		}
		mt := http.DetectContentType(data)
		ext := map[string]string{"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}[mt]
		if ext == "" {
			return nil, fmt.Errorf("the decoded bytes are %s, not a PNG, JPEG, GIF or WebP image", mt)
		}
		name := strings.TrimSpace(str(args, "output_filename"))
		if name == "" {
			name = "image"
		}
		name = path.Base(name) + ext
		return &Output{Text: name, Files: []File{{Name: name, MimeType: mt, Data: data}}}, nil
	},
}
