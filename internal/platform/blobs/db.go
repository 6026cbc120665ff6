package blobs

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gorm.io/gorm"

	appdb "appkb/db"
)

// DefaultMaxSize is the largest blob a DB store takes unless told
// otherwise: above the largest upload limit appkb ships (100 MB for video)
// and well under PostgreSQL's 1 GB limit for one value.
const DefaultMaxSize = 256 << 20

// DB is a store in the table blobs of a database.
type DB struct {
	db *gorm.DB
	// MaxSize bounds the blobs Put takes, in bytes; Put reads at most one
	// byte more than this into memory.
	MaxSize int64
}

// NewDB returns a store over the blobs table of gdb.
func NewDB(gdb *gorm.DB) *DB { return &DB{db: gdb, MaxSize: DefaultMaxSize} }

// Put reads r whole (up to MaxSize) and then writes one row; no statement
// runs while r is being read.
func (s *DB) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := CheckKey(key); err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	if f, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok {
		if st, err := f.Stat(); err == nil && st.Size() >= 0 && st.Size() <= s.MaxSize {
			buf.Grow(int(st.Size()) + bytes.MinRead)
		}
	}
	n, err := buf.ReadFrom(io.LimitReader(ctxReader{ctx, r}, s.MaxSize+1))
	if err != nil {
		return 0, err
	}
	if n > s.MaxSize {
		return 0, fmt.Errorf("blob %q: %w (over %d bytes)", key, ErrTooLarge, s.MaxSize)
	}
	data := buf.Bytes()
	if data == nil {
		data = []byte{} // a nil slice would be NULL
	}
	err = s.db.WithContext(ctx).Exec(`INSERT INTO blobs (key, size, data, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET size = excluded.size, data = excluded.data, created_at = excluded.created_at`,
		key, n, data, time.Now().UTC()).Error
	if err != nil {
		return 0, fmt.Errorf("blobs: store %s: %w", key, err)
	}
	return n, nil
}

// Open reads the row of key whole and returns a reader over its bytes.
func (s *DB) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	if err := CheckKey(key); err != nil {
		return nil, 0, err
	}
	var data []byte
	err := s.db.WithContext(ctx).Raw(`SELECT data FROM blobs WHERE key = ?`, key).Row().Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, notFound(key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("blobs: read %s: %w", key, err)
	}
	return memBlob{bytes.NewReader(data)}, int64(len(data)), nil
}

// Stat reads the size column of key's row.
func (s *DB) Stat(ctx context.Context, key string) (int64, error) {
	if err := CheckKey(key); err != nil {
		return 0, err
	}
	var size int64
	err := s.db.WithContext(ctx).Raw(`SELECT size FROM blobs WHERE key = ?`, key).Row().Scan(&size)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, notFound(key)
	}
	if err != nil {
		return 0, fmt.Errorf("blobs: stat %s: %w", key, err)
	}
	return size, nil
}

// Delete removes key's row.
func (s *DB) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := s.db.WithContext(ctx).Exec(`DELETE FROM blobs WHERE key = ?`, key).Error; err != nil {
		return fmt.Errorf("blobs: delete %s: %w", key, err)
	}
	return nil
}

// DeleteUnder removes the rows whose keys begin with prefix + "/".
func (s *DB) DeleteUnder(ctx context.Context, prefix string) error {
	if err := CheckKey(prefix); err != nil {
		return err
	}
	err := s.db.WithContext(ctx).Exec(`DELETE FROM blobs WHERE key LIKE ? ESCAPE '\'`, appdb.EscapeLike(prefix+"/")+"%").Error
	if err != nil {
		return fmt.Errorf("blobs: delete under %s: %w", prefix, err)
	}
	return nil
}

// memBlob is a blob read into memory; it seeks like a file.
type memBlob struct{ *bytes.Reader }

func (memBlob) Close() error { return nil }
