package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"appkb/internal/platform/apperr"
)

// Errors of a database that went away, as PostgreSQL and the drivers word
// them, answer 503; other database errors stay 500.
func TestLostDatabaseErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"server restarting ends the session", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, http.StatusServiceUnavailable},
		{"server shutting down refuses", &pgconn.PgError{Code: "57P03", Message: "the database system is shutting down"}, http.StatusServiceUnavailable},
		{"connection failure", &pgconn.PgError{Code: "08006"}, http.StatusServiceUnavailable},
		{"wrapped in an internal error", apperr.Internal(fmt.Errorf("storing message: %w", &pgconn.PgError{Code: "57P01"})), http.StatusServiceUnavailable},
		{"a constraint is a bug, not an outage", &pgconn.PgError{Code: "23505"}, http.StatusInternalServerError},
		{"anything else", errors.New("boom"), http.StatusInternalServerError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := toAPIError(tc.err); got.Status != tc.want {
				t.Fatalf("status %d (%s), want %d", got.Status, got.Code, tc.want)
			}
		})
	}
}
