package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"appkb/internal/apps"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/workflow"
	"appkb/models"
)

// MaxDSLSize bounds an imported pipeline file.
const MaxDSLSize = 1 << 20

// KindRAGPipeline is the kind of Dify's knowledge pipeline exports.
const KindRAGPipeline = "rag_pipeline"

// dslFile is the part of a knowledge pipeline export appkb reads.
type dslFile struct {
	Kind        string `yaml:"kind"`
	Version     string `yaml:"version"`
	RAGPipeline struct {
		Name string `yaml:"name"`
	} `yaml:"rag_pipeline"`
	Workflow *apps.Workflow `yaml:"workflow"`
}

// parseDSL reads a knowledge pipeline export: 400 invalid_param for
// anything that is not one, or one without a data source node.
func parseDSL(data []byte) (*dslFile, error) {
	if len(data) > MaxDSLSize {
		return nil, apperr.InvalidParam("The pipeline file is larger than %d bytes.", MaxDSLSize)
	}
	var f dslFile
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&f); err != nil {
		return nil, apperr.InvalidParam("The pipeline file is not valid YAML: %v", err)
	}
	if f.Kind != KindRAGPipeline {
		return nil, apperr.InvalidParam("The file's kind is %q; a knowledge pipeline export has kind %s.", f.Kind, KindRAGPipeline)
	}
	if f.Workflow == nil || len(f.Workflow.Graph.Nodes) == 0 {
		return nil, apperr.InvalidParam("The pipeline file has no workflow graph.")
	}
	if len(graphSources(f.Workflow)) == 0 {
		return nil, apperr.InvalidParam("The pipeline has no datasource node to start from.")
	}
	return &f, nil
}

// graphSources lists the datasource nodes of a pipeline graph, each with
// the pipeline variables that belong to it.
func graphSources(w *apps.Workflow) []Datasource {
	var out []Datasource
	for _, n := range w.Graph.Nodes {
		if n.Kind() != apps.NodeDatasource || n.ParentID != "" {
			continue
		}
		str := func(k string) string { s, _ := n.Data[k].(string); return s }
		vars := []map[string]any{}
		for _, raw := range w.RAGPipelineVariables {
			if v, ok := raw.(map[string]any); ok && v["belong_to_node_id"] == n.ID {
				vars = append(vars, v)
			}
		}
		out = append(out, Datasource{NodeID: n.ID, PluginID: str("plugin_id"), ProviderName: str("provider_name"),
			DatasourceType: str("provider_type"), Title: n.Title(), UserInputVariables: vars, Credentials: []any{}})
	}
	return out
}

// defaultWorkflow is the built-in pipeline: each data source leads into
// the knowledge index, which adds the source as a document that the
// indexing service extracts and splits by the knowledge base's rules.
func defaultWorkflow() *apps.Workflow {
	node := func(d Datasource) apps.Node {
		return apps.Node{ID: d.NodeID, Type: "custom", Data: map[string]any{"type": apps.NodeDatasource, "title": d.Title,
			"provider_type": d.DatasourceType, "plugin_id": d.PluginID, "provider_name": d.ProviderName}}
	}
	w := &apps.Workflow{}
	for _, d := range datasources {
		w.Graph.Nodes = append(w.Graph.Nodes, node(d))
		w.Graph.Edges = append(w.Graph.Edges, apps.Edge{ID: d.NodeID + "-" + NodeIndex, Source: d.NodeID, Target: NodeIndex, SourceHandle: "source"})
	}
	w.Graph.Nodes = append(w.Graph.Nodes, apps.Node{ID: NodeIndex, Type: "custom",
		Data: map[string]any{"type": apps.NodeKnowledgeIndex, "title": "Knowledge base"}})
	return w
}

// graphOf is the pipeline a knowledge base runs: the imported one, or
// the built-in one.
func (s *Service) graphOf(ctx context.Context, datasetID string) (*apps.Workflow, []Datasource, error) {
	var row models.DatasetPipeline
	err := s.db.WithContext(ctx).Where("dataset_id = ?", datasetID).Take(&row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return defaultWorkflow(), append([]Datasource(nil), datasources...), nil
	case err != nil:
		return nil, nil, err
	}
	f, err := parseDSL([]byte(row.DSL))
	if err != nil {
		return nil, nil, apperr.Internal(fmt.Errorf("stored pipeline of %s: %w", datasetID, err))
	}
	return f.Workflow, graphSources(f.Workflow), nil
}

// Imported is what Import reports.
type Imported struct {
	Name        string       `json:"name"`
	Datasources []Datasource `json:"datasources"`
	// Unsupported lists the nodes appkb cannot run ("id (type)"); a run
	// that reaches one fails naming it.
	Unsupported []string `json:"unsupported_nodes"`
}

