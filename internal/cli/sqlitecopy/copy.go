// Package sqlitecopy moves a whole SQLite installation of appkb into an
// empty PostgreSQL database: every row of every table, and the uploaded and
// document files of the data directory, which on PostgreSQL live in the
// table blobs.
//
// How it works:
//
//   - The source is opened with db.Open, which brings its schema to the
//     version this binary ships (the only change it ever makes to the
//     source), and both databases must then report the same migration
//     version, so the two schemas are the same numbered history.
//   - All reads go through one read-only SQLite transaction, so the copy is
//     one consistent snapshot even if something writes meanwhile.
//   - The tables come from sqlite_master, not from a list in this package,
//     so a table added by a later migration is copied without a change
//     here. Full-text tables (FTS5 virtual tables and their shadow tables)
//     and schema_migrations are left out: PostgreSQL keeps its own search
//     columns and migration history. Tables are copied parents first, in
//     the order PostgreSQL's foreign keys require.
//   - Columns are matched by name; a column only one side has is left
//     alone (PostgreSQL's generated tsvector columns, for one). Values are
//     converted to the type of the target column as information_schema
//     reports it: SQLite's 0/1 become booleans, time text becomes
//     timestamptz, text stored in a blob column becomes bytea, and so on.
//   - Rows go in batches, one transaction per batch; serial columns
//     (segments.seq, child_chunks.seq) keep their values and their
//     sequences are moved past the largest one afterwards.
//   - Files under <data dir>/files and <data dir>/datasets go into blobs,
//     keyed by their path relative to the data directory with forward
//     slashes ("files/<id>", "datasets/<dataset>/<document>").
//   - At the end every table is counted on both sides (and files against
//     blobs); Report.Mismatches lists the differences.
//
// The target must be empty: Copy refuses a database that holds any row
// besides those its own migrations put there (the cache_versions counters).
package sqlitecopy

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	_ "github.com/mattn/go-sqlite3" // the source's driver
	"gorm.io/gorm"

	"appkb/db"
)

// Progress hears how far the copy is. Begin starts a step (a table, or the
// files), Advance reports the rows (or files) done so far in it, End closes
// it. Calls come from one goroutine.
type Progress interface {
	Begin(name string, total int64)
	Advance(done int64)
	End()
}

// Options tunes a copy; the zero value is fine.
type Options struct {
	// BatchRows is the most rows one insert transaction carries (default
	// 500; fewer when a table has many columns or large values).
	BatchRows int
	// Progress, when not nil, is told about every step.
	Progress Progress
}

// FilesStep names the files-to-blobs step in progress reports and counts.
const FilesStep = "files → blobs"

// Count compares one table (or the files) on both sides.
type Count struct {
	Name           string
	Source, Target int64
}

// Report is what a finished copy found.
type Report struct {
	// Tables are the copied tables in copy order; the last entry is
	// FilesStep (files on disk against rows in blobs).
	Tables []Count
	// SourceVersion is the migration version both databases are at.
	SourceVersion int
	// CreatedBlobs is set when the target had no blobs table and the copy
	// made one.
	CreatedBlobs bool
	// Skipped are source tables deliberately not copied (full-text index
	// tables); TargetOnly are target tables the source does not have.
	Skipped, TargetOnly []string
	// MissingFiles are files rows point at (upload_files.storage_key,
	// documents' original files) that are not in the data directory; the
	// installation lacked them before the copy.
	MissingFiles []string
}

// Mismatches returns the counts that differ.
func (r *Report) Mismatches() []Count {
	var out []Count
	for _, c := range r.Tables {
		if c.Source != c.Target {
			out = append(out, c)
		}
	}
	return out
}

// NotEmptyError is returned when the target already holds data.
type NotEmptyError struct {
	// Tables maps each non-empty table to its row count.
	Tables map[string]int64
}

