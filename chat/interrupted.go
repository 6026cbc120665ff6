package chat

import (
	"context"
	"time"

	"gorm.io/gorm"

	"appkb/models"
)

// InterruptedError is the error stored on a message whose answer was cut
// off because the server stopped while writing it.
const InterruptedError = "interrupted: the server stopped before the answer was complete"

// CloseInterrupted marks every message still being written as failed,
// keeping the part of the answer that was stored. Call it once at start-up,
// before any request is served: then no answer is being written, so such a
// message can only be left over from a server that stopped. It returns how
// many messages it closed.
func CloseInterrupted(ctx context.Context, db *gorm.DB) (int64, error) {
	res := db.WithContext(ctx).Model(&models.Message{}).Where("generating = ?", true).Updates(map[string]any{
		"status": StatusError, "error": InterruptedError, "generating": false, "updated_at": time.Now().UTC(),
	})
	return res.RowsAffected, res.Error
}