// Import makes a knowledge pipeline export the pipeline of a knowledge
// base, replacing any earlier one. Nodes appkb cannot run are accepted
// and listed: runs that reach them fail naming the node.
func (s *Service) Import(ctx context.Context, actor datasets.Actor, datasetID string, data []byte) (*Imported, error) {
	if _, err := s.kb.FindDataset(ctx, actor, datasetID); err != nil {
		return nil, err
	}
	f, err := parseDSL(data)
	if err != nil {
		return nil, err
	}
	if _, err := workflow.CompileFrom(f.Workflow, graphSources(f.Workflow)[0].NodeID); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	row := models.DatasetPipeline{DatasetID: datasetID, Name: f.RAGPipeline.Name, DSL: string(data), CreatedBy: actor.KeyID,
		CreatedAt: now, UpdatedAt: now}
	err = s.db.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "dataset_id"}},
		DoUpdates: clause.AssignmentColumns([]string{"name", "dsl", "updated_at"})}).Create(&row).Error
	if err != nil {
		return nil, err
	}
	out := &Imported{Name: row.Name, Datasources: graphSources(f.Workflow), Unsupported: []string{}}
	for _, n := range f.Workflow.Graph.Nodes {
		if k := n.Kind(); k != "" && !workflow.Supports(k) {
			out.Unsupported = append(out.Unsupported, fmt.Sprintf("%s (%s)", n.ID, k))
		}
	}
	return out, nil
}

// source is one entry of a run, read before the run starts.
type source struct {
	typ     string
	upload  documents.Upload
	body    []byte
	outputs map[string]any
}

// runIndexer serves the pipeline nodes of one engine run over one source.
type runIndexer struct {
	s        *Service
	actor    datasets.Actor
	ds       *models.Dataset
	settings documents.Settings
	src      source
	// docs and batch collect what knowledge-index nodes created.
	docs  []map[string]any
	batch string
}

func (r *runIndexer) Source(_ context.Context, node workflow.DatasourceNode) (map[string]any, error) {
	switch node.ProviderType {
	case TypeLocalFile, TypeWebsiteCrawl:
	default:
		return nil, fmt.Errorf("%q data sources need a data source plugin, which appkb does not run; it offers %s and %s", node.ProviderType, TypeLocalFile, TypeWebsiteCrawl)
	}
	if node.ProviderType != r.src.typ {
		return nil, fmt.Errorf("the node reads %s sources, and the run was given %s ones", node.ProviderType, r.src.typ)
	}
	return r.src.outputs, nil
}

func (r *runIndexer) Index(ctx context.Context, req workflow.IndexRequest) (map[string]any, error) {
	st := r.settings
	if r.ds.IndexingTechnique == nil || *r.ds.IndexingTechnique == "" {
		if t := req.IndexingTechnique; t == datasets.TechniqueEconomy || t == datasets.TechniqueHighQuality {
			st.IndexingTechnique = &t
		}
	}
	var created *documents.Created
	var err error
	if req.Chunks == nil {
		up := r.src.upload
		up.Body = bytes.NewReader(r.src.body)
		created, err = r.s.docs.CreateFromFile(ctx, r.actor, r.ds.ID, up, st)
	} else {
		text := chunkText(req.Chunks)
		if strings.TrimSpace(text) == "" {
			return nil, errors.New("the chunks it received are empty")
		}
		created, err = r.s.docs.CreateFromText(ctx, r.actor, r.ds.ID, r.src.upload.Name, text, st)
	}
	if err != nil {
		return nil, errors.New(apperr.From(err).Message)
	}
	if r.batch == "" {
		r.batch = created.Batch
	}
	d := created.Document
	r.docs = append(r.docs, map[string]any{"id": d.ID, "name": d.Name, "indexing_status": d.IndexingStatus,
		"batch": created.Batch, "doc_form": d.DocForm})
	return map[string]any{"dataset_id": r.ds.ID, "dataset_name": r.ds.Name, "batch": created.Batch,
		"document_id": d.ID, "document_name": d.Name}, nil
}

// chunkText turns what a knowledge-index node received into the text of
// a document: a string as is; chunk lists (plain strings, Dify's
// general_chunks, parent_child_chunks or qa_chunks) one chunk per
// paragraph; anything else as JSON.
func chunkText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			parts = append(parts, chunkText(e))
		}
		return strings.Join(parts, "\n\n")
	case map[string]any:
		for _, k := range []string{"general_chunks", "parent_child_chunks", "qa_chunks"} {
			if c, ok := x[k]; ok {
				return chunkText(c)
			}
		}
		for _, k := range []string{"parent_content", "content", "text"} {
			if c, ok := x[k].(string); ok {
				return c
			}
		}
		if q, ok := x["question"].(string); ok {
			a, _ := x["answer"].(string)
			return q + "\n" + a
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// pipelineVariables gives a run its pipeline variables (the file's
// rag_pipeline_variables), by owner: a run's inputs set them by name,
// others keep their default. 400 invalid_param when one that is required,
// and belongs to the whole pipeline or to the run's data source, has no
// value.
func pipelineVariables(w *apps.Workflow, startNode string, inputs map[string]any) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	for _, raw := range w.RAGPipelineVariables {
		v, _ := raw.(map[string]any)
		name, _ := v["variable"].(string)
		if name == "" {
			continue
		}
		owner, _ := v["belong_to_node_id"].(string)
		if owner == "" {
			owner = "shared"
		}
		val, given := inputs[name]
		if !given || val == nil || val == "" {
			val = v["default_value"]
		}
		if required, _ := v["required"].(bool); required && (val == nil || val == "") && (owner == "shared" || owner == startNode) {
			return nil, apperr.InvalidParam("inputs.%s is required by the pipeline.", name)
		}
		if out[owner] == nil {
			out[owner] = map[string]any{}
		}
		out[owner][name] = val
	}
	return out, nil
}
