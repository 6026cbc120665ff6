package blobs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"appkb/db"
	"appkb/internal/platform/blobs"
)

// stores gives one of each store; the DB one runs on PostgreSQL when
// APPKB_TEST_DATABASE_URL is set and on SQLite otherwise.
func stores(t *testing.T) map[string]blobs.Store {
	return map[string]blobs.Store{
		"dir": blobs.NewDir(t.TempDir()),
		"db":  blobs.NewDB(db.OpenTemp(t)),
	}
}

func read(t *testing.T, s blobs.Store, key string) string {
	t.Helper()
	r, size, err := s.Open(context.Background(), key)
	if err != nil {
		t.Fatalf("open %s: %v", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != size {
		t.Fatalf("open %s: size %d, read %d bytes", key, size, len(b))
	}
	return string(b)
}

// failing yields some bytes and then an error.
type failing struct{ sent bool }

var errBroken = errors.New("connection reset")

func (f *failing) Read(p []byte) (int, error) {
	if f.sent {
		return 0, errBroken
	}
	f.sent = true
	return copy(p, "partial"), nil
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	steps := []struct {
		name string
		run  func(t *testing.T, s blobs.Store)
	}{
		{"put then open", func(t *testing.T, s blobs.Store) {
			n, err := s.Put(ctx, "files/a", strings.NewReader("hello"))
			if err != nil || n != 5 {
				t.Fatalf("put = %d, %v", n, err)
			}
			if got := read(t, s, "files/a"); got != "hello" {
				t.Fatalf("content = %q", got)
			}
			if size, err := s.Stat(ctx, "files/a"); err != nil || size != 5 {
				t.Fatalf("stat = %d, %v", size, err)
			}
		}},
		{"empty blob", func(t *testing.T, s blobs.Store) {
			if _, err := s.Put(ctx, "files/empty", strings.NewReader("")); err != nil {
				t.Fatal(err)
			}
			if got := read(t, s, "files/empty"); got != "" {
				t.Fatalf("content = %q", got)
			}
		}},
		{"overwrite", func(t *testing.T, s blobs.Store) {
			for _, text := range []string{"first version", "second"} {
				if _, err := s.Put(ctx, "datasets/d/doc", strings.NewReader(text)); err != nil {
					t.Fatal(err)
				}
			}
			if got := read(t, s, "datasets/d/doc"); got != "second" {
				t.Fatalf("content = %q", got)
			}
		}},
		{"a failed read keeps the old content", func(t *testing.T, s blobs.Store) {
			if _, err := s.Put(ctx, "files/kept", strings.NewReader("old")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Put(ctx, "files/kept", &failing{}); !errors.Is(err, errBroken) {
				t.Fatalf("put from a broken reader: err = %v", err)
			}
			if got := read(t, s, "files/kept"); got != "old" {
				t.Fatalf("content = %q", got)
			}
			if _, err := s.Put(ctx, "files/never", &failing{}); err == nil {
				t.Fatal("want an error")
			}
			if _, err := s.Stat(ctx, "files/never"); !errors.Is(err, blobs.ErrNotFound) {
				t.Fatalf("stat after a failed put: err = %v", err)
			}
		}},
		{"missing key", func(t *testing.T, s blobs.Store) {
			if _, _, err := s.Open(ctx, "files/none"); !errors.Is(err, blobs.ErrNotFound) || !strings.Contains(err.Error(), "files/none") {
				t.Fatalf("open: err = %v, want not found naming the key", err)
			}
			if _, err := s.Stat(ctx, "files/none"); !errors.Is(err, blobs.ErrNotFound) {
				t.Fatalf("stat: err = %v", err)
			}
			if err := s.Delete(ctx, "files/none"); err != nil {
				t.Fatalf("delete: err = %v", err)
			}
		}},
		{"a folder is not a blob", func(t *testing.T, s blobs.Store) {
			if _, err := s.Put(ctx, "datasets/f/doc", strings.NewReader("x")); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Open(ctx, "datasets/f"); !errors.Is(err, blobs.ErrNotFound) {
				t.Fatalf("open: err = %v", err)
			}
		}},
		{"delete", func(t *testing.T, s blobs.Store) {
			if _, err := s.Put(ctx, "files/gone", strings.NewReader("x")); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, "files/gone"); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Open(ctx, "files/gone"); !errors.Is(err, blobs.ErrNotFound) {
				t.Fatalf("open after delete: err = %v", err)
			}
		}},
		{"delete under a prefix", func(t *testing.T, s blobs.Store) {
			for _, k := range []string{"datasets/a_1/x", "datasets/a_1/y", "datasets/a_12/z", "datasets/ab1/x", "datasets/b/x"} {
				if _, err := s.Put(ctx, k, strings.NewReader(k)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.DeleteUnder(ctx, "datasets/a_1"); err != nil {
				t.Fatal(err)
			}
			for k, want := range map[string]bool{"datasets/a_1/x": false, "datasets/a_1/y": false,
				"datasets/a_12/z": true, "datasets/ab1/x": true, "datasets/b/x": true} {
				_, err := s.Stat(ctx, k)
				if got := err == nil; got != want {
					t.Errorf("%s kept = %v, want %v (err %v)", k, got, want, err)
				}
			}
			if err := s.DeleteUnder(ctx, "datasets/none"); err != nil {
				t.Fatalf("delete under nothing: %v", err)
			}
		}},
		{"readers seek", func(t *testing.T, s blobs.Store) {
			if _, err := s.Put(ctx, "files/seek", strings.NewReader("0123456789")); err != nil {
				t.Fatal(err)
			}
			r, _, err := s.Open(ctx, "files/seek")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			rs, ok := r.(io.ReadSeeker)
			if !ok {
				t.Fatalf("%T does not seek", r)
			}
			if _, err := rs.Seek(6, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			if b, _ := io.ReadAll(rs); string(b) != "6789" {
				t.Fatalf("after seek: %q", b)
			}
		}},
		{"bad keys", func(t *testing.T, s blobs.Store) {
			for _, k := range []string{"", "/etc/passwd", "../x", "files/../x", "files//x", "files/.upload-1", `files\x`, "files/", "a\x00b"} {
				if _, err := s.Put(ctx, k, strings.NewReader("x")); !errors.Is(err, blobs.ErrBadKey) {
					t.Errorf("put %q: err = %v", k, err)
				}
				if _, _, err := s.Open(ctx, k); !errors.Is(err, blobs.ErrBadKey) {
					t.Errorf("open %q: err = %v", k, err)
				}
				if err := s.Delete(ctx, k); !errors.Is(err, blobs.ErrBadKey) {
					t.Errorf("delete %q: err = %v", k, err)
				}
			}
		}},
		{"put a file", func(t *testing.T, s blobs.Store) {
			src := filepath.Join(t.TempDir(), "upload")
			if err := os.WriteFile(src, []byte("moved bytes"), 0o600); err != nil {
				t.Fatal(err)
			}
			n, err := blobs.PutFile(ctx, s, "files/moved", src)
			if err != nil || n != 11 {
				t.Fatalf("put file = %d, %v", n, err)
			}
			if _, err := os.Stat(src); !os.IsNotExist(err) {
				t.Fatalf("source still there: %v", err)
			}
			if got := read(t, s, "files/moved"); got != "moved bytes" {
				t.Fatalf("content = %q", got)
			}
		}},
	}
	for name, s := range stores(t) {
		for _, step := range steps {
			t.Run(name+"/"+step.name, func(t *testing.T) { step.run(t, s) })
		}
	}
}

func TestDirLayout(t *testing.T) {
	root := t.TempDir()
	s := blobs.NewDir(root)
	if _, err := s.Put(context.Background(), "datasets/d1/doc1", strings.NewReader("text")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "datasets", "d1", "doc1"))
	if err != nil || string(b) != "text" {
		t.Fatalf("file = %q, %v", b, err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "datasets", "d1"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("directory holds %v (%v), want only the blob", entries, err)
	}
}

func TestDBMaxSize(t *testing.T) {
	ctx := context.Background()
	s := blobs.NewDB(db.OpenTemp(t))
	s.MaxSize = 8
	tests := []struct {
		name    string
		content string
		wantErr error
	}{
		{"at the limit", "12345678", nil},
		{"over the limit", "123456789", blobs.ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := "files/" + strings.ReplaceAll(tc.name, " ", "-")
			_, err := s.Put(ctx, key, bytes.NewReader([]byte(tc.content)))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			_, err = s.Stat(ctx, key)
			if stored := err == nil; stored != (tc.wantErr == nil) {
				t.Fatalf("stored = %v", stored)
			}
		})
	}
}

func TestFor(t *testing.T) {
	gdb := db.OpenTemp(t)
	s := blobs.For(gdb, t.TempDir())
	_, isDB := s.(*blobs.DB)
	if want := db.IsPostgres(gdb); isDB != want {
		t.Fatalf("For gave %T on %s", s, db.DialectOf(gdb))
	}
}
