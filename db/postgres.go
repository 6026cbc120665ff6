package db

import (
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// PostgresConns is the most connections one process opens to PostgreSQL.
// Several replicas share the server's max_connections between them.
var PostgresConns = 24

// OpenPostgres connects to the PostgreSQL database at url (through pgx)
// and applies any pending migrations. Unlike SQLite, PostgreSQL lets
// writers work side by side, so there is one ordinary pool.
func OpenPostgres(url string) (*gorm.DB, error) {
	gdb, err := openPostgresRaw(url)
	if err != nil {
		return nil, err
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(PostgresConns)
	sqlDB.SetMaxIdleConns(PostgresConns / 2)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	if err := sqlDB.Ping(); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("open database %s: %w", redactURL(url), err)
	}
	if err := Migrate(gdb); err != nil {
		sqlDB.Close()
		return nil, err
	}
	return gdb, nil
}

// redactURL hides the password of a database URL for messages and logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}

// TestDatabaseURLEnv names the variable that points the tests at a
// PostgreSQL server: OpenTemp then gives every test a database of its own
// there instead of a SQLite file. The role must be allowed to create
// databases.
const TestDatabaseURLEnv = "APPKB_TEST_DATABASE_URL"

// OpenTemp opens a migrated, empty database that disappears when the test
// ends: SQLite in a temporary directory, or, when APPKB_TEST_DATABASE_URL
// is set, a fresh PostgreSQL database on that server.
func OpenTemp(tb testing.TB) *gorm.DB {
	tb.Helper()
	if url := os.Getenv(TestDatabaseURLEnv); url != "" {
		gdb, err := openTempPostgres(tb, url)
		if err != nil {
			tb.Fatalf("open temp postgres db: %v", err)
		}
		return gdb
	}
	gdb, err := Open(tb.TempDir())
	if err != nil {
		tb.Fatalf("open temp db: %v", err)
	}
	tb.Cleanup(func() { Close(gdb) })
	return gdb
}

// TempURL creates an empty, migrated PostgreSQL database on the server
// named by APPKB_TEST_DATABASE_URL, returns its URL and drops it when the
// test ends; it skips the test when the variable is unset. Tests that run
// several processes on one database (replicas) use it.
func TempURL(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv(TestDatabaseURLEnv)
	if base == "" {
		tb.Skipf("PostgreSQL tests skipped: set %s to a postgres:// URL of a role that may create databases (.ci/run starts a throwaway server and sets it)", TestDatabaseURLEnv)
	}
	u, err := newTestDatabase(tb, base)
	if err != nil {
		tb.Fatalf("create test database: %v", err)
	}
	return u
}

func openTempPostgres(tb testing.TB, base string) (*gorm.DB, error) {
	u, err := newTestDatabase(tb, base)
	if err != nil {
		return nil, err
	}
	gdb, err := OpenPostgres(u)
	if err != nil {
		return nil, err
	}
	// Registered after the drop, so it runs before it.
	tb.Cleanup(func() { Close(gdb) })
	return gdb, nil
}

var templateOnce struct {
	sync.Mutex
	name string
}

// newTestDatabase copies the migrated template database into a new one and
// arranges for it to be dropped.
func newTestDatabase(tb testing.TB, base string) (string, error) {
	admin, err := openPostgresRaw(base)
	if err != nil {
		return "", err
	}
	defer Close(admin)
	tpl, err := migratedTemplate(admin, base)
	if err != nil {
		return "", err
	}
	var b [6]byte
	rand.Read(b[:])
	name := "appkb_test_" + hex.EncodeToString(b[:])
	if err := admin.Exec(`CREATE DATABASE ` + name + ` TEMPLATE ` + tpl).Error; err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	tb.Cleanup(func() {
		admin, err := openPostgresRaw(base)
		if err != nil {
			tb.Logf("drop test database %s: %v", name, err)
			return
		}
		defer Close(admin)
		if err := admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`).Error; err != nil {
			tb.Logf("drop test database %s: %v", name, err)
		}
	})
	return withDatabase(base, name), nil
}

// migratedTemplate returns the name of a template database holding the
// current schema, creating it the first time. Its name carries a hash of
// the migrations, so test processes share it and a schema change makes a
// new one.
func migratedTemplate(admin *gorm.DB, base string) (string, error) {
	templateOnce.Lock()
	defer templateOnce.Unlock()
	if templateOnce.name != "" {
		return templateOnce.name, nil
	}
	all, err := migrations(Postgres)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, m := range all {
		fmt.Fprintf(h, "%d %s\n%s\n", m.version, m.name, m.sql)
	}
	name := "appkb_tpl_" + hex.EncodeToString(h.Sum(nil)[:6])
	// Test processes run side by side; one builds the template while the
	// others wait on this lock (held by one connection of admin's pool).
	conn, err := admin.DB()
	if err != nil {
		return "", err
	}
	conn.SetMaxOpenConns(1)
	if err := admin.Exec(`SELECT pg_advisory_lock(?)`, migrateLockKey+1).Error; err != nil {
		return "", err
	}
	defer admin.Exec(`SELECT pg_advisory_unlock(?)`, migrateLockKey+1)
	var n int64
	if err := admin.Raw(`SELECT COUNT(*) FROM pg_database WHERE datname = ?`, name).Scan(&n).Error; err != nil {
		return "", err
	}
	if n == 0 {
		building := name + "_tmp"
		if err := admin.Exec(`DROP DATABASE IF EXISTS ` + building + ` WITH (FORCE)`).Error; err != nil {
			return "", err
		}
		if err := admin.Exec(`CREATE DATABASE ` + building).Error; err != nil {
			return "", err
		}
		tdb, err := OpenPostgres(withDatabase(base, building))
		if err != nil {
			return "", err
		}
		Close(tdb)
		if err := admin.Exec(`ALTER DATABASE ` + building + ` RENAME TO ` + name).Error; err != nil {
			return "", err
		}
	}
	templateOnce.name = name
	return name, nil
}

// openPostgresRaw connects without migrating or sizing the pool (for
// administrative work such as creating databases, and as the first step
// of OpenPostgres).
func openPostgresRaw(url string) (*gorm.DB, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", redactURL(url), err)
	}
	// The pool is made here so that its connections drop NUL from text
	// (nul.go); the DSN stays on the dialector for the cluster bus, which
	// opens a LISTEN connection of its own.
	conns := sql.OpenDB(nulFreeConnector{stdlib.GetConnector(*cfg)})
	gdb, err := gorm.Open(postgres.New(postgres.Config{DSN: url, Conn: conns}), &gorm.Config{
		Logger: logger.Default.LogMode(logger.Silent),
		// PostgreSQL keeps microseconds: values made here match what
		// is read back.
		NowFunc:        func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
		TranslateError: true,
	})
	if err != nil {
		conns.Close()
		return nil, fmt.Errorf("open database %s: %w", redactURL(url), err)
	}
	return gdb, nil
}

// withDatabase returns base with its database name replaced.
func withDatabase(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	u.Path = "/" + strings.TrimPrefix(name, "/")
	return u.String()
}
