package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"appkb/internal/apps"
	"appkb/internal/conversation/endusers"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/blobs"
	"appkb/models"
)

// DefaultUser is the end user that owns uploads made without a `user`.
const DefaultUser = "DEFAULT-USER"

// MaxNameLength bounds stored file names (in characters); longer names are
// shortened, keeping their extension.
const MaxNameLength = 200

// dirName is the first segment of the blob keys of uploads, and the
// directory under the data directory where uploads are staged.
const dirName = "files"

// Store keeps uploaded files: a row in upload_files and the bytes in a
// blob store under the key files/<id> (upload_files.storage_key).
type Store struct {
	db      *gorm.DB
	dataDir string
	blobs   blobs.Store
	// Limits are the size limits per kind of file (in MB), used when
	// resolving message files; apps.DefaultSystemParameters unless changed.
	Limits apps.SystemParameters
	// Remote fetches remote_url files. The zero Guard refuses every private
	// and local address.
	Remote Guard
	// apps reads the file settings of the app a message is sent to.
	apps *apps.Store
}

// NewStore returns a store over db. The bytes go where blobs.For puts them:
// under dataDir with SQLite, in the database with PostgreSQL. Uploads are
// staged under dataDir either way.
func NewStore(db *gorm.DB, dataDir string) *Store {
	return &Store{db: db, dataDir: dataDir, blobs: blobs.For(db, dataDir), Limits: apps.DefaultSystemParameters,
		apps: apps.NewStore(db)}
}

// Staged is a file whose bytes are written and checked but which belongs
// to nobody yet. Commit it to keep it, or Discard it.
type Staged struct {
	store     *Store
	ID        string
	Name      string
	Extension string
	MimeType  string
	Size      int64
	// Hash is the hex SHA-256 of the bytes.
	Hash string
	tmp  string
}

// Stage checks a file against the rules and writes its bytes to a
// temporary file under the data directory, counting and hashing them on the
// way; nothing is written to the blob store before Commit. name is the client's file name (used for display and the extension
// only), mimeType the type the client declared.
func (s *Store) Stage(rules Rules, name, mimeType string, content io.Reader) (*Staged, error) {
	name, err := cleanName(name)
	if err != nil {
		return nil, err
	}
	ext := Extension(name)
	mimeType, err = cleanMimeType(mimeType, ext)
	if err != nil {
		return nil, err
	}
	if !rules.Allows(ext) {
		return nil, apperr.Fail(CodeExtensionBlocked,
			"Files of type %q are blocked for security reasons.", displayExt(ext))
	}
	limit := rules.SizeLimit(ext)

	dir, err := s.dir()
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return nil, apperr.Internal(fmt.Errorf("create upload file: %w", err))
	}
	keep := false
	defer func() {
		if !keep {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(content, limit+1))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, apperr.Fail(apperr.CodeTooLarge, "The request body is too large.")
		}
		var ae *apperr.Error
		if errors.As(err, &ae) {
			return nil, ae
		}
		return nil, apperr.FailWith(err, apperr.CodeInvalidParam, "The file could not be read.")
	}
	if n > limit {
		return nil, apperr.Fail(apperr.CodeFileTooLarge,
			"The file is larger than %d MB, the limit for %s files.", limit>>20, KindOf(ext))
	}
	if err := tmp.Close(); err != nil {
		return nil, apperr.Internal(fmt.Errorf("write upload file: %w", err))
	}
	keep = true
	return &Staged{
		store:     s,
		ID:        uuid.NewString(),
		Name:      name,
		Extension: ext,
		MimeType:  mimeType,
		Size:      n,
		Hash:      hex.EncodeToString(h.Sum(nil)),
		tmp:       tmp.Name(),
	}, nil
}

// Commit moves the bytes to their final place and records the file as
// uploaded by endUserID of appID.
func (f *Staged) Commit(ctx context.Context, appID, endUserID string) (*models.UploadFile, error) {
	return f.commit(ctx, &appID, nilIfEmpty(endUserID))
}

