// Package endusers maps the `user` string that clients send with app calls
// to stored end users, one per app and string.
package endusers

import (
	"context"
	"errors"
	"strings"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"appkb/internal/platform/apperr"
	"appkb/internal/platform/cachever"
	"appkb/models"
)

// MaxUserLength bounds the `user` string.
const MaxUserLength = 255

// Store reads and creates end users.
type Store struct {
	db *gorm.DB
	// known caches Resolve's answers by app and user string. End-user
	// rows are never changed once written and go away only with their app
	// (ON DELETE CASCADE), so the cache is checked against the apps
	// counter of cache_versions, which every update or delete of an app
	// moves.
	known *cachever.Cache[userKey, models.EndUser]
}

type userKey struct{ appID, user string }

func NewStore(db *gorm.DB) *Store {
	return &Store{db: db, known: cachever.New[userKey, models.EndUser](db, "apps")}
}

// Resolve returns the end user of appID named user, creating it on first use.
// Concurrent first calls for the same name end with the same row.
func (s *Store) Resolve(ctx context.Context, appID, user string) (*models.EndUser, error) {
	user = strings.TrimSpace(user)
	if user == "" {
		return nil, apperr.InvalidParam("user is required")
	}
	if len(user) > MaxUserLength {
		return nil, apperr.InvalidParam("user must be at most %d characters", MaxUserLength)
	}
	eu, _, err := s.known.Get(ctx, userKey{appID, user}, func(ctx context.Context) (models.EndUser, bool, error) {
		eu, err := s.resolve(ctx, appID, user)
		if err != nil {
			return models.EndUser{}, false, err
		}
		return *eu, true, nil
	})
	if err != nil {
		return nil, err
	}
	return &eu, nil // a copy: callers may change it
}

// resolve reads or creates the end user, without the cache.
func (s *Store) resolve(ctx context.Context, appID, user string) (*models.EndUser, error) {
	if eu, err := s.Find(ctx, appID, user); err == nil || !apperr.Is(err, apperr.CodeNotFound) {
		return eu, err
	}
	eu := &models.EndUser{
		AppID:          appID,
		ExternalUserID: user,
		Type:           "service-api",
		SessionID:      user,
		IsAnonymous:    false,
	}
	eu.ID = uuid.NewString()
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(eu).Error
	if err != nil {
		return nil, err
	}
	return s.Find(ctx, appID, user)
}

// Find returns an existing end user, or not_found.
func (s *Store) Find(ctx context.Context, appID, user string) (*models.EndUser, error) {
	var eu models.EndUser
	err := s.db.WithContext(ctx).Where("app_id = ? AND external_user_id = ?", appID, user).Take(&eu).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, apperr.NotFound("end user %q not found", user)
	}
	if err != nil {
		return nil, err
	}
	return &eu, nil
}

// Get returns the end user with this id if it belongs to appID.
func (s *Store) Get(ctx context.Context, appID, id string) (*models.EndUser, error) {
	var eu models.EndUser
	err := s.db.WithContext(ctx).Where("app_id = ? AND id = ?", appID, id).Take(&eu).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, apperr.Fail(apperr.CodeEndUserNotFound, "End user not found.")
	}
	if err != nil {
		return nil, err
	}
	return &eu, nil
}
