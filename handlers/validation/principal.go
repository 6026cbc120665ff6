// Package validation admits the requests of the API: it finds the
// operation a request names in openapi.yaml, checks its bearer key (from
// the headers first, then what the key may use), cleans up and checks its
// parameters and body against the description, and leaves the
// authenticated key on the request's context for the handlers.
package validation

import (
	"context"

	"appkb/internal/apps/apikeys"
	"appkb/internal/platform/apperr"
)

// BasePath is where every operation of the API is mounted.
const BasePath = "/v1"

// AdminBasePath is where the admin operations are mounted.
const AdminBasePath = "/admin/v1"

// SchemeAdminToken is the security scheme of the admin operations.
const SchemeAdminToken = "AdminToken"

type principalKey struct{}

// WithPrincipal keeps p on ctx as the key of the request.
func WithPrincipal(ctx context.Context, p *apikeys.Principal) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the key that authenticated the request. The request
// validator guarantees one for every operation under /v1.
func PrincipalFrom(ctx context.Context) (*apikeys.Principal, error) {
	p, ok := ctx.Value(principalKey{}).(*apikeys.Principal)
	if !ok {
		return nil, apperr.Unauthorized("Access token is invalid.")
	}
	return p, nil
}

// Principal returns the key that authenticated the request, if any.
func Principal(ctx context.Context) (*apikeys.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*apikeys.Principal)
	return p, ok
}
