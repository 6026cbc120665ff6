package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// GetEndUserChat serves GET /end-users/{end_user_id}.
func (s *Server) GetEndUserChat(ctx context.Context, req gen.GetEndUserChatRequestObject) (gen.GetEndUserChatResponseObject, error) {
	return nil, apperr.NotImplemented("GET /end-users/{end_user_id}")
}
