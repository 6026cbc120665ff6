package cluster

// The replica registry. Every serving process writes a row in the
// replicas table and refreshes its heartbeat every few seconds. Work a
// replica takes on (an indexing job, an annotation job, a workflow run, a
// streamed message) carries the replica's id in a replica_id column, so
// that when the heartbeat stops the other replicas can tell that the work
// has no one left to finish it: they queue jobs again and close runs and
// messages as interrupted. A replica whose row is missing (it stopped in
// order and deleted it) counts as dead too.
//
// On SQLite one process owns the data directory, so nothing else can be
// alive: whatever is unfinished when the process starts was left by a
// dead one, and the periodic sweeps do not run. The same code and table
// serve both engines.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"appkb/db"
)

// Default timings of a Replica.
const (
	DefaultHeartbeat = 5 * time.Second
	DefaultDeadAfter = 15 * time.Second
)

// ReplicaInfo is one row of the replicas table.
type ReplicaInfo struct {
	ID          string `gorm:"primaryKey"`
	Host        string
	StartedAt   time.Time
	HeartbeatAt time.Time
}

// TableName is the table of replica rows.
func (ReplicaInfo) TableName() string { return "replicas" }

// Replica is this process's entry in the replica registry. Build it with
// NewReplica, set the durations if the defaults do not fit, register
// sweeps, then Start it before any work is taken on and Stop it after all
// work has stopped.
type Replica struct {
	// ID names this replica in replica_id columns; a random uuid.
	ID string
	// Host is the machine's name, for operators reading the table.
	Host string
	// Heartbeat is how often the row's heartbeat_at is refreshed and the
	// sweeps run.
	Heartbeat time.Duration
	// DeadAfter is how old a heartbeat may be before its replica counts
	// as dead. It must be well above Heartbeat: a replica slowed down by
	// its database must not be mistaken for a dead one.
	DeadAfter time.Duration
	Log       *slog.Logger

	db      *gorm.DB
	started time.Time

	mu     sync.Mutex
	sweeps []replicaSweep
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// replicaSweep is periodic work that takes over what dead replicas left.
type replicaSweep struct {
	name string
	fn   func(ctx context.Context) (int64, error)
}

// NewReplica returns an unregistered replica over gdb with a fresh id.
func NewReplica(gdb *gorm.DB) *Replica {
	host, _ := os.Hostname()
	return &Replica{ID: uuid.NewString(), Host: host, Heartbeat: DefaultHeartbeat, DeadAfter: DefaultDeadAfter,
		Log: slog.Default(), db: gdb, started: time.Now().UTC()}
}

// Shared reports whether other replicas may be working on the same
// database (PostgreSQL). Work queues then claim with SKIP LOCKED and only
// work of dead replicas is taken over. A nil Replica is never shared: the
// process is alone, as in tests and commands that serve nothing.
func (r *Replica) Shared() bool { return r != nil && db.IsPostgres(r.db) }

// OwnerID is the id to stamp on work this replica takes on; nil for a nil
// Replica (the work then belongs to no one, which on a shared database
// means any replica may close it).
func (r *Replica) OwnerID() *string {
	if r == nil {
		return nil
	}
	id := r.ID
	return &id
}

// OnSweep registers fn to run every Heartbeat while the replica runs on a
// shared database; it returns how many rows it took over, which is
// logged. Register sweeps before Start.
func (r *Replica) OnSweep(name string, fn func(ctx context.Context) (int64, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweeps = append(r.sweeps, replicaSweep{name: name, fn: fn})
}

func (r *Replica) defaults() {
	if r.Heartbeat <= 0 {
		r.Heartbeat = DefaultHeartbeat
	}
	if r.DeadAfter <= 0 {
		r.DeadAfter = DefaultDeadAfter
	}
	if r.Log == nil {
		r.Log = slog.Default()
	}
}

// Beat writes the row with a fresh heartbeat, creating it if it is
// missing (the first beat, or after another replica removed it).
func (r *Replica) Beat(ctx context.Context) error {
	now := r.nowExpr()
	err := r.db.WithContext(ctx).Exec(`INSERT INTO replicas (id, host, started_at, heartbeat_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`,
		r.ID, r.Host, r.started, now).Error
	if err != nil {
		return fmt.Errorf("replica heartbeat: %w", err)
	}
	return nil
}

// Start registers the replica (synchronously, so that work stamped with
// its id right after counts as owned by a live replica), then keeps the
// heartbeat fresh and, on a shared database, runs the sweeps, until Stop.
func (r *Replica) Start(ctx context.Context) {
	r.defaults()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return
	}
	if err := r.Beat(ctx); err != nil {
		r.Log.Error("cluster: registering this replica failed; retrying", "replica", r.ID, "err", err)
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.loop(ctx)
	}()
}

func (r *Replica) loop(ctx context.Context) {
	Every(ctx, r.Heartbeat, func(ctx context.Context) {
		if err := r.Beat(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error("cluster: heartbeat failed", "replica", r.ID, "err", err)
		}
		if r.Shared() {
			r.Sweep(ctx)
		}
	})
}

// Sweep runs every registered sweep once; Start runs it every Heartbeat
// on a shared database. A sweep that fails or panics is logged and the
// others still run.
func (r *Replica) Sweep(ctx context.Context) {
	r.mu.Lock()
	sweeps := append([]replicaSweep(nil), r.sweeps...)
	r.mu.Unlock()
	for _, s := range sweeps {
		if ctx.Err() != nil {
			return
		}
		n, err := r.runSweep(ctx, s)
		switch {
		case err != nil && ctx.Err() == nil:
			r.Log.Error("cluster: taking over work of dead replicas failed", "sweep", s.name, "err", err)
		case n > 0:
			r.Log.Warn("cluster: took over work of dead replicas", "sweep", s.name, "rows", n)
		}
	}
}

func (r *Replica) runSweep(ctx context.Context, s replicaSweep) (n int64, err error) {
	defer func() {
		if v := recover(); v != nil {
			r.Log.Error("cluster: sweep panicked", "sweep", s.name, "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return s.fn(ctx)
}

// Stop ends the heartbeat and deletes the replica's row: whatever work
// still carries its id is from then on free for the other replicas. Call
// it after the work this replica owns has stopped.
func (r *Replica) Stop() {
	r.mu.Lock()
	cancel := r.cancel
	r.cancel = nil
	r.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	r.wg.Wait()
	ctx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	if err := r.db.WithContext(ctx).Exec(`DELETE FROM replicas WHERE id = ?`, r.ID).Error; err != nil {
		r.Log.Error("cluster: removing this replica's row failed", "replica", r.ID, "err", err)
	}
}

// Alive reports whether the replica id has a fresh heartbeat.
func (r *Replica) Alive(ctx context.Context, id string) (bool, error) {
	r.defaults()
	var n int64
	err := r.db.WithContext(ctx).Raw(`SELECT COUNT(*) FROM replicas WHERE id = ? AND heartbeat_at >= ?`, id, r.cutoff()).Scan(&n).Error
	return n > 0, err
}

// Dead lists the replicas whose heartbeat is stale, oldest first.
func (r *Replica) Dead(ctx context.Context) ([]ReplicaInfo, error) {
	r.defaults()
	var out []ReplicaInfo
	err := r.db.WithContext(ctx).Where("heartbeat_at < ?", r.cutoff()).Order("heartbeat_at, id").Find(&out).Error
	return out, err
}

// Forget deletes the rows of replicas dead for longer than age, once
// their work has been taken over; it returns how many it deleted.
func (r *Replica) Forget(ctx context.Context, age time.Duration) (int64, error) {
	r.defaults()
	res := r.db.WithContext(ctx).Exec(`DELETE FROM replicas WHERE heartbeat_at < ?`, r.ago(max(age, r.DeadAfter)))
	return res.RowsAffected, res.Error
}

// Orphaned is an SQL condition, for Where or as a ? argument, that holds
// when column (a replica_id) names no live replica: it is NULL, names a
// replica that deleted its row, or one whose heartbeat is stale.
func (r *Replica) Orphaned(column string) clause.Expr {
	r.defaults()
	return clause.Expr{
		SQL:  "(" + column + " IS NULL OR " + column + " NOT IN (SELECT id FROM replicas WHERE heartbeat_at >= ?))",
		Vars: []any{r.cutoff()},
	}
}

// Interrupted is the condition that picks, among unfinished rows, those
// whose work nobody is doing any more, given their owner column: on a
// shared database the orphaned ones; otherwise (SQLite, or a nil Replica)
// all of them, since this process is the only one and has not taken any
// work on yet when it asks.
func (r *Replica) Interrupted(column string) clause.Expr {
	if !r.Shared() {
		return clause.Expr{SQL: "1 = 1"}
	}
	return r.Orphaned(column)
}

// cutoff is the oldest heartbeat of a live replica, as an SQL argument:
// on PostgreSQL it is computed by the server, whose clock every replica
// shares, so that clock skew between machines cannot kill a replica.
func (r *Replica) cutoff() any { return r.ago(r.DeadAfter) }

func (r *Replica) ago(d time.Duration) any {
	if db.IsPostgres(r.db) {
		return clause.Expr{SQL: "(now() - ? * interval '1 millisecond')", Vars: []any{d.Milliseconds()}}
	}
	return time.Now().UTC().Add(-d)
}

// nowExpr is the time written as a heartbeat (see cutoff).
func (r *Replica) nowExpr() any {
	if db.IsPostgres(r.db) {
		return clause.Expr{SQL: "now()"}
	}
	return time.Now().UTC()
}

// Every calls fn each interval until ctx ends (not at once: the first call
// is one interval away). The periodic chores of the replicas (heartbeats,
// taking over the work of dead replicas, pruning) all run this way.
func Every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	db.Every(ctx, interval, func() { fn(ctx) })
}
