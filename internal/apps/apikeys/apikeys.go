// Package apikeys issues, checks and revokes the bearer keys of the API.
// A key's text is shown once, when it is made; only its SHA-256 is stored.
package apikeys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"appkb/internal/platform/apperr"
	"appkb/internal/platform/cachever"
	"appkb/models"
)

// Text prefixes of the two kinds of key.
const (
	AppPrefix       = "app-"
	KnowledgePrefix = "dataset-"
)

const (
	secretLen   = 24 // random characters after the kind prefix
	shownPrefix = 8  // random characters kept in clear to identify a key
	alphabet    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
)

// Principal is what a valid key grants.
type Principal struct {
	KeyID string
	Kind  string // models.KeyKindApp or models.KeyKindKnowledge
	AppID string // for app keys
	// Datasets lists the knowledge bases a scoped knowledge key may use;
	// empty means the whole workspace.
	Datasets []string
}

// MayUseDataset reports whether a knowledge principal may act on datasetID.
func (p *Principal) MayUseDataset(datasetID string) bool {
	return p.Kind == models.KeyKindKnowledge && (len(p.Datasets) == 0 || slices.Contains(p.Datasets, datasetID))
}

// Store reads and writes keys in the database. It keeps the keys it has
// authenticated in memory; any change to a key (a revocation, here or in
// another process) empties that cache before the next lookup trusts it.
type Store struct {
	db    *gorm.DB
	cache *cachever.Cache[string, Principal]
}

func NewStore(db *gorm.DB) *Store {
	return &Store{db: db, cache: cachever.New[string, Principal](db, "api_keys")}
}

// CreateAppKey makes a key for one app and returns its text.
func (s *Store) CreateAppKey(ctx context.Context, appID, label string) (string, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&models.App{}).Where("id = ?", appID).Count(&n).Error; err != nil {
		return "", err
	}
	if n == 0 {
		return "", apperr.NotFound("app %s does not exist", appID)
	}
	return s.create(ctx, models.KeyKindApp, AppPrefix, &appID, nil, label)
}

// CreateKnowledgeKey makes a knowledge key, limited to datasets when any are given.
func (s *Store) CreateKnowledgeKey(ctx context.Context, datasets []string, label string) (string, error) {
	return s.create(ctx, models.KeyKindKnowledge, KnowledgePrefix, nil, datasets, label)
}

func (s *Store) create(ctx context.Context, kind, prefix string, appID *string, datasets []string, label string) (string, error) {
	secret, err := randomString(secretLen)
	if err != nil {
		return "", err
	}
	text := prefix + secret
	key := models.APIKey{
		Kind:   kind,
		Prefix: text[:len(prefix)+shownPrefix],
		Hash:   hash(text),
		AppID:  appID,
		Label:  label,
	}
	for _, d := range dedupe(datasets) {
		key.Datasets = append(key.Datasets, models.APIKeyDataset{DatasetID: d})
	}
	if err := s.db.WithContext(ctx).Create(&key).Error; err != nil {
		return "", fmt.Errorf("store key: %w", err)
	}
	return text, nil
}

// Authenticate checks a bearer token and returns what it grants. Any failure
// is an unauthorized error that does not say which check failed.
func (s *Store) Authenticate(ctx context.Context, token string) (*Principal, error) {
	if !strings.HasPrefix(token, AppPrefix) && !strings.HasPrefix(token, KnowledgePrefix) {
		return nil, apperr.Unauthorized("Access token is invalid.")
	}
	want := hash(token)
	p, ok, err := s.cache.Get(ctx, want, func(ctx context.Context) (Principal, bool, error) {
		return s.lookup(ctx, want)
	})
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apperr.Unauthorized("Access token is invalid.")
	}
	return &p, nil
}

