package blobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Dir is a store in a directory: the blob of key k is the file <Root>/k.
type Dir struct {
	root string
}

// NewDir returns a store over the directory root (created when needed).
func NewDir(root string) *Dir { return &Dir{root: root} }

// path is where key's bytes are.
func (d *Dir) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	if d.root == "" {
		return "", errors.New("blobs: no data directory configured")
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// Put writes r to a temporary file beside key's file and renames it into
// place.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	final, err := d.path(key)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o750); err != nil {
		return 0, fmt.Errorf("blobs: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(final), ".blob-*")
	if err != nil {
		return 0, fmt.Errorf("blobs: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	n, err := io.Copy(tmp, ctxReader{ctx, r})
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("blobs: write %s: %w", key, cerr)
	}
	if err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return 0, fmt.Errorf("blobs: %w", err)
	}
	return n, nil
}

// moveIn renames the file at path to key's file; across file systems it
// copies instead.
func (d *Dir) moveIn(ctx context.Context, key, path string) (int64, error) {
	final, err := d.path(key)
	if err != nil {
		os.Remove(path)
		return 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("blobs: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o750); err != nil {
		os.Remove(path)
		return 0, fmt.Errorf("blobs: %w", err)
	}
	if err := os.Rename(path, final); err != nil {
		return putCopy(ctx, d, key, path)
	}
	return st.Size(), nil
}

// putCopy puts the content of the file at path and removes the file.
func putCopy(ctx context.Context, s Store, key, path string) (int64, error) {
	defer os.Remove(path)
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("blobs: %w", err)
	}
	defer f.Close()
	return s.Put(ctx, key, f)
}

// Open opens key's file.
func (d *Dir) Open(_ context.Context, key string) (io.ReadCloser, int64, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, notFound(key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("blobs: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("blobs: %w", err)
	}
	if st.IsDir() {
		f.Close()
		return nil, 0, notFound(key)
	}
	return f, st.Size(), nil
}

// Stat returns the size of key's file.
func (d *Dir) Stat(_ context.Context, key string) (int64, error) {
	p, err := d.path(key)
	if err != nil {
		return 0, err
	}
	st, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) || (err == nil && st.IsDir()) {
		return 0, notFound(key)
	}
	if err != nil {
		return 0, fmt.Errorf("blobs: %w", err)
	}
	return st.Size(), nil
}

// Delete removes key's file.
func (d *Dir) Delete(_ context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("blobs: %w", err)
	}
	return nil
}

// DeleteUnder removes the directory <Root>/prefix with everything in it.
func (d *Dir) DeleteUnder(_ context.Context, prefix string) error {
	p, err := d.path(prefix)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("blobs: %w", err)
	}
	return nil
}

// ctxReader stops a copy once ctx has ended.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
