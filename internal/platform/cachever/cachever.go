// Package cachever keeps small in-memory caches of rows that rarely change
// (API keys, app definitions) correct when the rows do change, in this
// process or in another one using the same database.
//
// Triggers (migration 0013) bump a named counter in the cache_versions table
// whenever a source row is updated or deleted. A Cache reads its counter
// before every lookup, one primary-key read of a tiny table, and drops
// everything it holds as soon as the counter moved. An entry is stored only
// under the counter value read before its row was loaded, so a change that
// commits while a row is being loaded can never be hidden by that row.
package cachever

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"

	appdb "appkb/db"
)

// maxEntries bounds a cache; when full it starts again empty.
const maxEntries = 10000

// Cache maps keys to values loaded from the database, valid while the
// counter name in cache_versions is unchanged. Safe for concurrent use.
type Cache[K comparable, V any] struct {
	name string
	db   *gorm.DB

	stmt lazyStmt

	mu      sync.RWMutex
	version int64
	items   map[K]V
}

// New returns an empty cache checked against the counter name.
func New[K comparable, V any](db *gorm.DB, name string) *Cache[K, V] {
	return &Cache[K, V]{name: name, db: db, version: -1, items: map[K]V{}}
}

// Version reads the current value of the counter, or takes it from a
// fresh snapshot carried by ctx (see Snapshots).
func (c *Cache[K, V]) Version(ctx context.Context) (int64, error) {
	if v, ok := fromSnapshot(ctx, c.name); ok {
		return v, nil
	}
	query := `SELECT version FROM cache_versions WHERE name = ?`
	if appdb.IsPostgres(c.db) {
		query = `SELECT version FROM cache_versions WHERE name = $1`
	}
	stmt, err := c.stmt.get(c.db, query)
	if err != nil {
		return 0, fmt.Errorf("cache version %s: %w", c.name, err)
	}
	var v int64
	if err := stmt.QueryRowContext(ctx, c.name).Scan(&v); err != nil {
		return 0, fmt.Errorf("cache version %s: %w", c.name, err)
	}
	return v, nil
}

// Get returns the value for key. When the cache does not hold it, or holds
// it under an older counter, load reads it; ok false from load means "no
// such row", which is not cached.
func (c *Cache[K, V]) Get(ctx context.Context, key K, load func(context.Context) (V, bool, error)) (V, bool, error) {
	var zero V
	v, err := c.Version(ctx)
	if err != nil {
		return zero, false, err
	}
	c.mu.RLock()
	if c.version == v {
		if val, ok := c.items[key]; ok {
			c.mu.RUnlock()
			return val, true, nil
		}
	}
	c.mu.RUnlock()

	val, ok, err := load(ctx)
	if err != nil || !ok {
		return val, ok, err
	}
	c.mu.Lock()
	if v > c.version {
		c.version = v
		clear(c.items)
	}
	if v == c.version {
		if len(c.items) >= maxEntries {
			clear(c.items)
		}
		c.items[key] = val
	}
	c.mu.Unlock()
	return val, true, nil
}

// Forget drops everything, for a change this process made and wants seen
// before its counter is read again.
func (c *Cache[K, V]) Forget() {
	c.mu.Lock()
	clear(c.items)
	c.version = -1
	c.mu.Unlock()
}

// snapshotTTL is how long the counters of a snapshot stand in for reading
// them again. A snapshot is taken when a request arrives; lookups made
// later than this (a long run) read the counters themselves.
const snapshotTTL = 250 * time.Millisecond

// snapshot is every counter as read at one moment.
type snapshot struct {
	at       time.Time
	versions map[string]int64
}

type snapshotKey struct{}

// Snapshots reads all counters with one query, so that a request whose
// lookups go through several caches (key, app, end user, settings) checks
// them with one read instead of one read per cache. The guarantee stays
// the same: every entry served was current when the request arrived, so a
// key revoked before that is never accepted.
type Snapshots struct {
	db   *gorm.DB
	stmt lazyStmt
	// sumStmt reads the sum and number of the counters. Counters only
	// grow, so an unchanged sum over the same rows means that no counter
	// moved, and the counters read last time still hold: one row read in C
	// instead of a row per counter through database/sql.
	sumStmt lazyStmt

	mu   sync.Mutex
	last sumOf
	seen map[string]int64 // the counters whose sum is last; never modified
}

// sumOf is the sum and the number of all counters.
type sumOf struct{ sum, n int64 }

// NewSnapshots returns a reader of snapshots of db's counters.
func NewSnapshots(db *gorm.DB) *Snapshots { return &Snapshots{db: db} }

// Attach returns ctx carrying a snapshot of every counter. When the read
// fails, ctx is returned as it is and every cache reads its own counter.
func (s *Snapshots) Attach(ctx context.Context) context.Context {
	at := time.Now()
	versions, err := s.read(ctx)
	if err != nil {
		return ctx
	}
	return context.WithValue(ctx, snapshotKey{}, &snapshot{at: at, versions: versions})
}

// read returns every counter: the map read last time when the sum of the
// counters has not changed since, otherwise a fresh read.
func (s *Snapshots) read(ctx context.Context) (map[string]int64, error) {
	sumStmt, err := s.sumStmt.get(s.db, `SELECT COALESCE(SUM(version), 0), COUNT(*) FROM cache_versions`)
	if err != nil {
		return nil, err
	}
	var now sumOf
	if err := sumStmt.QueryRowContext(ctx).Scan(&now.sum, &now.n); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.seen != nil && s.last == now {
		seen := s.seen
		s.mu.Unlock()
		return seen, nil
	}
	s.mu.Unlock()
	stmt, err := s.stmt.get(s.db, `SELECT name, version FROM cache_versions`)
	if err != nil {
		return nil, err
	}
	rows, err := stmt.QueryContext(ctx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	versions := make(map[string]int64, 8)
	var read sumOf
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return nil, err
		}
		versions[name] = v
		read.sum += v
		read.n++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// The map is remembered under its own sum (a counter may have moved
	// between the two reads); a later read whose sum matches can use it.
	s.mu.Lock()
	s.last, s.seen = read, versions
	s.mu.Unlock()
	return versions, nil
}

// fromSnapshot returns counter name from ctx's snapshot while it is fresh.
func fromSnapshot(ctx context.Context, name string) (int64, bool) {
	s, ok := ctx.Value(snapshotKey{}).(*snapshot)
	if !ok || time.Since(s.at) > snapshotTTL {
		return 0, false
	}
	v, ok := s.versions[name]
	return v, ok
}

// lazyStmt is a statement of db's pool, prepared on first use: each
// connection then prepares it once, instead of once per call as gorm does.
type lazyStmt struct {
	once sync.Once
	stmt *sql.Stmt
	err  error
}

func (l *lazyStmt) get(db *gorm.DB, query string) (*sql.Stmt, error) {
	l.once.Do(func() {
		sqlDB, err := db.DB()
		if err != nil {
			l.err = err
			return
		}
		l.stmt, l.err = sqlDB.Prepare(query)
	})
	return l.stmt, l.err
}
