package documents

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	appdb "appkb/db"
	"appkb/internal/platform/blobs"
)

func TestOpenArchive(t *testing.T) {
	ctx := context.Background()
	for name, st := range map[string]blobs.Store{"dir": blobs.NewDir(t.TempDir()), "db": blobs.NewDB(appdb.OpenTemp(t))} {
		t.Run(name, func(t *testing.T) { testOpenArchive(t, ctx, st) })
	}
}

func testOpenArchive(t *testing.T, ctx context.Context, st blobs.Store) {
	for key, text := range map[string]string{"datasets/d/a": "first", "datasets/d/b": "second"} {
		if _, err := st.Put(ctx, key, strings.NewReader(text)); err != nil {
			t.Fatal(err)
		}
	}
	file := func(key, name string) StoredFile { return StoredFile{Key: key, Name: name, store: st} }
	a, b := "datasets/d/a", "datasets/d/b"
	tests := []struct {
		name    string
		files   []StoredFile
		want    map[string]string
		wantErr bool
	}{
		{"two files", []StoredFile{file(a, "notes.txt"), file(b, "plan.md")},
			map[string]string{"notes.txt": "first", "plan.md": "second"}, false},
		{"a name used twice", []StoredFile{file(a, "notes.txt"), file(b, "notes.txt")},
			map[string]string{"notes.txt": "first", "notes (1).txt": "second"}, false},
		{"a missing file", []StoredFile{file("datasets/d/gone", "x")}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := OpenArchive(context.Background(), tc.files, nil)
			if tc.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, f := range zr.File {
				rc, err := f.Open()
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(rc)
				rc.Close()
				got[f.Name] = string(b)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// TestOpenArchiveCancelled checks that the writer ends with the request:
// reading after the context ended fails with its error.
func TestOpenArchiveCancelled(t *testing.T) {
	st := blobs.NewDir(t.TempDir())
	if _, err := st.Put(context.Background(), "datasets/d/big", bytes.NewReader(bytes.Repeat([]byte("x"), 1<<20))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, err := OpenArchive(ctx, []StoredFile{{Key: "datasets/d/big", Name: "big", store: st}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.ReadAll(r); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v", err)
	}
}

func TestLinkSigner(t *testing.T) {
	l, err := NewLinkSigner()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	u := l.URL("/files/datasets/", "ds", "doc", now.Add(time.Hour))
	if want := "/files/datasets/ds/documents/doc?expires=1003600&sign="; len(u) < len(want) || u[:len(want)] != want {
		t.Fatalf("url %s", u)
	}
	sign := u[len("/files/datasets/ds/documents/doc?expires=1003600&sign="):]
	tests := []struct {
		name         string
		doc, expires string
		sign         string
		at           time.Time
		want         bool
	}{
		{"the signed link", "doc", "1003600", sign, now, true},
		{"expired", "doc", "1003600", sign, now.Add(2 * time.Hour), false},
		{"another document", "other", "1003600", sign, now, false},
		{"a longer life", "doc", "1999999", sign, now, false},
		{"not a number", "doc", "soon", sign, now, false},
	}
	for _, tc := range tests {
		if got := l.Valid("ds", tc.doc, tc.expires, tc.sign, tc.at); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
