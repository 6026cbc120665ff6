// Package db opens appkb's SQLite database and keeps its schema current.
package db

import (
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// FileName is the database file inside the data directory.
const FileName = "appkb.db"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Readers is the number of read-only connections Open keeps.
var Readers = 8

// Open opens (creating if needed) the database under dataDir and applies any
// pending migrations. The database uses WAL, foreign keys and immediate
// write transactions. Writes go through one connection and reads through a
// pool of read-only ones (see pool), so writers queue in Go rather than
// wait on SQLite's lock and fail with "database is locked".
func Open(dataDir string) (*gorm.DB, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	base := "file:" + filepath.Join(dataDir, FileName) +
		"?_journal_mode=WAL&_busy_timeout=10000&_foreign_keys=on&_synchronous=NORMAL&_txlock=immediate"
	writer, err := sql.Open("sqlite3", base)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	// The writer creates the file and switches it to WAL before any reader
	// opens it.
	if err := writer.Ping(); err != nil {
		writer.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	readers, err := sql.Open("sqlite3", base+"&_query_only=true")
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	readers.SetMaxOpenConns(Readers)
	readers.SetMaxIdleConns(Readers)
	p := &pool{writer: writer, readers: readers}
	gdb, err := gorm.Open(sqlite.New(sqlite.Config{DriverName: "sqlite3", DSN: base, Conn: p}), &gorm.Config{
		Logger:         logger.Default.LogMode(logger.Silent),
		NowFunc:        func() time.Time { return time.Now().UTC() },
		TranslateError: true,
	})
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := Migrate(gdb); err != nil {
		p.Close()
		return nil, err
	}
	return gdb, nil
}

// OpenTemp opens a migrated database in a temporary directory that is removed
// when the test ends.
func OpenTemp(tb testing.TB) *gorm.DB {
	tb.Helper()
	gdb, err := Open(tb.TempDir())
	if err != nil {
		tb.Fatalf("open temp db: %v", err)
	}
	tb.Cleanup(func() { Close(gdb) })
	return gdb
}

// Close releases the underlying connections.
func Close(gdb *gorm.DB) error {
	if p, ok := gdb.ConnPool.(*pool); ok {
		return p.Close()
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

type migration struct {
	version int
	name    string
	sql     string
}

// migrations lists the embedded files named NNNN_label.sql in version order.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, label, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %q: name must be NNNN_label.sql", e.Name())
		}
		body, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: label, sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("two migrations share version %d", out[i].version)
		}
	}
	return out, nil
}

// Migrate applies, each in its own transaction, every migration not yet
// recorded in schema_migrations. Running it again is a no-op.
func Migrate(gdb *gorm.DB) error {
	if err := gdb.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		name TEXT NOT NULL,
		applied_at DATETIME NOT NULL)`).Error; err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	all, err := migrations()
	if err != nil {
		return err
	}
	for _, m := range all {
		err := gdb.Transaction(func(tx *gorm.DB) error {
			var n int64
			if err := tx.Raw(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&n).Error; err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if err := execScript(tx, m.sql); err != nil {
				return err
			}
			return tx.Exec(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, time.Now().UTC()).Error
		})
		if err != nil {
			return fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
		}
	}
	return nil
}

// execScript runs a multi-statement SQL script inside tx.
func execScript(tx *gorm.DB, script string) error {
	conn, ok := tx.Statement.ConnPool.(interface {
		Exec(string, ...any) (sql.Result, error)
	})
	if ok {
		_, err := conn.Exec(script)
		return err
	}
	return tx.Exec(script).Error
}

// Version reports the highest applied migration.
func Version(gdb *gorm.DB) (int, error) {
	var v sql.NullInt64
	err := gdb.Raw(`SELECT MAX(version) FROM schema_migrations`).Scan(&v).Error
	return int(v.Int64), err
}