func (e *NotEmptyError) Error() string {
	names := make([]string, 0, len(e.Tables))
	for _, name := range sortedKeys(e.Tables) {
		rows := "rows"
		if e.Tables[name] == 1 {
			rows = "row"
		}
		names = append(names, fmt.Sprintf("%s (%d %s)", name, e.Tables[name], rows))
	}
	return "the PostgreSQL database is not empty: " + strings.Join(names, ", ") +
		"; copy into a new database (createdb) so nothing is overwritten or mixed"
}

// seeded are target tables whose rows PostgreSQL writes itself: the
// counters its migrations insert (cache_versions), the keyword rebuilds
// they queue (keyword_rebuilds), and what its triggers write while the
// chunks are copied: the counters (chunk_text_versions) and the keyword
// index (segment_keywords). They may be non-empty before the copy, and
// copied rows replace theirs.
var seeded = map[string]bool{"cache_versions": true, "chunk_text_versions": true, "keyword_rebuilds": true, "segment_keywords": true}

// Copy copies the SQLite installation in dataDir into dst, which must be an
// empty PostgreSQL database at the same migration version. The source is
// only read (after db.Open has brought its schema up to date).
func Copy(ctx context.Context, dataDir string, dst *gorm.DB, opts Options) (*Report, error) {
	if !db.IsPostgres(dst) {
		return nil, errors.New("the target must be a PostgreSQL database")
	}
	if opts.BatchRows <= 0 {
		opts.BatchRows = 500
	}
	if opts.Progress == nil {
		opts.Progress = nopProgress{}
	}
	if err := CheckSource(dataDir); err != nil {
		return nil, err
	}
	src, err := db.Open(dataDir)
	if err != nil {
		return nil, fmt.Errorf("open the SQLite database in %s: %w", dataDir, err)
	}
	// Kept open for the whole copy: the snapshot connection below shares
	// its WAL index.
	defer db.Close(src)
	srcVersion, err := db.Version(src)
	if err != nil {
		return nil, fmt.Errorf("read the SQLite schema version: %w", err)
	}
	dstVersion, err := db.Version(dst)
	if err != nil {
		return nil, fmt.Errorf("read the PostgreSQL schema version: %w", err)
	}
	if srcVersion != dstVersion {
		return nil, fmt.Errorf("the SQLite database is at migration %d and the PostgreSQL one at %d; run the same appkb version on both", srcVersion, dstVersion)
	}

	snap, err := openSnapshot(ctx, dataDir)
	if err != nil {
		return nil, err
	}
	defer snap.close()
	target, err := dst.DB()
	if err != nil {
		return nil, err
	}

	plan, err := makePlan(ctx, snap.tx, target)
	if err != nil {
		return nil, err
	}
	rep := &Report{SourceVersion: srcVersion, Skipped: plan.skipped, TargetOnly: plan.targetOnly}
	if err := checkEmpty(ctx, target, plan); err != nil {
		return nil, err
	}

	// From here on a failure leaves part of the copy behind.
	partial := func(err error) error {
		return fmt.Errorf("%w (the PostgreSQL database now holds part of the copy: drop it and create it again before the next try)", err)
	}
	for _, t := range plan.tables {
		n, err := copyTable(ctx, snap.tx, target, t, opts)
		if err != nil {
			return nil, partial(fmt.Errorf("copy %s: %w", t.name, err))
		}
		rep.Tables = append(rep.Tables, Count{Name: t.name, Source: n})
	}
	for _, t := range plan.tables {
		if err := resetSequences(ctx, target, t); err != nil {
			return nil, partial(fmt.Errorf("reset the sequences of %s: %w", t.name, err))
		}
	}

	// The count check of the tables: source counts come from the snapshot,
	// target counts from a fresh look at PostgreSQL, before any file goes in.
	var blobRows int64
	for i, c := range rep.Tables {
		n, err := targetCount(ctx, snap.tx, target, plan.tables[i])
		if err != nil {
			return nil, fmt.Errorf("count %s in PostgreSQL: %w", c.Name, err)
		}
		rep.Tables[i].Target = n
		if c.Name == "blobs" {
			blobRows = c.Source
		}
	}

	created, err := ensureBlobs(ctx, target)
	if err != nil {
		return nil, err
	}
	rep.CreatedBlobs = created
	files, err := listFiles(dataDir)
	if err != nil {
		return nil, err
	}
	if err := copyFiles(ctx, target, dataDir, files, opts.Progress); err != nil {
		return nil, partial(err)
	}
	rep.MissingFiles, err = missingFiles(ctx, snap.tx, files)
	if err != nil {
		return nil, err
	}
	var blobs int64
	if err := target.QueryRowContext(ctx, `SELECT COUNT(*) FROM blobs`).Scan(&blobs); err != nil {
		return nil, fmt.Errorf("count blobs: %w", err)
	}
	// A blobs table the SQLite side may have was copied as a table above.
	rep.Tables = append(rep.Tables, Count{Name: FilesStep, Source: int64(len(files)) + blobRows, Target: blobs})
	return rep, nil
}

