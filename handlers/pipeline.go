package handlers

import (
	"context"
	"encoding/json"
	"net/http"

	"appkb/gen"
	"appkb/handlers/wire"
	"appkb/internal/knowledge/pipeline"
	"appkb/internal/platform/apperr"
)

// UploadPipelineFile serves POST /datasets/pipeline/file-upload.
func (s *Server) UploadPipelineFile(ctx context.Context, req gen.UploadPipelineFileRequestObject) (gen.UploadPipelineFileResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	form, err := s.readUploadForm(req.Body)
	if err != nil {
		return nil, err
	}
	defer form.staged.Discard()
	f, err := s.pipelines.Upload(ctx, actor, form.staged)
	if err != nil {
		return nil, err
	}
	return gen.UploadPipelineFile201JSONResponse(wire.PipelineUpload(f)), nil
}

// ListDatasourcePlugins serves GET /datasets/{dataset_id}/pipeline/datasource-plugins.
func (s *Server) ListDatasourcePlugins(ctx context.Context, req gen.ListDatasourcePluginsRequestObject) (gen.ListDatasourcePluginsResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	list, err := s.pipelines.Datasources(ctx, actor, req.DatasetId)
	if err != nil {
		return nil, err
	}
	return gen.ListDatasourcePlugins200JSONResponse(wire.Datasources(list)), nil
}

// RunDatasourceNode serves POST /datasets/{dataset_id}/pipeline/datasource/nodes/{node_id}/run:
// the node's progress and result as an event stream. Problems found before
// the node starts (unknown knowledge base or node) are plain error answers.
func (s *Server) RunDatasourceNode(ctx context.Context, req gen.RunDatasourceNodeRequestObject) (gen.RunDatasourceNodeResponseObject, error) {
	actor, body, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	if _, err := s.pipelines.Node(ctx, actor, req.DatasetId, req.NodeId, string(body.DatasourceType)); err != nil {
		return nil, err
	}
	return pipelineStream(func(emit func(pipeline.Event) error) error {
		return s.pipelines.RunDatasource(ctx, actor, req.DatasetId, req.NodeId, string(body.DatasourceType), body.Inputs, emit)
	}), nil
}

// RunPipeline serves POST /datasets/{dataset_id}/pipeline/run, blocking or
// streamed as response_mode says.
func (s *Server) RunPipeline(ctx context.Context, req gen.RunPipelineRequestObject) (gen.RunPipelineResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	sources, err := wire.DomainSources(b.DatasourceInfoList)
	if err != nil {
		return nil, apperr.InvalidParam("datasource_info_list: %v", err)
	}
	run := pipeline.RunRequest{DatasourceType: string(b.DatasourceType), Sources: sources,
		StartNodeID: b.StartNodeId, Inputs: b.Inputs}
	if b.ResponseMode == gen.PipelineRunRequestResponseModeBlocking {
		res, err := s.pipelines.Run(ctx, actor, req.DatasetId, run, nil)
		if err != nil {
			return nil, err
		}
		return gen.RunPipeline200JSONResponse(wire.PipelineResult(res)), nil
	}
	if _, err := s.pipelines.Check(ctx, actor, req.DatasetId, run); err != nil {
		return nil, err
	}
	return pipelineStream(func(emit func(pipeline.Event) error) error {
		_, err := s.pipelines.Run(ctx, actor, req.DatasetId, run, emit)
		if err != nil && !apperr.Is(err, apperr.CodeInternal) {
			// Failures of the run itself were reported by workflow_finished;
			// the error event carries the reason for clients that stop at it.
			ae := apperr.From(err)
			return emit(pipeline.Event{"event": "error", "status": ae.Status, "code": ae.Code, "message": ae.Message})
		}
		return err
	}), nil
}

// pipelineStream writes the events of a run as they come, one data: frame
// each.
type pipelineStream func(emit func(pipeline.Event) error) error

func (p pipelineStream) write(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	return p(func(ev pipeline.Event) error {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	})
}

func (p pipelineStream) VisitRunDatasourceNodeResponse(w http.ResponseWriter) error {
	return p.write(w)
}
func (p pipelineStream) VisitRunPipelineResponse(w http.ResponseWriter) error { return p.write(w) }
