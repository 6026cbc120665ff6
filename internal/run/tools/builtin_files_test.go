package tools

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"io"
	"strings"
	"testing"
)

func TestEncodingAndMarkdownTools(t *testing.T) {
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 16)...)
	tests := []struct {
		name, provider, tool string
		args                 map[string]any
		wantText             string
		wantFile             string // name of the one file made
		wantInFile           string
		wantErr              string
	}{
		{name: "encode", provider: "bowenliang123/base64_codec/base64_codec", tool: "base64_encoder", args: map[string]any{"input_text": "héllo?>"}, wantText: "aMOpbGxvPz4="},
		{name: "encode url-safe", provider: "base64_codec", tool: "base64_encoder", args: map[string]any{"input_text": "?>?", "url_safe": true}, wantText: "Pz4_"},
		{name: "decode without padding", provider: "base64_codec", tool: "base64_decoder", args: map[string]any{"input_text": "aMOpbGxvPz4"}, wantText: "héllo?>"},
		{name: "decode a data URL", provider: "base64_codec", tool: "base64_decoder", args: map[string]any{"input_text": "data:text/plain;base64,aGk="}, wantText: "hi"},
		{name: "decode garbage", provider: "base64_codec", tool: "base64_decoder", args: map[string]any{"input_text": "%%%"}, wantErr: "not valid Base64"},
		{name: "decode an image", provider: "base64_codec", tool: "base64_image_decoder",
			args: map[string]any{"input_text": base64.StdEncoding.EncodeToString(png), "output_filename": "chart"}, wantText: "chart.png", wantFile: "chart.png"},
		{name: "an image that is not one", provider: "base64_codec", tool: "base64_image_decoder", args: map[string]any{"input_text": "aGk="}, wantErr: "not a PNG, JPEG, GIF or WebP image"},
		{name: "markdown to html", provider: "bowenliang123/md_exporter/md_exporter", tool: "md_to_html",
			args: map[string]any{"md_text": "# Title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n<script>x</script>"}, wantFile: "document.html", wantInFile: "<td>1</td>"},
		{name: "markdown file", provider: "md_exporter", tool: "md_to_md", args: map[string]any{"md_text": "*hi*", "output_filename": "notes.md"}, wantText: "notes.md", wantFile: "notes.md", wantInFile: "*hi*"},
		{name: "markdown to docx", provider: "md_exporter", tool: "md_to_docx",
			args: map[string]any{"md_text": "# Report\n\nSome **bold** & [link](http://x).\n\n- one\n- two\n\n```\ncode <here>\n```"}, wantText: "document.docx", wantFile: "document.docx",
			wantInFile: `<w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t xml:space="preserve">Report</w:t>`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := callTool(t, &Env{}, tc.provider, tc.tool, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantText != "" && out.Text != tc.wantText {
				t.Errorf("text %q, want %q", out.Text, tc.wantText)
			}
			if tc.wantFile == "" {
				if len(out.Files) != 0 {
					t.Errorf("files %v", out.Files)
				}
				return
			}
			if len(out.Files) != 1 || out.Files[0].Name != tc.wantFile {
				t.Fatalf("files %+v", out.Files)
			}
			content := string(out.Files[0].Data)
			if strings.HasSuffix(tc.wantFile, ".docx") {
				zr, err := zip.NewReader(bytes.NewReader(out.Files[0].Data), int64(len(out.Files[0].Data)))
				if err != nil {
					t.Fatal(err)
				}
				f, err := zr.Open("word/document.xml")
				if err != nil {
					t.Fatal(err)
				}
				data, _ := io.ReadAll(f)
				content = string(data)
				for _, want := range []string{"Some bold &amp; link.", "• two", "code &lt;here&gt;"} {
					if !strings.Contains(content, want) {
						t.Errorf("document lacks %q: %s", want, content)
					}
				}
			}
			if !strings.Contains(content, tc.wantInFile) || strings.Contains(content, "<script>") {
				t.Errorf("file content %s", content)
			}
		})
	}
}
