package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"appkb/internal/platform/docparse"
	"appkb/internal/platform/netguard"
)

// ---- webscraper ----

const (
	// webMaxBody bounds the page the web scraper reads.
	webMaxBody = MaxAnswerBytes
	// webTimeout bounds one fetch.
	webTimeout = 30 * time.Second
)

// pageExt maps the media types the web scraper reads to the extension
// docparse reads them as.
var pageExt = map[string]string{
	"text/html": "html", "application/xhtml+xml": "html", "text/plain": "txt", "text/markdown": "md",
	"text/csv": "csv", "application/json": "json", "application/pdf": "pdf",
}

var toolWebScraper = &Tool{
	Provider: "webscraper", Name: "webscraper",
	Description: "Reads the text of a web page.",
	Params: []Param{
		{Name: "url", Type: paramString, Required: true, LLM: true, Description: "The http or https address of the page."},
		{Name: "user_agent", Type: paramString, Description: "User-Agent header to send."},
		{Name: "generate_summary", Type: paramBoolean, Default: false, Description: "Accepted for compatibility; the whole text is returned."},
	},
	Run: func(ctx context.Context, env *Env, args map[string]any) (*Output, error) {
		raw := strings.TrimSpace(str(args, "url"))
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%q is not an http or https URL", raw)
		}
		ctx, cancel := context.WithTimeout(ctx, webTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, fmt.Errorf("%q is not a usable URL", raw)
		}
		ua := str(args, "user_agent")
		if ua == "" {
			ua = "appkb"
		}
		req.Header.Set("User-Agent", ua)
		req.Header.Set("Accept", "text/html, text/plain;q=0.9, */*;q=0.5")
		client, release := env.client(webTimeout)
		defer release()
		res, err := client.Do(req)
		if err != nil {
			if errors.Is(err, netguard.ErrBlocked) || strings.Contains(err.Error(), netguard.ErrBlocked.Error()) {
				return nil, fmt.Errorf("the URL %s points to an address that may not be requested", raw)
			}
			return nil, fmt.Errorf("fetching %s failed: %v", raw, err)
		}
		defer res.Body.Close()
		if res.StatusCode < 200 || res.StatusCode > 299 {
			return nil, fmt.Errorf("fetching %s failed with HTTP status %d", raw, res.StatusCode)
		}
		data, err := io.ReadAll(io.LimitReader(res.Body, webMaxBody+1))
		if err != nil {
			return nil, fmt.Errorf("reading %s failed: %v", raw, err)
		}
		if len(data) > webMaxBody {
			return nil, fmt.Errorf("the page %s is larger than %d bytes", raw, webMaxBody)
		}
		mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
		ext := pageExt[mt]
		if mt == "" {
			ext = "html"
		}
		if ext == "" {
			return nil, fmt.Errorf("the page %s is %s, which the web scraper cannot read", raw, mt)
		}
		doc, err := docparse.Parse("page."+ext, bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %v", raw, err)
		}
		return &Output{
			Text: capText(doc.Text),
			JSON: []any{map[string]any{"url": res.Request.URL.String(), "title": doc.Title, "content_type": mt}},
		}, nil
	},
}
