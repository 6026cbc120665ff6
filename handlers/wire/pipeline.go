package wire

import (
	"encoding/json"
	"fmt"

	"appkb/gen"
	"appkb/internal/knowledge/pipeline"
)

// Knowledge pipelines, domain → wire.

func PipelineUpload(f *pipeline.UploadedFile) gen.PipelineFileUploadResult {
	size := int(f.Size)
	return gen.PipelineFileUploadResult{Id: f.ID, Name: f.Name, Size: &size, Extension: &f.Extension, MimeType: f.MimeType,
		CreatedBy: &f.CreatedBy, CreatedAt: f.CreatedAt}
}

// Datasources lists the data source nodes of a pipeline. Their
// credentials are always an empty list (appkb keeps none), so only the
// list itself is carried over.
func Datasources(list []pipeline.Datasource) []gen.DatasourcePlugin {
	if list == nil {
		return nil
	}
	out := make([]gen.DatasourcePlugin, len(list))
	for i := range list {
		d := &list[i]
		p := gen.DatasourcePlugin{NodeId: d.NodeID, PluginId: &d.PluginID, ProviderName: &d.ProviderName,
			DatasourceType: &d.DatasourceType, Title: &d.Title, UserInputVariables: listOrNil(d.UserInputVariables)}
		if d.Credentials != nil {
			creds := make([]gen.DatasourceCredential, 0, len(d.Credentials))
			p.Credentials = &creds
		}
		out[i] = p
	}
	return out
}

// PipelineResult is the outcome of a blocking pipeline run.
func PipelineResult(r *pipeline.Result) gen.PipelineRunResult {
	return gen.PipelineRunResult{TaskId: &r.TaskID, WorkflowRunId: &r.WorkflowRunID, Data: mapOrNil(r.Data)}
}

// DomainSources reads datasource_info_list: each entry as the object sent
// (a null entry stays nil). An entry that is no object fails, with the
// message the whole list's decoding gave.
func DomainSources(list []gen.PipelineRunRequest_DatasourceInfoList_Item) ([]map[string]any, error) {
	if list == nil {
		return nil, nil
	}
	out := make([]map[string]any, len(list))
	for i, item := range list {
		raw, err := item.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encode %T: %w", list, err)
		}
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("decode into %T: %w", out, err)
		}
	}
	return out, nil
}
