package conversations

import (
	"context"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"

	"appkb/internal/platform/apperr"
	"appkb/models"
)

// Ratings an end user can give.
const (
	RatingLike    = "like"
	RatingDislike = "dislike"
)

// Feedback pages.
const (
	DefaultFeedbackLimit = 20
	MaxFeedbackLimit     = 101
)

// FromSourceUser marks feedback given through the API by an end user, the
// only kind appkb records.
const FromSourceUser = "user"

// Feedback is one rating as the app's feedback list shows it.
type Feedback struct {
	ID        string
	AppID     string
	MessageID string
	// ConversationID is nil for messages outside any conversation
	// (text generator messages).
	ConversationID *string
	Rating         string
	Content        *string
	FromSource     string
	FromEndUserID  *string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// SetFeedback records user's rating of one of the answers user received
// from app (any app mode that has messages). rating is like or dislike, or
// empty to withdraw the rating given before; withdrawing when there is none
// is invalid_param. A new rating replaces the old one, content included. A
// message that does not exist, or that another user received, is not_found.
func (s *Store) SetFeedback(ctx context.Context, app *models.App, user, messageID, rating string, content *string) error {
	if strings.TrimSpace(user) == "" {
		return apperr.InvalidParam("user is required")
	}
	if rating != "" && rating != RatingLike && rating != RatingDislike {
		return apperr.InvalidParam("rating must be like, dislike or null")
	}
	ownerID, err := s.owner(ctx, app.ID, user)
	if err != nil {
		return err
	}
	notFound := apperr.NotFound("Message not found.")
	if ownerID == "" {
		return notFound
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		err := tx.Model(&models.Message{}).
			Where("id = ? AND app_id = ? AND end_user_id = ?", messageID, app.ID, ownerID).
			Count(&n).Error
		if err != nil {
			return err
		}
		if n == 0 {
			return notFound
		}
		var fb models.MessageFeedback
		err = tx.Where("message_id = ? AND end_user_id = ?", messageID, ownerID).Take(&fb).Error
		exists := err == nil
		if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
			return err
		}
		switch {
		case rating == "" && !exists:
			return apperr.InvalidParam("There is no feedback on this message to withdraw.")
		case rating == "":
			return tx.Delete(&models.MessageFeedback{}, "id = ?", fb.ID).Error
		case exists:
			return tx.Model(&models.MessageFeedback{}).Where("id = ?", fb.ID).
				Updates(map[string]any{"rating": rating, "content": content, "updated_at": time.Now().UTC()}).Error
		default:
			return tx.Create(&models.MessageFeedback{
				AppID:     app.ID,
				MessageID: messageID,
				EndUserID: ownerID,
				Rating:    rating,
				Content:   content,
			}).Error
		}
	})
}

// FeedbackPage returns one page (1-based) of all feedback given on app's
// messages, newest first. limit is 1 to MaxFeedbackLimit; 0 means
// DefaultFeedbackLimit, and page 0 means the first page.
func (s *Store) FeedbackPage(ctx context.Context, app *models.App, page, limit int) ([]Feedback, error) {
	if page == 0 {
		page = 1
	}
	if limit == 0 {
		limit = DefaultFeedbackLimit
	}
	if page < 1 {
		return nil, apperr.InvalidParam("page must be at least 1")
	}
	if limit < 1 || limit > MaxFeedbackLimit {
		return nil, apperr.InvalidParam("limit must be between 1 and %d", MaxFeedbackLimit)
	}
	var rows []struct {
		models.MessageFeedback
		ConversationID *string
	}
	err := s.db.WithContext(ctx).Table("message_feedbacks AS f").
		Select("f.*, m.conversation_id").
		Joins("JOIN messages AS m ON m.id = f.message_id").
		Where("f.app_id = ?", app.ID).
		Order("f.created_at DESC, f.id DESC").
		Limit(limit).Offset((page - 1) * limit).
		Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	out := make([]Feedback, len(rows))
	for i, r := range rows {
		endUser := r.EndUserID
		out[i] = Feedback{
			ID:             r.ID,
			AppID:          r.AppID,
			MessageID:      r.MessageID,
			ConversationID: r.ConversationID,
			Rating:         r.Rating,
			Content:        r.Content,
			FromSource:     FromSourceUser,
			FromEndUserID:  &endUser,
			CreatedAt:      r.CreatedAt.UTC(),
			UpdatedAt:      r.UpdatedAt.UTC(),
		}
	}
	return out, nil
}
