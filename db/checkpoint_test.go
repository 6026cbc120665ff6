package db

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCheckpointerMovesTheLog writes more than SQLite's default threshold
// while a Checkpointer runs: the writer no longer checkpoints by itself
// (its threshold is raised), yet the pages reach the database file,
// copied by the checkpointer; after Stop the writer's threshold is the
// default again. Meanwhile the log file is synced in the background after
// writes, never while nothing is written, and not at all once Stop returns.
func TestCheckpointerMovesTheLog(t *testing.T) {
	dir := t.TempDir()
	gdb, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(gdb)
	c := NewCheckpointer(gdb, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.interval = 10 * time.Millisecond
	c.flushInterval = 5 * time.Millisecond
	ctx := context.Background()
	writer := gdb.ConnPool.(*pool).writer
	threshold := func() int {
		t.Helper()
		var n int
		if err := writer.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	fileSize := func() int64 {
		t.Helper()
		st, err := os.Stat(filepath.Join(dir, FileName))
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}

	c.Start(ctx)
	if got := threshold(); got != backstopPages {
		t.Fatalf("writer threshold %d while running, want %d", got, backstopPages)
	}
	if err := gdb.Exec(`CREATE TABLE ckpt_probe (n INTEGER PRIMARY KEY, body TEXT)`).Error; err != nil {
		t.Fatal(err)
	}
	// The table's creation is synced once; an idle log is left alone.
	for deadline := time.Now().Add(5 * time.Second); c.flushes.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the log file was never synced after a write")
		}
	}
	idle := c.flushes.Load()
	time.Sleep(6 * c.flushInterval)
	if got := c.flushes.Load(); got != idle {
		t.Errorf("the log file was synced %d times while nothing was written", got-idle)
	}
	before := fileSize()
	const rows, size = 3000, 4000 // about 3,000 pages: past 1,000, short of the backstop
	body := strings.Repeat("x", size)
	for i := range rows {
		if err := gdb.Exec(`INSERT INTO ckpt_probe (n, body) VALUES (?, ?)`, i, body).Error; err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for fileSize() < before+rows*size {
		if time.Now().After(deadline) {
			t.Fatalf("database file %d bytes after writing %d: the log was not checkpointed", fileSize(), rows*size)
		}
		time.Sleep(10 * time.Millisecond)
	}

	if c.flushes.Load() == idle {
		t.Error("the log file was never synced while rows were written")
	}

	c.Stop()
	if got := threshold(); got != defaultAutoPages {
		t.Errorf("writer threshold %d after Stop, want %d", got, defaultAutoPages)
	}
	flushed := c.flushes.Load()
	time.Sleep(4 * c.flushInterval)
	if got := c.flushes.Load(); got != flushed {
		t.Errorf("the log file was synced %d times after Stop", got-flushed)
	}
}
