package db

import (
	"context"
	"database/sql"
	"strings"
	"unicode"
)

// pool is the connection pool gorm sees. SQLite lets one connection write at
// a time; when many connections try, all but one sleep and retry until the
// busy timeout and then fail with "database is locked". So every write goes
// through a single writer connection, where callers queue in Go (giving up
// when their context ends) instead of inside SQLite, and plain reads go to a
// pool of read-only connections, which WAL lets run beside the writer.
//
// A statement is a read when it starts with SELECT or WITH and is not inside
// a transaction; transactions always run on the writer (with BEGIN
// IMMEDIATE, so they never have to upgrade a read lock). Code running inside
// a transaction must use that transaction for its writes: a write on the
// outer handle would wait for the writer the transaction holds.
//
// Prepared statements are not cached on the writer (gorm's PrepareStmt
// keeps a connection per statement and deadlocks with one connection).
type pool struct {
	writer  *sql.DB
	readers *sql.DB
	// dsn opens another read-write connection (see Checkpointer).
	dsn string
	// file is the database file's path.
	file string
}

func (p *pool) route(query string) *sql.DB {
	if isRead(query) {
		return p.readers
	}
	return p.writer
}

// isRead reports whether query starts with SELECT or WITH.
func isRead(query string) bool {
	q := strings.TrimLeftFunc(query, unicode.IsSpace)
	for _, kw := range []string{"select", "with"} {
		if len(q) > len(kw) && strings.EqualFold(q[:len(kw)], kw) && !isWordByte(q[len(kw)]) {
			return true
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func (p *pool) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.route(query).PrepareContext(ctx, query)
}

func (p *pool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return p.writer.ExecContext(ctx, query, args...)
}

func (p *pool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.route(query).QueryContext(ctx, query, args...)
}

func (p *pool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.route(query).QueryRowContext(ctx, query, args...)
}

// BeginTx starts a transaction on the writer.
func (p *pool) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	return p.writer.BeginTx(ctx, opts)
}

// GetDBConn lets gorm's DB() return the writer.
func (p *pool) GetDBConn() (*sql.DB, error) { return p.writer, nil }

// Ping checks both pools.
func (p *pool) Ping() error {
	if err := p.writer.Ping(); err != nil {
		return err
	}
	return p.readers.Ping()
}

func (p *pool) Close() error {
	err := p.readers.Close()
	if werr := p.writer.Close(); werr != nil {
		err = werr
	}
	return err
}
