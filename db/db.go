// Package db opens appkb's database, SQLite in the data directory or a
// PostgreSQL server named by a URL, and keeps its schema current.
package db

import (
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// FileName is the database file inside the data directory.
const FileName = "appkb.db"

// The SQLite history is migrations/*.sql and the PostgreSQL one
// migrations/postgres/*.sql; both use the same version numbers, so a
// version means the same schema on either.
//
//go:embed migrations/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// Dialect names the database engine behind a *gorm.DB.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// DialectOf reports which engine gdb talks to.
func DialectOf(gdb *gorm.DB) Dialect {
	if gdb != nil && gdb.Dialector != nil && gdb.Dialector.Name() == "postgres" {
		return Postgres
	}
	return SQLite
}

// IsPostgres reports whether gdb is a PostgreSQL database.
func IsPostgres(gdb *gorm.DB) bool { return DialectOf(gdb) == Postgres }

// IsPostgresURL reports whether url names a PostgreSQL server
// (postgres:// or postgresql://).
func IsPostgresURL(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// Connect opens the database an installation uses: the PostgreSQL server
// at url when one is given, otherwise SQLite under dataDir. Either way the
// schema is migrated to the newest version this binary ships.
func Connect(url, dataDir string) (*gorm.DB, error) {
	switch {
	case url == "":
		return Open(dataDir)
	case IsPostgresURL(url):
		return OpenPostgres(url)
	default:
		return nil, fmt.Errorf("database url %q: only postgres:// and postgresql:// URLs are supported", redactURL(url))
	}
}

// Readers is the number of read-only connections Open keeps.
var Readers = 8

// Open opens (creating if needed) the database under dataDir and applies any
// pending migrations. The database uses WAL, foreign keys and immediate
// write transactions. Writes go through one connection and reads through a
// pool of read-only ones (see pool), so writers queue in Go rather than
// wait on SQLite's lock and fail with "database is locked".
func Open(dataDir string) (*gorm.DB, error) {
	if err := PrivateDir(dataDir); err != nil {
		return nil, err
	}
	file := filepath.Join(dataDir, FileName)
	// The database (and so its -wal and -shm files, which SQLite creates
	// with the database's mode) is readable by its owner only; a database
	// an older version created 0644 is narrowed too.
	if f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR, 0o600); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	} else if err := errors.Join(f.Chmod(0o600), f.Close()); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	base := "file:" + file +
		"?_journal_mode=WAL&_busy_timeout=10000&_foreign_keys=on&_synchronous=NORMAL&_txlock=immediate&_stmt_cache_size=128"
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
	p := &pool{writer: writer, readers: readers, dsn: base, file: file}
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

// migrateLockKey is the advisory lock that serialises migrations on
// PostgreSQL ("appkb" in ASCII).
const migrateLockKey = 0x61706b62

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

// migrations lists the embedded files named NNNN_label.sql of dialect d in
// version order.
func migrations(d Dialect) ([]migration, error) {
	dir := "migrations"
	if d == Postgres {
		dir = "migrations/postgres"
	}
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		num, label, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %q: name must be NNNN_label.sql", e.Name())
		}
		body, err := migrationFiles.ReadFile(dir + "/" + e.Name())
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

// Migrate applies every migration not yet recorded in schema_migrations.
// Running it again is a no-op.
//
// On SQLite all pending migrations go in one transaction: a new database
// (every migration pending) is created in one commit instead of one per
// file, which is most of what a fresh start spends on its schema, and an
// upgrade that fails half way leaves the database at the version it had.
// On PostgreSQL each migration keeps its own transaction under the
// advisory lock, so that replicas starting together take turns.
func Migrate(gdb *gorm.DB) error {
	all, err := migrations(DialectOf(gdb))
	if err != nil {
		return err
	}
	if IsPostgres(gdb) {
		return migratePostgres(gdb, all)
	}
	return migrateSQLite(gdb, all)
}

// migrateSQLite applies the migrations of all not yet recorded, all in one
// transaction.
func migrateSQLite(gdb *gorm.DB, all []migration) error {
	return gdb.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(createSchemaMigrations("DATETIME")).Error; err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		var done []int
		if err := tx.Raw(`SELECT version FROM schema_migrations`).Scan(&done).Error; err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		applied := make(map[int]bool, len(done))
		for _, v := range done {
			applied[v] = true
		}
		now := time.Now().UTC()
		for _, m := range all {
			if applied[m.version] {
				continue
			}
			if err := execScript(tx, m.sql); err != nil {
				return fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
			}
			if err := tx.Exec(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, now).Error; err != nil {
				return fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
			}
		}
		return nil
	})
}

func createSchemaMigrations(timeType string) string {
	return `CREATE TABLE IF NOT EXISTS schema_migrations (
			version INTEGER PRIMARY KEY,
			name TEXT NOT NULL,
			applied_at ` + timeType + ` NOT NULL)`
}

// migratePostgres applies the pending migrations one transaction each,
// every one under the advisory lock.
func migratePostgres(gdb *gorm.DB, all []migration) error {
	err := gdb.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(`SELECT pg_advisory_xact_lock(?)`, migrateLockKey).Error; err != nil {
			return err
		}
		return tx.Exec(createSchemaMigrations("TIMESTAMPTZ")).Error
	})
	if err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	for _, m := range all {
		err := gdb.Transaction(func(tx *gorm.DB) error {
			// Replicas starting together take turns: the first
			// applies the migration, the others then find it done.
			if err := tx.Exec(`SELECT pg_advisory_xact_lock(?)`, migrateLockKey).Error; err != nil {
				return err
			}
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

// PrivateDir creates dataDir if needed and makes it its owner's alone
// (0700): it holds the database, uploads and keys' hashes.
func PrivateDir(dataDir string) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if err := os.Chmod(dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	return nil
}