// lookup reads the active key whose digest is want.
func (s *Store) lookup(ctx context.Context, want string) (Principal, bool, error) {
	var key models.APIKey
	err := s.db.WithContext(ctx).Preload("Datasets").
		Where("hash = ? AND revoked_at IS NULL", want).Take(&key).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Principal{}, false, nil
	}
	if err != nil {
		return Principal{}, false, err
	}
	// The lookup used an index; compare the full digest in constant time as well.
	if subtle.ConstantTimeCompare([]byte(key.Hash), []byte(want)) != 1 {
		return Principal{}, false, nil
	}
	p := Principal{KeyID: key.ID, Kind: key.Kind}
	if key.AppID != nil {
		p.AppID = *key.AppID
	}
	for _, d := range key.Datasets {
		p.Datasets = append(p.Datasets, d.DatasetID)
	}
	return p, true, nil
}

// Info describes a stored key without its secret.
type Info struct {
	ID        string     `json:"id"`
	Kind      string     `json:"kind"`
	Prefix    string     `json:"prefix"`
	AppID     string     `json:"app_id,omitempty"`
	Datasets  []string   `json:"datasets,omitempty"`
	Label     string     `json:"label,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// List returns every key, oldest first.
func (s *Store) List(ctx context.Context) ([]Info, error) {
	var keys []models.APIKey
	if err := s.db.WithContext(ctx).Preload("Datasets").Order("created_at, id").Find(&keys).Error; err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(keys))
	for _, k := range keys {
		info := Info{ID: k.ID, Kind: k.Kind, Prefix: k.Prefix, Label: k.Label, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
		if k.AppID != nil {
			info.AppID = *k.AppID
		}
		for _, d := range k.Datasets {
			info.Datasets = append(info.Datasets, d.DatasetID)
		}
		out = append(out, info)
	}
	return out, nil
}

// Revoke disables the one active key whose text starts with prefix (the whole
// key text works too). It returns the revoked key's id. A prefix shorter than
// the shown part, or one that matches several keys, is refused.
func (s *Store) Revoke(ctx context.Context, prefix string) (string, error) {
	q := s.db.WithContext(ctx).Model(&models.APIKey{}).Where("revoked_at IS NULL")
	switch {
	case strings.HasPrefix(prefix, AppPrefix) && len(prefix) >= len(AppPrefix)+secretLen,
		strings.HasPrefix(prefix, KnowledgePrefix) && len(prefix) >= len(KnowledgePrefix)+secretLen:
		q = q.Where("hash = ?", hash(prefix))
	case strings.HasPrefix(prefix, AppPrefix) && len(prefix) >= len(AppPrefix)+shownPrefix,
		strings.HasPrefix(prefix, KnowledgePrefix) && len(prefix) >= len(KnowledgePrefix)+shownPrefix:
		q = q.Where("prefix = ?", prefix[:strings.Index(prefix, "-")+1+shownPrefix])
	default:
		return "", apperr.InvalidParam("give the key or at least its first %d characters after the app-/dataset- prefix", shownPrefix)
	}
	var ids []string
	if err := q.Pluck("id", &ids).Error; err != nil {
		return "", err
	}
	switch len(ids) {
	case 0:
		return "", apperr.NotFound("no active key starts with %q", prefix)
	case 1:
	default:
		return "", apperr.InvalidParam("%d active keys start with %q; give more of the key", len(ids), prefix)
	}
	now := time.Now().UTC()
	if err := s.db.WithContext(ctx).Model(&models.APIKey{}).Where("id = ?", ids[0]).Update("revoked_at", now).Error; err != nil {
		return "", err
	}
	return ids[0], nil
}

func hash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

func randomString(n int) (string, error) {
	b := make([]byte, n)
	max := big.NewInt(int64(len(alphabet)))
	for i := range b {
		v, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", err
		}
		b[i] = alphabet[v.Int64()]
	}
	return string(b), nil
}

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// RevokeLabelled revokes every active key with this label.
func (s *Store) RevokeLabelled(ctx context.Context, label string) error {
	return s.db.WithContext(ctx).Model(&models.APIKey{}).
		Where("label = ? AND revoked_at IS NULL", label).
		Update("revoked_at", time.Now().UTC()).Error
}
