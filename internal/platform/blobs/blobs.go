// Package blobs keeps the bytes appkb stores for clients: uploaded files and
// the original files of knowledge-base documents. Rows in the database say
// what a file is; a blob store holds what it contains.
//
// # Keys
//
// A blob is named by a key, a relative path of slash-separated segments.
// Keys are the paths the bytes have always had under the data directory:
//
//	files/<upload id>                    an uploaded file; the key is upload_files.storage_key
//	datasets/<dataset id>/<document id>  the original file of a knowledge document
//
// A segment may not be empty, "." or "..", may not begin with a dot (the
// directory store keeps its temporary files under such names) and may not
// contain a backslash or a NUL. Since a key is the file's path relative to
// the data directory, copying an installation from one store to the other
// maps every file to one key and back.
//
// # Stores
//
// Dir keeps each blob at <data dir>/<key>, written through a temporary file
// in the same directory and renamed into place, so a reader sees either the
// old bytes or the new ones. It is the store of SQLite installations, whose
// backups (appkb backup/restore) archive the data directory as it is.
//
// DB keeps each blob as a row of the table blobs (key, size, data,
// created_at). PostgreSQL installations use it, so that several appkb
// processes on different machines, each with a data directory of its own,
// read the same bytes. A DB store reads a blob whole into memory on Put
// and on Open, so it refuses blobs over its MaxSize; the files appkb keeps
// are bounded by the upload limits (tens of MB).
//
// For picks the store that fits a database.
package blobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"gorm.io/gorm"

	appdb "appkb/db"
)

// ErrNotFound is the error (wrapped with the key) of operations on a key
// that holds no blob.
var ErrNotFound = errors.New("blob not found")

// ErrTooLarge is the error of a Put whose content passes the store's limit.
var ErrTooLarge = errors.New("blob too large")

// ErrBadKey is the error of operations on a key outside the scheme in the
// package documentation.
var ErrBadKey = errors.New("bad blob key")

// Store keeps blobs by key. Every method is safe for concurrent use.
type Store interface {
	// Put stores everything r yields under key, replacing what was there,
	// and returns the number of bytes stored. When reading r fails, the
	// error is returned as it is and the key keeps its old content.
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	// Open returns the content of key for reading and its size; the caller
	// closes it. The reader of both stores here also implements io.Seeker.
	Open(ctx context.Context, key string) (io.ReadCloser, int64, error)
	// Stat returns the size of key's content.
	Stat(ctx context.Context, key string) (int64, error)
	// Delete removes key; a key that holds nothing is not an error.
	Delete(ctx context.Context, key string) error
	// DeleteUnder removes every blob whose key begins with prefix + "/".
	DeleteUnder(ctx context.Context, prefix string) error
}

// For returns the store an installation on gdb uses: the blobs table of a
// PostgreSQL database, or the data directory dataDir otherwise.
func For(gdb *gorm.DB, dataDir string) Store {
	if appdb.IsPostgres(gdb) {
		return NewDB(gdb)
	}
	return NewDir(dataDir)
}

// PutFile stores the file at path under key and removes the file, whether
// or not the store took it. A Dir store moves the file into place when it
// can, without copying it.
func PutFile(ctx context.Context, s Store, key, path string) (int64, error) {
	if d, ok := s.(*Dir); ok {
		return d.moveIn(ctx, key, path)
	}
	return putCopy(ctx, s, key, path)
}

// CheckKey reports whether key follows the scheme in the package
// documentation; the error wraps ErrBadKey.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrBadKey)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg[0] == '.' || strings.ContainsAny(seg, "\\\x00") {
			return fmt.Errorf("%w: %q", ErrBadKey, key)
		}
	}
	return nil
}

func notFound(key string) error { return fmt.Errorf("blob %q: %w", key, ErrNotFound) }
