package validation

import (
	"fmt"
	"sync"

	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"appkb/internal/apispec"
)

// specRouters are the routers the validator finds operations with, one
// for the service operations and one for the admin ones, built once per
// process from the parsed spec. Like the spec they are only read once
// built, so every server of a process shares them.
type specRouters struct {
	service, admin routers.Router
}

var builtRouters = sync.OnceValues(func() (specRouters, error) {
	spec, err := apispec.Parsed()
	if err != nil {
		return specRouters{}, err
	}
	service, adminDoc := splitSpec(spec)
	var r specRouters
	if r.service, err = legacy.NewRouter(service); err != nil {
		return r, fmt.Errorf("build router from openapi.yaml: %w", err)
	}
	if r.admin, err = legacy.NewRouter(adminDoc); err != nil {
		return r, fmt.Errorf("build the admin router from openapi.yaml: %w", err)
	}
	return r, nil
})

// Prepare parses openapi.yaml and builds its routers, if that has not
// happened yet, and reports a failure to. It is the largest part of a
// server's start (most of 0.1 s of CPU); serve calls it in the background
// so that it overlaps with opening and migrating the database, and the
// first NewServer waits for it. Calling it is never required.
func Prepare() error {
	_, err := builtRouters()
	return err
}
