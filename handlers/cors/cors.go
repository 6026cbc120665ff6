// Package cors lets browsers on the configured origins call the API: it
// answers preflights and adds the CORS headers under /v1, matching
// wildcard origins label by label.
package cors

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"appkb/handlers/validation"
)

// Middleware answers browser preflights and adds CORS headers on /v1 when
// origins are configured; it runs before the request validator so that
// OPTIONS requests never reach it.
func Middleware(origins []string) echo.MiddlewareFunc {
	var allow func(string) (bool, error)
	if !slices.Contains(origins, "*") {
		// Echo turns a wildcard pattern into a regular expression that
		// also matches origins with the pattern's tail elsewhere
		// (https://evil.example/.trusted.example); origins are matched
		// label by label here instead.
		allow = func(origin string) (bool, error) { return originAllowed(origins, origin), nil }
	}
	return middleware.CORSWithConfig(middleware.CORSConfig{
		AllowOriginFunc: allow,
		Skipper: func(c echo.Context) bool {
			p := c.Request().URL.Path
			return len(origins) == 0 || (p != validation.BasePath && !strings.HasPrefix(p, validation.BasePath+"/"))
		},
		AllowOrigins:  origins,
		AllowMethods:  []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete},
		AllowHeaders:  []string{echo.HeaderAuthorization, echo.HeaderContentType, echo.HeaderAccept, "Last-Event-ID"},
		ExposeHeaders: []string{echo.HeaderXRequestID, "Retry-After"},
		MaxAge:        600,
	})
}

// originAllowed reports whether a browser origin matches one of patterns:
// exactly (scheme, host and port, letter case aside), or for a pattern
// scheme://*.domain[:port] when the origin's host is one or more DNS labels
// followed by .domain, with the same scheme and port. An origin with a
// path, query, user or other oddity matches nothing.
func originAllowed(patterns []string, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || strings.ContainsAny(origin, " \\") {
		return false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	for _, p := range patterns {
		if strings.EqualFold(p, origin) {
			return true
		}
		scheme, rest, ok := strings.Cut(p, "://")
		if !ok || !strings.EqualFold(scheme, u.Scheme) || !strings.HasPrefix(rest, "*.") {
			continue
		}
		domain, pport, _ := strings.Cut(rest[2:], ":")
		if pport != port {
			continue
		}
		sub, ok := strings.CutSuffix(host, "."+strings.ToLower(domain))
		if ok && dnsLabels(sub) {
			return true
		}
	}
	return false
}

// dnsLabels reports whether s is one or more dot-separated labels of
// letters, digits and hyphens.
func dnsLabels(s string) bool {
	if s == "" {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
