package documents

import (
	"archive/zip"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
)

// OpenArchive returns the ZIP archive of files as a stream. Every file is
// checked before the stream begins, so a missing file is an error of this
// call rather than a broken archive. The archive is written by a goroutine
// that ends when the whole archive was read, when the reader is closed, or
// when ctx ends (the reader then fails with ctx's error). Names used twice
// get " (n)" before their extension.
func OpenArchive(ctx context.Context, files []StoredFile, log *slog.Logger) (io.ReadCloser, error) {
	for _, f := range files {
		if _, err := f.store.Stat(ctx, f.Key); err != nil {
			return nil, fmt.Errorf("archive: %w", err)
		}
	}
	if log == nil {
		log = slog.Default()
	}
	pr, pw := io.Pipe()
	stop := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	go func() {
		defer stop()
		defer func() {
			if p := recover(); p != nil {
				log.Error("archive: writer panicked", "panic", p)
				pw.CloseWithError(fmt.Errorf("archive writer panicked: %v", p))
			}
		}()
		pw.CloseWithError(writeArchive(ctx, ctxWriter{ctx, pw}, files))
	}()
	return ctxReader{ctx, pr}, nil
}

// ctxReader fails every read once ctx has ended, even when the writer had
// already handed over the rest of the archive: the pipe's own close comes
// from another goroutine and may lose that race.
type ctxReader struct {
	ctx context.Context
	r   *io.PipeReader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func (c ctxReader) Close() error { return c.r.Close() }

// ctxWriter fails every write once ctx has ended.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// writeArchive writes files as one ZIP archive to w.
func writeArchive(ctx context.Context, w io.Writer, files []StoredFile) error {
	zw := zip.NewWriter(w)
	used := map[string]int{}
	for _, f := range files {
		name := f.Name
		if n := used[name]; n > 0 {
			ext := path.Ext(name)
			name = fmt.Sprintf("%s (%d)%s", strings.TrimSuffix(name, ext), n, ext)
		}
		used[f.Name]++
		if err := addFile(ctx, zw, name, &f); err != nil {
			return err
		}
	}
	return zw.Close()
}

func addFile(ctx context.Context, zw *zip.Writer, name string, f *StoredFile) error {
	in, _, err := f.Open(ctx)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := zw.Create(name)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return err
}

// LinkSigner signs and checks the download links of document files. Its
// key is random and lives in memory, so links do not survive a restart.
type LinkSigner struct {
	key []byte
}

// NewLinkSigner makes a signer with a fresh random key.
func NewLinkSigner() (*LinkSigner, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("download link key: %w", err)
	}
	return &LinkSigner{key: k}, nil
}

func (l *LinkSigner) signature(datasetID, documentID string, expires int64) string {
	m := hmac.New(sha256.New, l.key)
	fmt.Fprintf(m, "%s/%s/%d", datasetID, documentID, expires)
	return hex.EncodeToString(m.Sum(nil))
}

// URL is the signed link under prefix to a document's file, valid until.
func (l *LinkSigner) URL(prefix, datasetID, documentID string, until time.Time) string {
	exp := until.Unix()
	q := url.Values{"expires": {strconv.FormatInt(exp, 10)}, "sign": {l.signature(datasetID, documentID, exp)}}
	return prefix + url.PathEscape(datasetID) + "/documents/" + url.PathEscape(documentID) + "?" + q.Encode()
}

// Valid reports whether sign is the signature of a link to the document
// that expires at the Unix time expires, and that time has not passed.
func (l *LinkSigner) Valid(datasetID, documentID, expires, sign string, now time.Time) bool {
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || now.Unix() > exp {
		return false
	}
	return hmac.Equal([]byte(sign), []byte(l.signature(datasetID, documentID, exp)))
}
