package chat

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"gorm.io/gorm"

	"appkb/internal/platform/apperr"
	"appkb/internal/platform/cluster"
	"appkb/models"
)

// InterruptedError is the error stored on a message whose answer was cut
// off because the server stopped while writing it.
const InterruptedError = "interrupted: the server stopped before the answer was complete"

// CloseInterrupted marks as failed the messages still being written that
// nobody writes any more, keeping the part of the answer that was stored,
// and returns how many it closed. Alone on its database (r nil, or
// SQLite) that is every such message: call it once at start-up, before
// any request is served, when such a message can only be left over from a
// server that stopped. On a shared database it is the messages of dead
// replicas, so a starting replica leaves the live streams of the others
// alone; replicas repeat it periodically to close the streams of one that
// died.
func CloseInterrupted(ctx context.Context, db *gorm.DB, r *cluster.Replica) (int64, error) {
	res := db.WithContext(ctx).Model(&models.Message{}).Where("generating = ?", true).Where(r.Interrupted("replica_id")).Updates(map[string]any{
		"status": StatusError, "error": InterruptedError, "generating": false, "updated_at": time.Now().UTC(),
	})
	return res.RowsAffected, res.Error
}

// recovered handles a panic while an answer was generated: it is logged,
// a message stored at the start of its stream is closed as failed, and the
// caller gets an internal error instead of the process ending.
func (g *Generation) recovered(v any) error {
	g.svc.log.Error("chat: panic while generating", "message_id", g.MessageID, "panic", v, "stack", string(debug.Stack()))
	msg := "internal error while generating the answer"
	g.svc.db.Model(&models.Message{}).Where("id = ? AND generating = ?", g.MessageID, true).Updates(map[string]any{
		"status": StatusError, "error": msg, "generating": false, "updated_at": time.Now().UTC(),
	})
	return apperr.Internal(fmt.Errorf("panic: %v", v))
}
