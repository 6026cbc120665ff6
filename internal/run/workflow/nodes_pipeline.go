package workflow

import (
	"context"
	"strings"
)

// KnowledgeIndexer gives the nodes of a knowledge pipeline their data
// source and their knowledge base. One value serves one run (it knows the
// run's source and knowledge base), so the workflow engine never reaches
// the indexing packages itself.
type KnowledgeIndexer interface {
	// Source returns the outputs of a datasource node: the source the run
	// was started with, read the way the node's provider type says.
	Source(ctx context.Context, node DatasourceNode) (map[string]any, error)
	// Index turns what a knowledge-index node received into documents of
	// the knowledge base and returns the node's outputs.
	Index(ctx context.Context, req IndexRequest) (map[string]any, error)
}

// DatasourceNode describes a datasource node to KnowledgeIndexer.Source.
type DatasourceNode struct {
	ID, Title string
	// ProviderType is local_file, website_crawl, online_document or
	// online_drive.
	ProviderType       string
	PluginID, Provider string
}

// IndexRequest is what a knowledge-index node hands over.
type IndexRequest struct {
	NodeID, Title string
	// Chunks is the value index_chunk_variable_selector points at; nil
	// when the node names none, in which case the source is indexed as
	// read, split by the knowledge base's own rules.
	Chunks any
	// ChunkStructure (text_model, hierarchical_model, qa_model) and
	// IndexingTechnique (high_quality, economy) as the node sets them.
	ChunkStructure, IndexingTechnique string
}

// runDatasource yields the run's source through Engine.Knowledge.
func runDatasource(x *nodeRun) (*outcome, error) {
	node := DatasourceNode{ID: x.n.id, Title: x.n.title, ProviderType: asString(x.d["provider_type"]),
		PluginID: asString(x.d["plugin_id"]), Provider: asString(x.d["provider_name"])}
	inputs := map[string]any{"provider_type": node.ProviderType, "plugin_id": node.PluginID}
	k := x.r.e.Knowledge
	if k == nil {
		return &outcome{inputs: inputs}, nodeErr("NotSupported", "The datasource node %q runs only in a knowledge pipeline run.", x.n.title)
	}
	out, err := k.Source(x.ctx, node)
	if err != nil {
		return &outcome{inputs: inputs}, nodeErr("DatasourceError", "The datasource node %q (%s) failed: %v", x.n.title, x.n.id, err)
	}
	return &outcome{inputs: inputs, outputs: out}, nil
}

// runKnowledgeIndex hands the chunks it is pointed at (or, with no
// selector, the run's source) to Engine.Knowledge.
func runKnowledgeIndex(x *nodeRun) (*outcome, error) {
	req := IndexRequest{NodeID: x.n.id, Title: x.n.title, ChunkStructure: asString(x.d["chunk_structure"]),
		IndexingTechnique: asString(x.d["indexing_technique"])}
	inputs := map[string]any{"chunk_structure": req.ChunkStructure, "indexing_technique": req.IndexingTechnique}
	if sel := selectorOf(x.d["index_chunk_variable_selector"]); len(sel) > 0 {
		v, ok := x.pool.Get(sel)
		if !ok || v == nil {
			return &outcome{inputs: inputs}, nodeErr("KnowledgeIndexError", "The knowledge-index node %q found nothing in %s.", x.n.title, strings.Join(sel, "."))
		}
		req.Chunks = plain(v)
		inputs["index_chunk_variable_selector"] = sel
	}
	k := x.r.e.Knowledge
	if k == nil {
		return &outcome{inputs: inputs}, nodeErr("NotSupported", "The knowledge-index node %q runs only in a knowledge pipeline run.", x.n.title)
	}
	out, err := k.Index(x.ctx, req)
	if err != nil {
		return &outcome{inputs: inputs}, nodeErr("KnowledgeIndexError", "The knowledge-index node %q failed: %v", x.n.title, err)
	}
	return &outcome{inputs: inputs, outputs: out}, nil
}
