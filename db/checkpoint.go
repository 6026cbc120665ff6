package db

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// Checkpointer copies SQLite's write-ahead log back into the database file
// from a connection of its own, in the background.
//
// Left to itself, SQLite checkpoints inside the commit that takes the log
// past 1,000 pages: that commit copies the pages, syncs both files (a few
// milliseconds here) and holds the one writer meanwhile, so every write
// queued behind it waits too; under load this happened many times a second
// and set the slowest answers. While a Checkpointer runs, checkpoints are
// passive (they never wait for readers or the writer, nor make them wait)
// and run every interval; the writer still checkpoints by itself past
// backstopPages, should the background fall behind.
//
// It also flushes the log file to disk every flushInterval, from a
// goroutine of its own. SQLite itself syncs the log only in a few commits:
// the one that starts the log over, and the one that checkpoints past
// backstopPages. Those commits hold the writer while the disk takes
// everything written since the last sync, which on a slow disk is tens of
// milliseconds for a log that grew for a second. Flushed ahead, they find
// little left to write. The extra syncs only make data durable sooner; they
// change nothing SQLite relies on.
//
// On PostgreSQL it does nothing.
type Checkpointer struct {
	gdb           *gorm.DB
	log           *slog.Logger
	interval      time.Duration
	flushInterval time.Duration

	conn    *sql.DB
	walPath string
	flushes atomic.Int64 // syncs of the log file done so far
	cancel  context.CancelFunc
	done    chan struct{}
}

const (
	// checkpointInterval is how often the log is checkpointed.
	checkpointInterval = 100 * time.Millisecond
	// flushInterval is how often the log file is synced to disk.
	flushInterval = 10 * time.Millisecond
	// backstopPages is the log size past which the writer checkpoints by
	// itself (SQLite's default is 1,000).
	backstopPages    = 10000
	defaultAutoPages = 1000
)

// NewCheckpointer returns a checkpointer for gdb, not yet started.
func NewCheckpointer(gdb *gorm.DB, log *slog.Logger) *Checkpointer {
	return &Checkpointer{gdb: gdb, log: log, interval: checkpointInterval, flushInterval: flushInterval}
}

// Start opens the checkpointer's connection, raises the writer's own
// threshold and begins checkpointing.
func (c *Checkpointer) Start(ctx context.Context) {
	p, ok := c.gdb.ConnPool.(*pool)
	if !ok {
		return
	}
	conn, err := sql.Open("sqlite3", p.dsn)
	if err != nil {
		c.log.Warn("checkpointer: cannot open a connection; commits checkpoint by themselves", "err", err)
		return
	}
	conn.SetMaxOpenConns(1)
	conn.SetConnMaxLifetime(0)
	conn.SetConnMaxIdleTime(0)
	if err := setAutoCheckpoint(ctx, p.writer, backstopPages); err != nil {
		conn.Close()
		c.log.Warn("checkpointer: cannot raise the writer's threshold; commits checkpoint by themselves", "err", err)
		return
	}
	ctx, c.cancel = context.WithCancel(ctx)
	c.conn, c.done = conn, make(chan struct{})
	c.walPath = p.file + "-wal"
	var wg sync.WaitGroup
	wg.Go(func() { Every(ctx, c.interval, func() { c.checkpoint(ctx) }) })
	wg.Go(func() {
		l := &logFlusher{c: c}
		defer l.close()
		Every(ctx, c.flushInterval, l.flush)
	})
	go func() {
		wg.Wait()
		close(c.done)
	}()
}

// Every calls fn each interval until ctx ends, the first time one interval
// after the start. The checkpointer's loops and the replicas' periodic
// chores (through cluster.Every) all run this way.
func Every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// logFlusher syncs the log file when it was written since its last sync
// (the file's modification time tells). The file is opened when first
// needed and opened again after a failure, so a log that is missing for a
// while costs nothing but a retry. It is for one goroutine.
type logFlusher struct {
	c      *Checkpointer
	f      *os.File
	synced time.Time // the file's modification time at the last sync
}

func (l *logFlusher) flush() {
	if l.f == nil {
		f, err := os.Open(l.c.walPath)
		if err != nil {
			return
		}
		l.f, l.synced = f, time.Time{}
	}
	st, err := l.f.Stat()
	if err == nil && st.ModTime().Equal(l.synced) {
		return
	}
	if err == nil {
		err = l.f.Sync()
	}
	if err != nil {
		l.c.log.Debug("checkpointer: syncing the log failed", "err", err)
		l.close()
		return
	}
	l.synced = st.ModTime()
	l.c.flushes.Add(1)
}

func (l *logFlusher) close() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// checkpoint runs one passive checkpoint; a failure is logged and the next
// tick tries again.
func (c *Checkpointer) checkpoint(ctx context.Context) {
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("checkpointer: panic", "panic", v)
		}
	}()
	var busy, logPages, done int
	err := c.conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logPages, &done)
	if err != nil && ctx.Err() == nil {
		c.log.Warn("checkpointer: checkpoint failed", "err", err)
	}
}

// Stop ends the background checkpoints, gives the writer back SQLite's
// default threshold and checkpoints once more.
func (c *Checkpointer) Stop() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
	p := c.gdb.ConnPool.(*pool)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := setAutoCheckpoint(ctx, p.writer, defaultAutoPages); err != nil {
		c.log.Warn("checkpointer: cannot restore the writer's threshold", "err", err)
	}
	c.checkpoint(ctx)
	c.conn.Close()
	c.cancel = nil
}

// setAutoCheckpoint sets the log size, in pages, past which a commit on
// the writer checkpoints by itself.
func setAutoCheckpoint(ctx context.Context, writer *sql.DB, pages int) error {
	_, err := writer.ExecContext(ctx, fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", pages))
	return err
}
