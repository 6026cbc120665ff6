package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
	"appkb/models"
)

// GetChatAppInfo serves GET /info: the name, mode and description of the
// app the key belongs to.
func (s *Server) GetChatAppInfo(ctx context.Context, _ gen.GetChatAppInfoRequestObject) (gen.GetChatAppInfoResponseObject, error) {
	app, err := s.currentApp(ctx)
	if err != nil {
		return nil, err
	}
	return gen.GetChatAppInfo200JSONResponse{
		Name:        app.Name,
		Mode:        app.Mode,
		Description: &app.Description,
		Tags:        &[]string{},
	}, nil
}

// GetChatAppParameters serves GET /parameters.
func (s *Server) GetChatAppParameters(ctx context.Context, req gen.GetChatAppParametersRequestObject) (gen.GetChatAppParametersResponseObject, error) {
	return nil, apperr.NotImplemented("GET /parameters")
}

// GetChatAppMeta serves GET /meta.
func (s *Server) GetChatAppMeta(ctx context.Context, req gen.GetChatAppMetaRequestObject) (gen.GetChatAppMetaResponseObject, error) {
	return nil, apperr.NotImplemented("GET /meta")
}

// GetChatWebAppSettings serves GET /site.
func (s *Server) GetChatWebAppSettings(ctx context.Context, req gen.GetChatWebAppSettingsRequestObject) (gen.GetChatWebAppSettingsResponseObject, error) {
	return nil, apperr.NotImplemented("GET /site")
}

// currentApp loads the app that the request's app key is bound to.
func (s *Server) currentApp(ctx context.Context) (*models.App, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	return s.apps.Get(ctx, p.AppID)
}
