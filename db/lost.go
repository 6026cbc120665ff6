package db

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ConnectionLost reports whether err says the connection to the database
// is lost or cannot be made (rather than that a query failed).
func ConnectionLost(err error) bool {
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true
	}
	// PostgreSQL ending the session (SQLSTATE class 57: a restart or shut
	// down, a server not yet accepting) or a broken connection (class 08).
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "57P") || strings.HasPrefix(pe.Code, "08")) {
		return true
	}
	msg := err.Error()
	// pgx reports a connection closed under a query, database/sql a pool
	// that was closed, with these texts only.
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "failed to connect to") ||
		strings.Contains(msg, "sql: database is closed")
}
