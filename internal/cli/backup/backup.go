// Package backup copies an appkb data directory into one tar.gz archive and
// back. The database is copied with SQLite's VACUUM INTO, which reads one
// consistent snapshot while the server keeps reading and writing, so a
// backup can be taken from a live server. Uploaded files are immutable once
// written and are copied as they are.
package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // the "sqlite3" database/sql driver

	"appkb/db"
)

// tmpPrefix marks the scratch directory a running backup keeps inside the
// data directory; backups skip such directories.
const tmpPrefix = ".backup-"

// Summary tells what an archive holds.
type Summary struct {
	Files int   // files besides the database
	Bytes int64 // uncompressed size of everything
}

// skipped reports data-directory entries that are not copied: the live
// database files (the snapshot replaces them) and scratch space.
func skipped(rel string) bool {
	base := filepath.Base(rel)
	switch base {
	case db.FileName, db.FileName + "-wal", db.FileName + "-shm", db.FileName + "-journal":
		return filepath.Dir(rel) == "."
	}
	return strings.HasPrefix(strings.Split(filepath.ToSlash(rel), "/")[0], tmpPrefix)
}

// Write writes an archive of dataDir to w.
func Write(ctx context.Context, dataDir string, w io.Writer) (*Summary, error) {
	if _, err := os.Stat(filepath.Join(dataDir, db.FileName)); err != nil {
		return nil, fmt.Errorf("no database in %s: %w", dataDir, err)
	}
	tmp, err := os.MkdirTemp(dataDir, tmpPrefix)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	snapshot := filepath.Join(tmp, db.FileName)
	if err := vacuumInto(ctx, filepath.Join(dataDir, db.FileName), snapshot); err != nil {
		return nil, err
	}

	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	sum := &Summary{}
	if err := addFile(tw, snapshot, db.FileName, sum); err != nil {
		return nil, err
	}
	err = filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dataDir, path)
		if err != nil || rel == "." {
			return err
		}
		if skipped(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		sum.Files++
		return addFile(tw, path, filepath.ToSlash(rel), sum)
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return sum, zw.Close()
}

// vacuumInto writes a consistent, compacted copy of the database at src to
// dst (which must not exist).
func vacuumInto(ctx context.Context, src, dst string) error {
	conn, err := sql.Open("sqlite3", "file:"+src+"?_busy_timeout=10000")
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return fmt.Errorf("copy the database: %w", err)
	}
	return nil
}

func addFile(tw *tar.Writer, path, name string, sum *Summary) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	// Every file of a data directory is its owner's alone, in the archive
	// too.
	hdr := &tar.Header{Name: name, Mode: 0o600, Size: st.Size(), ModTime: st.ModTime(), Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	sum.Bytes += n
	return err
}

// WriteFile writes the archive to path, through a temporary file renamed at
// the end, so that a failed backup never leaves a truncated archive behind.
func WriteFile(ctx context.Context, dataDir, path string) (*Summary, error) {
	removeStale(filepath.Dir(path), filepath.Base(path)+".tmp-")
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	sum, err := Write(ctx, dataDir, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return sum, os.Rename(f.Name(), path)
}

// Restore unpacks an archive made by Write into dataDir, which must be
// missing or empty. On failure it removes what it unpacked.
func Restore(r io.Reader, dataDir string) (sum *Summary, err error) {
	entries, err := os.ReadDir(dataDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case len(entries) > 0:
		return nil, fmt.Errorf("%s is not empty; restore into a new or empty directory", dataDir)
	}
	if err := db.PrivateDir(dataDir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			cleanDir(dataDir)
		}
	}()
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a gzip archive: %w", err)
	}
	tr := tar.NewReader(zr)
	sum = &Summary{}
	haveDB := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		if hdr.Typeflag == tar.TypeDir {
			continue
		}
		if hdr.Typeflag != tar.TypeReg || !filepath.IsLocal(filepath.FromSlash(hdr.Name)) {
			return nil, fmt.Errorf("archive entry %q is not a plain file inside the data directory", hdr.Name)
		}
		dst := filepath.Join(dataDir, filepath.FromSlash(hdr.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return nil, err
		}
		if hdr.Name == db.FileName {
			haveDB = true
		} else {
			sum.Files++
		}
		n, err := writeFile(dst, tr, 0o600, hdr.ModTime)
		sum.Bytes += n
		if err != nil {
			return nil, err
		}
	}
	if !haveDB {
		return nil, fmt.Errorf("the archive holds no %s: not an appkb backup", db.FileName)
	}
	if err := check(filepath.Join(dataDir, db.FileName)); err != nil {
		return nil, err
	}
	return sum, nil
}

func writeFile(path string, r io.Reader, mode os.FileMode, mtime time.Time) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		_ = os.Chtimes(path, mtime, mtime)
	}
	return n, err
}

// check runs SQLite's integrity check on a restored database.
func check(path string) error {
	conn, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		return err
	}
	defer conn.Close()
	var res string
	if err := conn.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil {
		return fmt.Errorf("restored database: %w", err)
	}
	if res != "ok" {
		return fmt.Errorf("restored database fails its integrity check: %s", res)
	}
	return nil
}

func cleanDir(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// staleAfter is how long scratch space of a backup may go untouched before
// it counts as left behind by a backup that was killed.
const staleAfter = 10 * time.Minute

// removeStale removes the entries of dir named prefix… that nothing has
// written to for staleAfter: what a killed backup left (a database copy in
// the data directory, a partial archive next to the archive).
func removeStale(dir, prefix string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		newest := time.Time{}
		_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
			if err == nil {
				if info, err := d.Info(); err == nil && info.ModTime().After(newest) {
					newest = info.ModTime()
				}
			}
			return nil
		})
		if time.Since(newest) > staleAfter {
			_ = os.RemoveAll(path)
		}
	}
}

// RemoveLeftovers removes the scratch directories killed backups left in
// dataDir; serve calls it at start.
func RemoveLeftovers(dataDir string) { removeStale(dataDir, tmpPrefix) }
