package handlers

import (
	"context"

	"appkb/gen"
	"appkb/handlers/wire"
	"appkb/internal/apps"
	"appkb/models"
)

// GetChatAppInfo serves GET /info: the name, description, tags and mode of
// the app the key belongs to.
func (s *Server) GetChatAppInfo(ctx context.Context, _ gen.GetChatAppInfoRequestObject) (gen.GetChatAppInfoResponseObject, error) {
	app, err := s.currentApp(ctx)
	if err != nil {
		return nil, err
	}
	return gen.GetChatAppInfo200JSONResponse(wire.AppInfo(apps.Info(app))), nil
}

// GetChatAppParameters serves GET /parameters: features, input form and
// upload limits of the app.
func (s *Server) GetChatAppParameters(ctx context.Context, _ gen.GetChatAppParametersRequestObject) (gen.GetChatAppParametersResponseObject, error) {
	app, def, err := s.currentDefinition(ctx)
	if err != nil {
		return nil, err
	}
	params := apps.ParametersFor(def, apps.DefaultSystemParameters)
	// Once annotation reply has been switched through the API, that setting
	// wins over the one in the app definition.
	reply, err := s.annotationService().Settings(ctx, app.ID)
	if err != nil {
		return nil, err
	}
	if !reply.CreatedAt.IsZero() {
		params.AnnotationReply = apps.Switch{Enabled: reply.Enabled}
	}
	out, err := wire.Parameters(&params)
	if err != nil {
		return nil, err
	}
	return gen.GetChatAppParameters200JSONResponse(out), nil
}

// GetChatAppMeta serves GET /meta: the icons of the app's tools.
func (s *Server) GetChatAppMeta(ctx context.Context, _ gen.GetChatAppMetaRequestObject) (gen.GetChatAppMetaResponseObject, error) {
	_, def, err := s.currentDefinition(ctx)
	if err != nil {
		return nil, err
	}
	out, err := wire.Meta(apps.MetaFor(def))
	if err != nil {
		return nil, err
	}
	return gen.GetChatAppMeta200JSONResponse(out), nil
}

// GetChatWebAppSettings serves GET /site: how the app's web page looks.
func (s *Server) GetChatWebAppSettings(ctx context.Context, _ gen.GetChatWebAppSettingsRequestObject) (gen.GetChatWebAppSettingsResponseObject, error) {
	app, def, err := s.currentDefinition(ctx)
	if err != nil {
		return nil, err
	}
	return gen.GetChatWebAppSettings200JSONResponse(wire.Site(apps.SiteFor(app, def))), nil
}

// currentApp loads the app that the request's app key is bound to.
func (s *Server) currentApp(ctx context.Context) (*models.App, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	return s.apps.Cached(ctx, p.AppID)
}

// currentDefinition loads the key's app together with its parsed definition
// (both shared: not to be modified).
func (s *Server) currentDefinition(ctx context.Context) (*models.App, *apps.Definition, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, nil, err
	}
	return s.apps.Load(ctx, p.AppID)
}

// GetApiIndex serves GET /: the API's greeting with its and the server's
// version, the fields Dify's Service API answers there.
func (s *Server) GetApiIndex(ctx context.Context, req gen.GetApiIndexRequestObject) (gen.GetApiIndexResponseObject, error) {
	v := s.version
	if v == "" {
		v = "dev"
	}
	return gen.GetApiIndex200JSONResponse{Welcome: "appkb Service API", ApiVersion: "v1", ServerVersion: v}, nil
}
