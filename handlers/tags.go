package handlers

import (
	"context"

	"appkb/gen"
	"appkb/handlers/wire"
)

// CreateKnowledgeTag serves POST /datasets/tags.
func (s *Server) CreateKnowledgeTag(ctx context.Context, req gen.CreateKnowledgeTagRequestObject) (gen.CreateKnowledgeTagResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	tag, err := s.kb.CreateTag(ctx, actor, b.Name)
	if err != nil {
		return nil, err
	}
	return gen.CreateKnowledgeTag200JSONResponse(wire.Tag(tag)), nil
}

// GetKnowledgeTags serves GET /datasets/tags: every tag with its binding count.
func (s *Server) GetKnowledgeTags(ctx context.Context, _ gen.GetKnowledgeTagsRequestObject) (gen.GetKnowledgeTagsResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	tags, err := s.kb.ListTags(ctx, actor)
	if err != nil {
		return nil, err
	}
	return gen.GetKnowledgeTags200JSONResponse(wire.Tags(tags)), nil
}

// UpdateKnowledgeTag serves PATCH /datasets/tags: renames a tag.
func (s *Server) UpdateKnowledgeTag(ctx context.Context, req gen.UpdateKnowledgeTagRequestObject) (gen.UpdateKnowledgeTagResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	tag, err := s.kb.RenameTag(ctx, actor, b.TagId, b.Name)
	if err != nil {
		return nil, err
	}
	return gen.UpdateKnowledgeTag200JSONResponse(wire.Tag(tag)), nil
}

// DeleteKnowledgeTag serves DELETE /datasets/tags.
func (s *Server) DeleteKnowledgeTag(ctx context.Context, req gen.DeleteKnowledgeTagRequestObject) (gen.DeleteKnowledgeTagResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	if err := s.kb.DeleteTag(ctx, actor, b.TagId); err != nil {
		return nil, err
	}
	return gen.DeleteKnowledgeTag204Response{}, nil
}

// BindTagsToDataset serves POST /datasets/tags/binding.
func (s *Server) BindTagsToDataset(ctx context.Context, req gen.BindTagsToDatasetRequestObject) (gen.BindTagsToDatasetResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	if err := s.kb.BindTags(ctx, actor, b.TargetId, b.TagIds); err != nil {
		return nil, err
	}
	return gen.BindTagsToDataset204Response{}, nil
}

// UnbindTagFromDataset serves POST /datasets/tags/unbinding; the older
// single tag_id counts as a one-element tag_ids.
func (s *Server) UnbindTagFromDataset(ctx context.Context, req gen.UnbindTagFromDatasetRequestObject) (gen.UnbindTagFromDatasetResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	var ids []string
	if b.TagIds != nil {
		ids = append(ids, *b.TagIds...)
	}
	// The deprecated single tag_id is still accepted.
	if b.TagId != nil {
		ids = append(ids, *b.TagId)
	}
	if err := s.kb.UnbindTags(ctx, actor, b.TargetId, ids); err != nil {
		return nil, err
	}
	return gen.UnbindTagFromDataset204Response{}, nil
}

// QueryDatasetTags serves GET /datasets/{dataset_id}/tags.
func (s *Server) QueryDatasetTags(ctx context.Context, req gen.QueryDatasetTagsRequestObject) (gen.QueryDatasetTagsResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	tags, err := s.kb.DatasetTags(ctx, actor, req.DatasetId)
	if err != nil {
		return nil, err
	}
	data := wire.TagRefs(tags)
	total := len(data)
	return gen.QueryDatasetTags200JSONResponse{Data: &data, Total: &total}, nil
}
