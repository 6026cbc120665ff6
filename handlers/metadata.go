package handlers

import (
	"context"

	"appkb/gen"
	"appkb/handlers/wire"
	"appkb/internal/knowledge/documents"
	"appkb/internal/platform/apperr"
)

// CreateMetadataField serves POST /datasets/{dataset_id}/metadata.
func (s *Server) CreateMetadataField(ctx context.Context, req gen.CreateMetadataFieldRequestObject) (gen.CreateMetadataFieldResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	f, err := s.kb.CreateMetadataField(ctx, actor, req.DatasetId, b.Name, string(b.Type))
	if err != nil {
		return nil, err
	}
	return gen.CreateMetadataField201JSONResponse{Id: f.ID, Name: f.Name, Type: f.Type}, nil
}

// ListMetadataFields serves GET /datasets/{dataset_id}/metadata.
func (s *Server) ListMetadataFields(ctx context.Context, req gen.ListMetadataFieldsRequestObject) (gen.ListMetadataFieldsResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	list, err := s.kb.ListMetadataFields(ctx, actor, req.DatasetId)
	if err != nil {
		return nil, err
	}
	return gen.ListMetadataFields200JSONResponse(wire.MetadataList(list)), nil
}

// UpdateMetadataField serves PATCH /datasets/{dataset_id}/metadata/{metadata_id}.
func (s *Server) UpdateMetadataField(ctx context.Context, req gen.UpdateMetadataFieldRequestObject) (gen.UpdateMetadataFieldResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	f, err := s.kb.RenameMetadataField(ctx, actor, req.DatasetId, req.MetadataId, b.Name)
	if err != nil {
		return nil, err
	}
	return gen.UpdateMetadataField200JSONResponse{Id: f.ID, Name: f.Name, Type: f.Type}, nil
}

// DeleteMetadataField serves DELETE /datasets/{dataset_id}/metadata/{metadata_id}.
func (s *Server) DeleteMetadataField(ctx context.Context, req gen.DeleteMetadataFieldRequestObject) (gen.DeleteMetadataFieldResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.kb.DeleteMetadataField(ctx, actor, req.DatasetId, req.MetadataId); err != nil {
		return nil, err
	}
	return gen.DeleteMetadataField204Response{}, nil
}

// GetBuiltInMetadataFields serves GET /datasets/{dataset_id}/metadata/built-in.
func (s *Server) GetBuiltInMetadataFields(ctx context.Context, req gen.GetBuiltInMetadataFieldsRequestObject) (gen.GetBuiltInMetadataFieldsResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	fields, err := s.kb.GetBuiltInFields(ctx, actor, req.DatasetId)
	if err != nil {
		return nil, err
	}
	out := make([]gen.BuiltInMetadataField, len(fields))
	for i, f := range fields {
		out[i] = gen.BuiltInMetadataField{Name: f.Name, Type: f.Type}
	}
	return gen.GetBuiltInMetadataFields200JSONResponse{Fields: &out}, nil
}

// ToggleBuiltInMetadataField serves POST /datasets/{dataset_id}/metadata/built-in/{action}.
func (s *Server) ToggleBuiltInMetadataField(ctx context.Context, req gen.ToggleBuiltInMetadataFieldRequestObject) (gen.ToggleBuiltInMetadataFieldResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	var enabled bool
	switch req.Action {
	case "enable":
		enabled = true
	case "disable":
	default:
		return nil, apperr.InvalidParam("action must be enable or disable")
	}
	if err := s.kb.SetBuiltInFields(ctx, actor, req.DatasetId, enabled); err != nil {
		return nil, err
	}
	return gen.ToggleBuiltInMetadataField200JSONResponse{Result: "success"}, nil
}

// BatchUpdateDocumentMetadata serves POST /datasets/{dataset_id}/documents/metadata.
func (s *Server) BatchUpdateDocumentMetadata(ctx context.Context, req gen.BatchUpdateDocumentMetadataRequestObject) (gen.BatchUpdateDocumentMetadataResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	ops := make([]documents.MetadataOp, 0, len(b.OperationData))
	for _, item := range b.OperationData {
		op := documents.MetadataOp{DocumentID: item.DocumentId, Values: map[string]any{}}
		if item.PartialUpdate != nil {
			op.Partial = *item.PartialUpdate
		}
		for _, v := range item.MetadataList {
			op.Values[v.Id] = v.Value
		}
		ops = append(ops, op)
	}
	if err := s.docs.SetMetadata(ctx, actor, req.DatasetId, ops); err != nil {
		return nil, err
	}
	return gen.BatchUpdateDocumentMetadata200JSONResponse{Result: "success"}, nil
}
