package validation

// The bearer keys of the API: checked from the headers before a request is
// admitted (AuthFirst), and again, with what the key may use, by the
// validator.

import (
	"context"
	"crypto/subtle"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"

	"appkb/handlers/ratelimit"
	"appkb/internal/apps/apikeys"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/metrics"
	"appkb/models"
)

// AuthFirst checks the bearer key of a request under /v1 from its headers
// alone, before the request is admitted (guard) and before its body is
// read: a request without a valid key of the right kind is answered 401 at
// once, holds no slot and has its connection closed, so that clients
// without a key cannot take the slots of those with one by sending bodies
// slowly. Each such failure is counted against the client's address in
// failures; an address over that limit gets 429 without its key being
// looked up. Whether the key may use the resource (403) is checked later,
// by the validator.
func (v *Validator) AuthFirst(failures *ratelimit.Limiter) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			m := v.match(c)
			if m == nil || m.err != nil {
				return next(c) // the validator answers 404 or 405
			}
			schemes := securitySchemes(m.route)
			if len(schemes) == 0 {
				return next(c)
			}
			addr := peerAddress(c.Request())
			if ok, wait := failures.Peek(addr); !ok {
				CloseAfterAnswer(c)
				secs := max(1, int(math.Ceil(wait.Seconds())))
				c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
				metrics.RateLimited()
				return apperr.New(http.StatusTooManyRequests, CodeTooManyRequests,
					"Too many requests with a missing or invalid API key from this address; retry in %d second(s).", secs)
			}
			p, err := v.keyFromHeaders(c, schemes)
			if err != nil {
				failures.Allow(addr)
				CloseAfterAnswer(c)
				return err
			}
			req := c.Request()
			c.SetRequest(req.WithContext(WithPrincipal(req.Context(), p)))
			return next(c)
		}
	}
}

// CodeTooManyRequests is the error code of a request over a rate limit.
const CodeTooManyRequests = "too_many_requests"

// securitySchemes lists the security schemes the operation accepts (any one
// of them will do).
func securitySchemes(route *routers.Route) []string {
	reqs := route.Operation.Security
	if reqs == nil && route.Spec != nil {
		reqs = &route.Spec.Security
	}
	if reqs == nil {
		return nil
	}
	var schemes []string
	for _, r := range *reqs {
		for name := range r {
			schemes = append(schemes, name)
		}
	}
	return schemes
}

// keyFromHeaders resolves the bearer key and checks that it is of a kind
// one of schemes takes.
func (v *Validator) keyFromHeaders(c echo.Context, schemes []string) (*apikeys.Principal, error) {
	if slices.Contains(schemes, SchemeAdminToken) {
		return adminPrincipal, adminToken(v.adminToken, c.Request())
	}
	token, err := bearerToken(c.Request())
	if err != nil {
		return nil, err
	}
	v.attachSnapshot(c)
	p, err := v.keys.Authenticate(c.Request().Context(), token)
	if err != nil {
		return nil, err
	}
	for _, scheme := range schemes {
		if err = keyKindFits(p, scheme); err == nil {
			return p, nil
		}
	}
	return nil, err
}

// peerAddress is the address of the client's end of the connection (not a
// forwarding header, which the client could set to anything).
func peerAddress(req *http.Request) string {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		return req.RemoteAddr
	}
	return host
}

// CloseAfterAnswer closes the connection after an answer given before the
// body was read: the server would otherwise read what is left of the body
// first (up to 256 KiB), as slowly as the client cares to send it, holding
// the connection and its descriptor meanwhile. The read deadline in the
// past makes that read fail at once.
func CloseAfterAnswer(c echo.Context) {
	req := c.Request()
	if req.ContentLength == 0 || req.Body == nil || req.Body == http.NoBody {
		return
	}
	c.Response().Header().Set(echo.HeaderConnection, "close")
	_ = http.NewResponseController(c.Response().Writer).SetReadDeadline(time.Now())
}

// bearerToken returns the token of the request's Authorization header.
func bearerToken(req *http.Request) (string, error) {
	header := req.Header.Get(echo.HeaderAuthorization)
	kind, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(kind, "Bearer") || token == "" {
		return "", apperr.Unauthorized("Authorization header must be 'Bearer <api-key>'.")
	}
	return token, nil
}

// authenticate resolves the bearer key for an operation secured by scheme.
func (v *Validator) authenticate(ctx context.Context, scheme string, req *http.Request) (*apikeys.Principal, error) {
	if scheme == SchemeAdminToken {
		return adminPrincipal, adminToken(v.adminToken, req)
	}
	token, err := bearerToken(req)
	if err != nil {
		return nil, err
	}
	p, err := v.keys.Authenticate(ctx, token)
	if err != nil {
		return nil, err
	}
	if err := keyKindFits(p, scheme); err != nil {
		return nil, err
	}
	return p, nil
}

// keyKindFits checks that the key is of the kind scheme takes.
func keyKindFits(p *apikeys.Principal, scheme string) error {
	switch scheme {
	case schemeAppKey:
		if p.Kind != models.KeyKindApp {
			return apperr.Unauthorized("This operation needs an app key (app-…).")
		}
	case schemeKnowledgeKey:
		if p.Kind != models.KeyKindKnowledge {
			return apperr.Unauthorized("This operation needs a knowledge key (dataset-…).")
		}
	case SchemeAdminToken:
		if p != adminPrincipal {
			return apperr.Unauthorized("This operation needs the admin token.")
		}
	default:
		return apperr.Unauthorized("Unknown security scheme %q.", scheme)
	}
	return nil
}

// keyMayUse checks that a knowledge key may use the knowledge base the
// path names.
func keyMayUse(p *apikeys.Principal, scheme string, pathParams map[string]string) error {
	if scheme != schemeKnowledgeKey {
		return nil
	}
	id, ok := pathParams["dataset_id"]
	if ok && !p.MayUseDataset(id) {
		return apperr.Forbidden("This key may not use knowledge base %s.", id)
	}
	// As in Dify, a key bound to some knowledge bases may only call the
	// operations on one of them: listing or creating knowledge bases,
	// tags and uploads for pipelines are for workspace keys.
	if !ok && len(p.Datasets) > 0 {
		return apperr.Forbidden("This knowledge key is limited to some knowledge bases; this operation names none of them and needs a workspace knowledge key.")
	}
	return nil
}

// adminPrincipal stands for the admin token once it was checked.
var adminPrincipal = &apikeys.Principal{KeyID: "admin", Kind: SchemeAdminToken}

// adminToken checks the admin bearer token in constant time.
func adminToken(want string, req *http.Request) error {
	kind, token, ok := strings.Cut(strings.TrimSpace(req.Header.Get(echo.HeaderAuthorization)), " ")
	token = strings.TrimSpace(token)
	if want == "" || !ok || !strings.EqualFold(kind, "Bearer") ||
		subtle.ConstantTimeCompare([]byte(token), []byte(want)) != 1 {
		return apperr.Unauthorized("The admin API needs 'Bearer <admin-token>', the token the server was started with.")
	}
	return nil
}
