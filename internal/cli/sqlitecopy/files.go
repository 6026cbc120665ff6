package sqlitecopy

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// fileDirs are the directories under the data directory whose files move
// into blobs: uploads, and the original files of documents.
var fileDirs = []string{"files", "datasets"}

// BlobsSchema is the table PostgreSQL installations keep file bytes in,
// keyed by the path the file had under a SQLite data directory.
const BlobsSchema = `CREATE TABLE IF NOT EXISTS blobs (
    key        TEXT PRIMARY KEY,
    size       BIGINT NOT NULL,
    data       BYTEA NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
)`

// maxFileBatchBytes caps the bytes one blobs transaction carries.
const maxFileBatchBytes = 32 << 20

type fileEntry struct {
	key, path string
	modTime   time.Time
}

// listFiles finds the files to copy, sorted by key. Names starting with a
// dot are uploads still being written (".upload-*") and are left out.
func listFiles(dataDir string) ([]fileEntry, error) {
	var out []fileEntry
	for _, dir := range fileDirs {
		root := filepath.Join(dataDir, dir)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) && path == root {
					return filepath.SkipDir
				}
				return err
			}
			if strings.HasPrefix(d.Name(), ".") && path != root {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(dataDir, path)
			if err != nil {
				return err
			}
			out = append(out, fileEntry{key: filepath.ToSlash(rel), path: path, modTime: info.ModTime().UTC()})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", root, err)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

// ensureBlobs creates the blobs table when the target's migrations have
// not, and reports whether it did.
func ensureBlobs(ctx context.Context, dst *sql.DB) (bool, error) {
	var exists bool
	if err := dst.QueryRowContext(ctx, `SELECT to_regclass('blobs') IS NOT NULL`).Scan(&exists); err != nil {
		return false, err
	}
	if exists {
		return false, nil
	}
	if _, err := dst.ExecContext(ctx, BlobsSchema); err != nil {
		return false, fmt.Errorf("create table blobs: %w", err)
	}
	return true, nil
}

// copyFiles stores every file in blobs, a transaction per batch of at most
// maxFileBatchBytes (or one file, when it is larger).
func copyFiles(ctx context.Context, dst *sql.DB, dataDir string, files []fileEntry, p Progress) error {
	p.Begin(FilesStep, int64(len(files)))
	defer p.End()
	var tx *sql.Tx
	batchBytes := 0
	commit := func() error {
		if tx == nil {
			return nil
		}
		err := tx.Commit()
		tx, batchBytes = nil, 0
		return err
	}
	for i, f := range files {
		data, err := os.ReadFile(f.path)
		if err != nil {
			if tx != nil {
				tx.Rollback()
			}
			return fmt.Errorf("read %s: %w", f.path, err)
		}
		if tx != nil && batchBytes+len(data) > maxFileBatchBytes {
			if err := commit(); err != nil {
				return fmt.Errorf("store files: %w", err)
			}
			p.Advance(int64(i))
		}
		if tx == nil {
			if tx, err = dst.BeginTx(ctx, nil); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO blobs (key, size, data, created_at) VALUES ($1, $2, $3, $4)`,
			f.key, int64(len(data)), data, f.modTime); err != nil {
			tx.Rollback()
			return fmt.Errorf("store %s: %w", f.key, err)
		}
		batchBytes += len(data)
	}
	if err := commit(); err != nil {
		return fmt.Errorf("store files: %w", err)
	}
	p.Advance(int64(len(files)))
	return nil
}

// missingFiles lists the files rows of the snapshot point at that are not
// among files.
func missingFiles(ctx context.Context, src *sql.Tx, files []fileEntry) ([]string, error) {
	have := make(map[string]bool, len(files))
	for _, f := range files {
		have[f.key] = true
	}
	var missing []string
	for _, q := range []string{
		`SELECT storage_key FROM upload_files ORDER BY storage_key`,
		`SELECT 'datasets/' || dataset_id || '/' || id FROM documents ORDER BY dataset_id, id`,
	} {
		rows, err := src.QueryContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("list referenced files: %w", err)
		}
		for rows.Next() {
			var key string
			if err := rows.Scan(&key); err != nil {
				rows.Close()
				return nil, err
			}
			if !have[key] {
				missing = append(missing, key)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return missing, nil
}
