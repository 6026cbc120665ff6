// Package health answers the liveness and readiness probes of load
// balancers and supervisors: GET /healthz says the process is alive, GET
// /readyz says it can serve (database reachable, schema current, background
// workers running). Both are plain HTTP handlers without authentication.
package health

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Check is one readiness condition; a non-nil error says why it fails.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Timeout bounds the whole readiness probe.
const Timeout = 3 * time.Second

// report is the body of both probes.
type report struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks,omitempty"`
	// Reason names the first failing check in words.
	Reason string `json:"reason,omitempty"`
}

// Live always answers 200: a process that can run this handler is alive.
func Live() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		write(w, http.StatusOK, report{Status: "ok"})
	})
}

// Ready runs every check and answers 200 when all pass, 503 with the
// failures otherwise.
func Ready(checks ...Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), Timeout)
		defer cancel()
		rep := report{Status: "ok", Checks: map[string]string{}}
		for _, c := range checks {
			if err := c.Fn(ctx); err != nil {
				rep.Checks[c.Name] = err.Error()
				if rep.Reason == "" {
					rep.Status, rep.Reason = "unavailable", c.Name+": "+err.Error()
				}
				continue
			}
			rep.Checks[c.Name] = "ok"
		}
		status := http.StatusOK
		if rep.Reason != "" {
			status = http.StatusServiceUnavailable
		}
		write(w, status, rep)
	})
}

func write(w http.ResponseWriter, status int, rep report) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(rep)
}
