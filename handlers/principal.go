package handlers

import (
	"context"

	"appkb/internal/apps/apikeys"
	"appkb/internal/platform/apperr"
)

type principalKey struct{}

func withPrincipal(ctx context.Context, p *apikeys.Principal) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, principalKey{}, p)
}

// principalFrom returns the key that authenticated the request. The request
// validator guarantees one for every operation under /v1.
func principalFrom(ctx context.Context) (*apikeys.Principal, error) {
	p, ok := ctx.Value(principalKey{}).(*apikeys.Principal)
	if !ok {
		return nil, apperr.Unauthorized("Access token is invalid.")
	}
	return p, nil
}
