package handlers

import (
	"context"

	"appkb/gen"
	"appkb/models"
)

// GetEndUserChat serves GET /end-users/{end_user_id}: one end user of the
// key's app; end users of other apps are not found.
func (s *Server) GetEndUserChat(ctx context.Context, req gen.GetEndUserChatRequestObject) (gen.GetEndUserChatResponseObject, error) {
	app, err := s.currentApp(ctx)
	if err != nil {
		return nil, err
	}
	eu, err := s.users.Get(ctx, app.ID, req.EndUserId)
	if err != nil {
		return nil, err
	}
	return gen.GetEndUserChat200JSONResponse{
		Id:             eu.ID,
		TenantId:       models.WorkspaceID,
		AppId:          &eu.AppID,
		Type:           eu.Type,
		ExternalUserId: &eu.ExternalUserID,
		Name:           eu.Name,
		IsAnonymous:    eu.IsAnonymous,
		SessionId:      eu.SessionID,
		CreatedAt:      eu.CreatedAt.UTC(),
		UpdatedAt:      eu.UpdatedAt.UTC(),
	}, nil
}
