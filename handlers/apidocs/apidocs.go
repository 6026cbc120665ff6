// Package apidocs serves a browsable API reference at /docs: a small HTML
// page that renders the served openapi.yaml with Redoc. The Redoc bundle
// (from the npm package "redoc", see update.sh) is embedded gzip-compressed,
// so the page works offline and loads nothing from other hosts.
package apidocs

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"io"
	"net/http"
	"strings"
	"sync"
)

//go:embed assets/redoc.standalone.js.gz
var redocGz []byte

// ScriptPath is where the Redoc bundle is served, under the page's path.
const ScriptPath = "/docs/redoc.standalone.js"

// page loads the bundle and the description by relative URLs, so the page
// keeps working behind a reverse proxy that mounts appkb under a prefix.
const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>appkb API reference</title>
<style>body { margin: 0; padding: 0; }</style>
</head>
<body>
<div id="redoc-container"></div>
<script src="docs/redoc.standalone.js"></script>
<script>
Redoc.init("openapi.yaml", {
  hideHostname: false,
  expandResponses: "200",
  pathInMiddlePanel: true,
  theme: { typography: { fontFamily: "system-ui, sans-serif", headings: { fontFamily: "system-ui, sans-serif" } } }
}, document.getElementById("redoc-container"));
</script>
</body>
</html>
`

// Page serves the HTML page.
func Page() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		io.WriteString(w, page)
	})
}

var (
	plainOnce sync.Once
	plainJS   []byte
)

// Script serves the Redoc bundle, compressed when the client accepts gzip.
func Script() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/javascript; charset=utf-8")
		h.Set("Cache-Control", "public, max-age=86400")
		h.Add("Vary", "Accept-Encoding")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			h.Set("Content-Encoding", "gzip")
			w.Write(redocGz)
			return
		}
		plainOnce.Do(func() {
			zr, err := gzip.NewReader(bytes.NewReader(redocGz))
			if err == nil {
				plainJS, _ = io.ReadAll(zr)
			}
		})
		w.Write(plainJS)
	})
}

// BundleSize is the size of the embedded (compressed) bundle in bytes.
func BundleSize() int { return len(redocGz) }
