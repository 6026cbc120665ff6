package validation

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// specRouters are the routers the validator finds operations with, one
// for the service operations and one for the admin ones, built once per
// process from the parsed spec. Like the spec they are only read once
// built, so every server of a process shares them.
// parsedSpec is the API description, parsed once per process: parsing
// takes about 0.1 s (1 s under the race detector), and nothing writes to
// the parsed document, so every server of a process (the tests build
// hundreds) shares it as the requests of one server do.
var parsedSpec = sync.OnceValues(loadSpec)

type specRouters struct {
	service, admin routers.Router
}

var builtRouters = sync.OnceValues(func() (specRouters, error) {
	spec, err := parsedSpec()
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

// WarmSpec starts parsing openapi.yaml and building its routers in the
// background, the largest part of a server's start (most of 0.1 s of CPU),
// so that it overlaps with what the process does before NewServer (opening
// and migrating the database). NewServer waits for the result; calling
// WarmSpec is never required, and calling it twice is harmless.
func WarmSpec() {
	go func() {
		defer func() {
			if v := recover(); v != nil {
				slog.Error("parsing openapi.yaml panicked", "panic", v)
			}
		}()
		_, _ = builtRouters()
	}()
}