// CommitUnowned is Commit for a file that belongs to no app, such as one
// uploaded with a knowledge key for a pipeline run.
func (f *Staged) CommitUnowned(ctx context.Context) (*models.UploadFile, error) {
	return f.commit(ctx, nil, nil)
}

func (f *Staged) commit(ctx context.Context, appID, endUserID *string) (*models.UploadFile, error) {
	s := f.store
	if f.tmp == "" {
		return nil, apperr.Internal(errors.New("files: staged upload committed twice or discarded"))
	}
	key := dirName + "/" + f.ID
	tmp := f.tmp
	f.tmp = ""
	if _, err := blobs.PutFile(ctx, s.blobs, key, tmp); err != nil {
		return nil, apperr.Internal(fmt.Errorf("store upload file: %w", err))
	}
	row := &models.UploadFile{
		ID:         f.ID,
		AppID:      appID,
		EndUserID:  endUserID,
		Name:       f.Name,
		Size:       f.Size,
		Extension:  f.Extension,
		MimeType:   f.MimeType,
		StorageKey: key,
		Hash:       f.Hash,
	}
	if err := s.db.WithContext(ctx).Create(row).Error; err != nil {
		s.removeBlob(key)
		return nil, err
	}
	return row, nil
}

// nilIfEmpty keeps files made for no particular end user (the files
// workflow tools make) without one.
func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Discard removes the staged bytes. It is safe to call after Commit.
func (f *Staged) Discard() {
	if f != nil && f.tmp != "" {
		os.Remove(f.tmp)
		f.tmp = ""
	}
}

// Save stages and commits a file in one step.
func (s *Store) Save(ctx context.Context, rules Rules, appID, endUserID, name, mimeType string, content io.Reader) (*models.UploadFile, error) {
	staged, err := s.Stage(rules, name, mimeType, content)
	if err != nil {
		return nil, err
	}
	return staged.Commit(ctx, appID, endUserID)
}

// Get returns a stored file by id, or 404 file_not_found.
func (s *Store) Get(ctx context.Context, id string) (*models.UploadFile, error) {
	var f models.UploadFile
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&f).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fileNotFound()
	}
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// OpenForApp returns a file of appID with its bytes, for reading. A file of
// another app gives 403 file_access_denied. When user (the client's `user`
// string) is not empty, the file must have been uploaded by that end user,
// or the answer is 403 file_access_denied too. An unknown id gives 404
// file_not_found. The caller closes the returned content.
func (s *Store) OpenForApp(ctx context.Context, appID, user, id string) (*models.UploadFile, *Content, error) {
	f, err := s.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if f.AppID == nil || *f.AppID != appID {
		return nil, nil, accessDenied()
	}
	if user = strings.TrimSpace(user); user != "" {
		eu, err := endusers.NewStore(s.db).Find(ctx, appID, user)
		if apperr.Is(err, apperr.CodeNotFound) {
			return nil, nil, accessDenied()
		}
		if err != nil {
			return nil, nil, err
		}
		if f.EndUserID == nil || *f.EndUserID != eu.ID {
			return nil, nil, accessDenied()
		}
	}
	c, err := s.Open(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	return f, c, nil
}

// Content is the bytes of a stored file, open for reading; close it when
// done. Size is the number of bytes it holds.
type Content struct {
	io.ReadCloser
	Size int64
}

// Open opens the bytes of a stored file. Missing bytes give 404
// file_not_found.
func (s *Store) Open(ctx context.Context, f *models.UploadFile) (*Content, error) {
	key, err := storageKey(f)
	if err != nil {
		return nil, err
	}
	r, size, err := s.blobs.Open(ctx, key)
	if errors.Is(err, blobs.ErrNotFound) {
		return nil, apperr.FailWith(err, apperr.CodeFileNotFound, "The file's content is missing.")
	}
	if err != nil {
		return nil, apperr.Internal(err)
	}
	return &Content{ReadCloser: r, Size: size}, nil
}

// ReadAll returns the bytes of a stored file. Their size was checked
// against the upload limits when the file was stored.
func (s *Store) ReadAll(ctx context.Context, f *models.UploadFile) ([]byte, error) {
	c, err := s.Open(ctx, f)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil {
		return nil, apperr.Internal(fmt.Errorf("read upload %s: %w", f.ID, err))
	}
	return b, nil
}

// removeBlob deletes bytes no row points at; failing, they are only wasted
// space. It runs on its own context, as it cleans up after a request that
// may have been cancelled.
func (s *Store) removeBlob(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.blobs.Delete(ctx, key)
}

// storageKey returns the blob key of a stored file, checking that it is one
// this store writes (files/<one segment>).
func storageKey(f *models.UploadFile) (string, error) {
	key := f.StorageKey
	rest, ok := strings.CutPrefix(key, dirName+"/")
	if !ok || strings.Contains(rest, "/") || blobs.CheckKey(key) != nil {
		return "", apperr.Internal(fmt.Errorf("upload %s has a bad storage key %q", f.ID, key))
	}
	return key, nil
}

// dir returns the directory uploads are staged in, creating it if needed.
// With a data directory it is <dataDir>/files, so that a directory blob
// store moves staged files into place without copying them.
func (s *Store) dir() (string, error) {
	if s.dataDir == "" {
		return "", apperr.Internal(errors.New("files: no data directory configured"))
	}
	dir := filepath.Join(s.dataDir, dirName)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", apperr.Internal(fmt.Errorf("create %s: %w", dir, err))
	}
	return dir, nil
}