// targetCount counts the rows of t in the target. For a seeded table it
// counts only the rows the source has too, by primary key: a counter the
// PostgreSQL migrations seed and SQLite lacks is no mismatch.
func targetCount(ctx context.Context, src *sql.Tx, dst *sql.DB, t table) (int64, error) {
	var n int64
	if !seeded[t.name] || len(t.pk) != 1 {
		err := dst.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+quoteIdent(t.name)).Scan(&n)
		return n, err
	}
	rows, err := src.QueryContext(ctx, `SELECT CAST(`+quoteIdent(t.pk[0])+` AS TEXT) FROM `+quoteIdent(t.name))
	if err != nil {
		return 0, err
	}
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return 0, err
		}
		keys = append(keys, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	err = dst.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+quoteIdent(t.name)+` WHERE CAST(`+quoteIdent(t.pk[0])+` AS TEXT) = ANY($1)`, keys).Scan(&n)
	return n, err
}

// CheckSource refuses a directory without an appkb database, so that a
// mistyped path is not silently turned into a new, empty installation.
func CheckSource(dataDir string) error {
	st, err := os.Stat(dataDir)
	if err != nil {
		return fmt.Errorf("source data directory: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("source data directory %s is not a directory", dataDir)
	}
	if _, err := os.Stat(filepath.Join(dataDir, db.FileName)); err != nil {
		return fmt.Errorf("%s holds no appkb database (%s): give the --data-dir the SQLite server used", dataDir, db.FileName)
	}
	return nil
}

// snapshot is one read-only SQLite transaction that every read of the copy
// goes through.
type snapshot struct {
	db *sql.DB
	tx *sql.Tx
}

func openSnapshot(ctx context.Context, dataDir string) (*snapshot, error) {
	dsn := "file:" + filepath.Join(dataDir, db.FileName) + "?_busy_timeout=10000&_query_only=true"
	sdb, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("open the SQLite database: %w", err)
	}
	sdb.SetMaxOpenConns(1)
	tx, err := sdb.BeginTx(ctx, nil)
	if err != nil {
		sdb.Close()
		return nil, fmt.Errorf("start reading the SQLite database: %w", err)
	}
	return &snapshot{db: sdb, tx: tx}, nil
}

func (s *snapshot) close() {
	s.tx.Rollback()
	s.db.Close()
}

// checkEmpty fails with *NotEmptyError when a table the copy writes already
// has rows (the seeded ones aside).
func checkEmpty(ctx context.Context, target *sql.DB, p *plan) error {
	names := []string{"blobs"}
	for _, t := range p.tables {
		if !seeded[t.name] {
			names = append(names, t.name)
		}
	}
	full := map[string]int64{}
	for _, name := range names {
		var exists bool
		if err := target.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			continue
		}
		var n int64
		if err := target.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+quoteIdent(name)).Scan(&n); err != nil {
			return fmt.Errorf("count %s: %w", name, err)
		}
		if n > 0 {
			full[name] = n
		}
	}
	if len(full) > 0 {
		return &NotEmptyError{Tables: full}
	}
	return nil
}

type nopProgress struct{}

func (nopProgress) Begin(string, int64) {}
func (nopProgress) Advance(int64)       {}
func (nopProgress) End()                {}
