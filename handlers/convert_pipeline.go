package handlers

import (
	"appkb/gen"
	"appkb/internal/knowledge/pipeline"
)

// Knowledge pipelines, domain → wire.

func wirePipelineUpload(f *pipeline.UploadedFile) gen.PipelineFileUploadResult {
	size := int(f.Size)
	return gen.PipelineFileUploadResult{Id: f.ID, Name: f.Name, Size: &size, Extension: &f.Extension, MimeType: f.MimeType,
		CreatedBy: &f.CreatedBy, CreatedAt: f.CreatedAt}
}

// wireDatasources lists the data source nodes of a pipeline. Their
// credentials are always an empty list (appkb keeps none), so only the
// list itself is carried over.
func wireDatasources(list []pipeline.Datasource) []gen.DatasourcePlugin {
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
