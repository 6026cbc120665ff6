package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// GetChatflowHumanInputForm serves GET /form/human_input/{form_token}.
func (s *Server) GetChatflowHumanInputForm(ctx context.Context, req gen.GetChatflowHumanInputFormRequestObject) (gen.GetChatflowHumanInputFormResponseObject, error) {
	return nil, apperr.NotImplemented("GET /form/human_input/{form_token}")
}

// SubmitChatflowHumanInputForm serves POST /form/human_input/{form_token}.
func (s *Server) SubmitChatflowHumanInputForm(ctx context.Context, req gen.SubmitChatflowHumanInputFormRequestObject) (gen.SubmitChatflowHumanInputFormResponseObject, error) {
	return nil, apperr.NotImplemented("POST /form/human_input/{form_token}")
}