// cleanName checks a client's file name and shortens one that is too long.
func cleanName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", apperr.Fail(apperr.CodeFilenameNotExists, "The file has no name.")
	}
	if !utf8.ValidString(name) || strings.ContainsAny(name, `/\`) || strings.ContainsFunc(name, unicode.IsControl) {
		return "", apperr.InvalidParam("The file name contains characters that are not allowed.")
	}
	if utf8.RuneCountInString(name) > MaxNameLength {
		ext := filepath.Ext(name)
		if utf8.RuneCountInString(ext) >= MaxNameLength/2 {
			ext = ""
		}
		stem := []rune(strings.TrimSuffix(name, ext))
		name = string(stem[:MaxNameLength-utf8.RuneCountInString(ext)]) + ext
	}
	return name, nil
}

// cleanMimeType checks a declared MIME type. A missing one is refused; the
// generic application/octet-stream is replaced by a guess from the
// extension when there is one.
func cleanMimeType(declared, ext string) (string, error) {
	declared = strings.TrimSpace(declared)
	if declared == "" {
		return "", apperr.Fail(apperr.CodeUnsupportedFileType, "The file part declares no Content-Type.")
	}
	mt, _, err := mime.ParseMediaType(declared)
	if err != nil {
		return "", apperr.Fail(apperr.CodeUnsupportedFileType, "The file's Content-Type %q cannot be read.", declared)
	}
	if mt == "application/octet-stream" && ext != "" {
		if guess := typeByExtension(ext); guess != "" {
			return guess, nil
		}
	}
	return mt, nil
}

// typeByExtension guesses a MIME type from an extension, without parameters.
func typeByExtension(ext string) string {
	t := mime.TypeByExtension("." + normalizeExt(ext))
	if t == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(t)
	if err != nil {
		return ""
	}
	return mt
}

func displayExt(ext string) string {
	if ext == "" {
		return "(no extension)"
	}
	return "." + ext
}

func fileNotFound() *apperr.Error {
	return apperr.Fail(apperr.CodeFileNotFound, "File not found.")
}

func accessDenied() *apperr.Error {
	return apperr.Fail(apperr.CodeFileAccessDenied, "You may not access this file.")
}
