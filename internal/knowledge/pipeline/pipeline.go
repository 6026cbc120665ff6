// Package pipeline runs knowledge pipelines: a data source feeds documents
// through extraction and chunking into a knowledge base's index.
//
// Pipelines are graphs run by the workflow engine (package workflow),
// which reaches the knowledge base through a workflow.KnowledgeIndexer
// made for each run. Every knowledge base has a built-in pipeline
// equivalent to how its documents are already processed:
//
//	data source → knowledge index
//
// with two built-in data sources, a local file (uploaded with Upload) and a
// web page (fetched through the network guard). The knowledge index adds
// the source through the indexing service, which extracts its text and
// splits it by the process rule and document form of the knowledge base's
// latest document (automatic splitting for an empty one) in the background,
// like any other document.
//
// A knowledge base may instead run a pipeline imported from a Dify export
// (Import). Its datasource, knowledge-index and ordinary workflow nodes
// (code, template-transform, if-else, document-extractor, …) run; a run
// that reaches a node appkb cannot run fails naming the node.
package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"appkb/internal/conversation/files"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/textsplit"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/netguard"
	"appkb/internal/run/workflow"
	"appkb/models"
)

// Data source types, as the API names them.
const (
	TypeLocalFile      = "local_file"
	TypeWebsiteCrawl   = "website_crawl"
	TypeOnlineDocument = "online_document"
	TypeOnlineDrive    = "online_drive"
)

// Node ids of the default pipeline.
const (
	NodeLocalFile = "datasource_local_file"
	NodeWebPage   = "datasource_web_page"
	NodeIndex     = "knowledge_index"
)

// MaxPageSize bounds a fetched web page.
const MaxPageSize = 10 << 20

// FetchTimeout bounds one web page fetch.
const FetchTimeout = 30 * time.Second

// Datasource is a data source node of the pipeline.
type Datasource struct {
	NodeID             string           `json:"node_id"`
	PluginID           string           `json:"plugin_id"`
	ProviderName       string           `json:"provider_name"`
	DatasourceType     string           `json:"datasource_type"`
	Title              string           `json:"title"`
	UserInputVariables []map[string]any `json:"user_input_variables"`
	Credentials        []any            `json:"credentials"`
}

var datasources = []Datasource{
	{NodeID: NodeLocalFile, PluginID: "appkb/file", ProviderName: "file", DatasourceType: TypeLocalFile,
		Title: "File upload", UserInputVariables: []map[string]any{}, Credentials: []any{}},
	{NodeID: NodeWebPage, PluginID: "appkb/web_page", ProviderName: "web_page", DatasourceType: TypeWebsiteCrawl,
		Title: "Web page", Credentials: []any{}, UserInputVariables: []map[string]any{{
			"variable": "url", "label": "URL", "type": "text-input", "required": true,
		}}},
}

// Service runs the default pipelines.
type Service struct {
	db    *gorm.DB
	kb    *datasets.Store
	docs  *documents.Service
	files *files.Store
	guard *netguard.Guard
	// engine is copied for every run (nil: the zero engine).
	engine *workflow.Engine
}

// NewService returns a pipeline service; guard decides which hosts web
// pages may be fetched from.
// engine runs the pipelines' graphs (its models, tools and code runners
// serve their ordinary nodes); nil is the zero engine.
func NewService(db *gorm.DB, registry *llm.Registry, dataDir string, guard *netguard.Guard, engine *workflow.Engine) *Service {
	return &Service{db: db, kb: datasets.NewStore(db, registry), docs: documents.NewService(db, registry, dataDir),
		files: files.NewStore(db, dataDir), guard: guard, engine: engine}
}

// Datasources lists the data source nodes of a knowledge base's pipeline.
func (s *Service) Datasources(ctx context.Context, actor datasets.Actor, datasetID string) ([]Datasource, error) {
	if _, err := s.kb.FindDataset(ctx, actor, datasetID); err != nil {
		return nil, err
	}
	_, list, err := s.graphOf(ctx, datasetID)
	return list, err
}

// UploadedFile is a file stored for pipeline runs.
type UploadedFile struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Size      int64   `json:"size"`
	Extension string  `json:"extension"`
	MimeType  *string `json:"mime_type"`
	CreatedBy string  `json:"created_by"`
	CreatedAt *string `json:"created_at"`
}

// Upload keeps a staged upload (see files.Store.Stage) for pipeline runs:
// a local_file source then names it by its id. It belongs to no app.
func (s *Service) Upload(ctx context.Context, actor datasets.Actor, staged *files.Staged) (*UploadedFile, error) {
	row, err := staged.CommitUnowned(ctx)
	if err != nil {
		return nil, err
	}
	created := row.CreatedAt.UTC().Format(time.RFC3339)
	mt := row.MimeType
	return &UploadedFile{ID: row.ID, Name: row.Name, Size: row.Size, Extension: row.Extension,
		MimeType: &mt, CreatedBy: actor.KeyID, CreatedAt: &created}, nil
}

// Event is one event of a data source node run or a pipeline run, as sent
// on the stream.
type Event map[string]any

// RunDatasource runs one data source node on its inputs, reporting progress
// and the result through emit.
func (s *Service) RunDatasource(ctx context.Context, actor datasets.Actor, datasetID, nodeID, datasourceType string,
	inputs map[string]any, emit func(Event) error) error {
	node, err := s.Node(ctx, actor, datasetID, nodeID, datasourceType)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := emit(Event{"event": "datasource_processing", "total": 1, "completed": 0}); err != nil {
		return err
	}
	var data any
	switch node.DatasourceType {
	case TypeWebsiteCrawl:
		raw, _ := inputs["url"].(string)
		page, ferr := s.fetch(ctx, raw)
		if ferr != nil {
			return emit(Event{"event": "datasource_error", "error": apperr.From(ferr).Message})
		}
		data = []map[string]any{{"source_url": page.url, "title": page.title, "content": string(page.body), "description": ""}}
	case TypeLocalFile:
		ref := fileReference(inputs)
		if ref == "" {
			ref, _ = inputs["upload_file_id"].(string)
		}
		f, ferr := s.files.Get(ctx, ref)
		if ferr != nil {
			return emit(Event{"event": "datasource_error", "error": apperr.From(ferr).Message})
		}
		data = map[string]any{"id": f.ID, "name": f.Name, "size": f.Size, "extension": f.Extension, "mime_type": f.MimeType}
	default:
		return emit(Event{"event": "datasource_error", "error": fmt.Sprintf("The data source node %q (%s) is a %q source, which needs a data source plugin appkb does not run.",
			node.Title, node.NodeID, node.DatasourceType)})
	}
	return emit(Event{"event": "datasource_completed", "data": data, "time_consuming": time.Since(start).Seconds()})
}

// Node finds a data source node of a knowledge base's pipeline: 400
// invalid_param for an unknown one, or one of another type than
// datasourceType (when given).
func (s *Service) Node(ctx context.Context, actor datasets.Actor, datasetID, nodeID, datasourceType string) (Datasource, error) {
	list, err := s.Datasources(ctx, actor, datasetID)
	if err != nil {
		return Datasource{}, err
	}
	ids := make([]string, 0, len(list))
	for _, d := range list {
		if d.NodeID == nodeID {
			if datasourceType != "" && datasourceType != d.DatasourceType {
				return Datasource{}, apperr.InvalidParam("datasource_type: node %s is a %s data source, not %s.", nodeID, d.DatasourceType, datasourceType)
			}
			return d, nil
		}
		ids = append(ids, d.NodeID)
	}
	return Datasource{}, apperr.InvalidParam("node_id: the pipeline has no data source node %q; its data source nodes are %s.", nodeID, strings.Join(ids, ", "))
}

// RunRequest is a pipeline run.
type RunRequest struct {
	DatasourceType string
	// Sources are the entries of datasource_info_list, as sent.
	Sources     []map[string]any
	StartNodeID string
	Inputs      map[string]any
}

// Result is what a finished run reports.
type Result struct {
	TaskID        string         `json:"task_id"`
	WorkflowRunID string         `json:"workflow_run_id"`
	Data          map[string]any `json:"data"`
}

// Run runs the knowledge base's pipeline (imported or built-in) on the
// workflow engine, once per source: every source becomes a document of
// the knowledge base, queued for indexing. emit receives the runs' events
// (nil: none). A source that cannot be read fails with 400 invalid_param
// before any run starts; a run that fails (for instance on a node appkb
// cannot run, which the error names) answers 400 invalid_param with its
// error after its events.
func (s *Service) Run(ctx context.Context, actor datasets.Actor, datasetID string, req RunRequest, emit func(Event) error) (*Result, error) {
	if emit == nil {
		emit = func(Event) error { return nil }
	}
	node, err := s.Check(ctx, actor, datasetID, req)
	if err != nil {
		return nil, err
	}
	ds, err := s.kb.FindDataset(ctx, actor, datasetID)
	if err != nil {
		return nil, err
	}
	w, _, err := s.graphOf(ctx, datasetID)
	if err != nil {
		return nil, err
	}
	g, err := workflow.CompileFrom(w, node.NodeID)
	if err != nil {
		return nil, err
	}
	vars, err := pipelineVariables(w, node.NodeID, req.Inputs)
	if err != nil {
		return nil, err
	}
	settings, err := s.defaultSettings(ctx, ds)
	if err != nil {
		return nil, err
	}
	// Read every source before anything is written.
	srcs := make([]source, 0, len(req.Sources))
	for i, src := range req.Sources {
		one, err := s.read(ctx, node.DatasourceType, i, src)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, one)
	}

	taskID := uuid.NewString()
	var docs []map[string]any
	var data map[string]any
	var res *workflow.Result
	batch := ""
	for _, src := range srcs {
		ix := &runIndexer{s: s, actor: actor, ds: ds, settings: settings, src: src}
		eng := workflow.Engine{}
		if s.engine != nil {
			eng = *s.engine
		}
		eng.Knowledge, eng.Store = ix, nil
		var emitErr error
		started := time.Now()
		res, err = eng.Run(ctx, workflow.RunInput{Graph: g, Mode: workflow.ModeWorkflow, Inputs: req.Inputs,
			UserID: actor.KeyID, WorkflowID: ds.ID, TaskID: taskID, PipelineVariables: vars}, func(ev workflow.Event) {
			if emitErr != nil {
				return
			}
			m, cerr := eventMap(ev)
			if cerr != nil {
				emitErr = cerr
				return
			}
			if m["event"] == "workflow_finished" {
				if d, ok := m["data"].(map[string]any); ok {
					d["outputs"] = ix.outputs(ds, d["outputs"])
				}
			}
			emitErr = emit(m)
		})
		if err != nil {
			return nil, err
		}
		if emitErr != nil {
			return nil, emitErr
		}
		docs = append(docs, ix.docs...)
		if batch == "" {
			batch = ix.batch
		}
		data = map[string]any{"id": res.RunID, "workflow_id": ds.ID, "status": res.Status, "outputs": nil, "error": nil,
			"elapsed_time": res.ElapsedTime, "total_tokens": res.TotalTokens, "total_steps": res.TotalSteps,
			"created_at": started.Unix(), "finished_at": time.Now().Unix()}
		if res.Error != "" {
			data["error"] = res.Error
		}
		switch res.Status {
		case workflow.RunFailed, workflow.RunStopped:
			return nil, apperr.InvalidParam("%s", res.Error)
		case workflow.RunPaused:
			// Nobody could answer the form: pipeline runs have no end user.
			return nil, apperr.InvalidParam("The pipeline paused at a human-input node; knowledge pipeline runs cannot wait for a form.")
		}
	}
	if docs == nil {
		docs = []map[string]any{}
	}
	data["outputs"] = map[string]any{"dataset": map[string]any{"id": ds.ID, "name": ds.Name}, "documents": docs, "batch": batch}
	return &Result{TaskID: taskID, WorkflowRunID: res.RunID, Data: data}, nil
}

// outputs are a finished run's outputs: those of its end nodes, if any,
// and the knowledge base and documents it created.
func (r *runIndexer) outputs(ds *models.Dataset, given any) map[string]any {
	out, _ := given.(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	docs := r.docs
	if docs == nil {
		docs = []map[string]any{}
	}
	out["dataset"] = map[string]any{"id": ds.ID, "name": ds.Name}
	out["documents"], out["batch"] = docs, r.batch
	return out
}

// eventMap is an engine event as the stream sends it.
func eventMap(ev workflow.Event) (Event, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	var m Event
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// Check finds the start node of a run and checks what can be checked
// before it starts: 400 invalid_param for a data source type the pipeline
// has no node for, a start node that is not a data source of that type, or
// no sources.
func (s *Service) Check(ctx context.Context, actor datasets.Actor, datasetID string, req RunRequest) (Datasource, error) {
	switch req.DatasourceType {
	case TypeOnlineDocument, TypeOnlineDrive:
		return Datasource{}, apperr.InvalidParam("datasource_type: %s sources need a data source plugin; appkb reads %s and %s sources.",
			req.DatasourceType, TypeLocalFile, TypeWebsiteCrawl)
	}
	node, err := s.Node(ctx, actor, datasetID, req.StartNodeID, req.DatasourceType)
	if err != nil {
		return Datasource{}, err
	}
	if len(req.Sources) == 0 {
		return Datasource{}, apperr.InvalidParam("datasource_info_list must name at least one source.")
	}
	return node, nil
}

// defaultSettings are the chunker settings of the default pipeline: those
// of the knowledge base's latest document, else automatic splitting into
// plain text chunks; the indexing technique is the knowledge base's, or
// high_quality for one that has none yet.
func (s *Service) defaultSettings(ctx context.Context, ds *models.Dataset) (documents.Settings, error) {
	technique := datasets.TechniqueHighQuality
	if ds.IndexingTechnique != nil && *ds.IndexingTechnique != "" {
		technique = *ds.IndexingTechnique
	}
	form := documents.FormText
	rule := textsplit.ProcessRule{Mode: textsplit.ModeAutomatic}
	var last models.Document
	err := s.db.WithContext(ctx).Where("dataset_id = ?", ds.ID).Order("created_at DESC, position DESC").Limit(1).Take(&last).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
	case err != nil:
		return documents.Settings{}, err
	default:
		form = last.DocForm
		if err := json.Unmarshal([]byte(last.ProcessRule), &rule); err != nil {
			return documents.Settings{}, fmt.Errorf("document %s: stored process rule: %w", last.ID, err)
		}
	}
	return documents.Settings{IndexingTechnique: &technique, DocForm: &form, ProcessRule: &rule}, nil
}

// fileReference is the uploaded file a local_file source names: its
// `reference`, or else its `related_id`, the name Dify's own clients give
// the same id.
func fileReference(src map[string]any) string {
	if ref, _ := src["reference"].(string); strings.TrimSpace(ref) != "" {
		return ref
	}
	ref, _ := src["related_id"].(string)
	return ref
}

// read turns one source of a run into a document upload.
func (s *Service) read(ctx context.Context, typ string, i int, src map[string]any) (source, error) {
	switch typ {
	case TypeLocalFile:
		ref := fileReference(src)
		if strings.TrimSpace(ref) == "" {
			return source{}, apperr.InvalidParam("datasource_info_list[%d].reference: the id of an uploaded file is required.", i)
		}
		f, err := s.files.Get(ctx, ref)
		if err != nil {
			return source{}, err
		}
		body, err := s.files.ReadAll(ctx, f)
		if err != nil {
			return source{}, err
		}
		name := f.Name
		if n, _ := src["name"].(string); strings.TrimSpace(n) != "" && path.Ext(n) == path.Ext(f.Name) {
			name = n
		}
		file := workflow.File{Identity: workflow.FileIdentity, ID: f.ID, Type: "document", TransferMethod: "local_file",
			RelatedID: f.ID, Filename: name, Extension: f.Extension, MimeType: f.MimeType, Size: f.Size}
		return source{typ: typ, upload: documents.Upload{Name: name, MimeType: f.MimeType}, body: body,
			outputs: map[string]any{"file": file}}, nil
	case TypeWebsiteCrawl:
		raw, _ := src["url"].(string)
		page, err := s.fetch(ctx, raw)
		if err != nil {
			return source{}, apperr.InvalidParam("datasource_info_list[%d].url: %s", i, apperr.From(err).Message)
		}
		name := page.title
		if t, _ := src["title"].(string); strings.TrimSpace(t) != "" {
			name = t
		}
		return source{typ: typ, upload: documents.Upload{Name: safeName(name) + page.ext, MimeType: page.mimeType}, body: page.body,
			outputs: map[string]any{"source_url": page.url, "title": name, "content": string(page.body), "description": ""}}, nil
	}
	return source{}, apperr.InvalidParam("datasource_type %q is not supported.", typ)
}

type page struct {
	url, title, mimeType, ext string
	body                      []byte
}

// fetch downloads a web page through the guard.
func (s *Service) fetch(ctx context.Context, raw string) (*page, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, apperr.InvalidParam("url must be an http or https URL.")
	}
	client := s.guard.Client(netguard.ClientOptions{Timeout: FetchTimeout})
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, apperr.InvalidParam("url: %v", err)
	}
	req.Header.Set("User-Agent", "appkb-pipeline/1")
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, netguard.ErrBlocked) {
			return nil, apperr.InvalidParam("The address of %s is not allowed.", u.Host)
		}
		return nil, apperr.InvalidParam("The page could not be fetched: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, apperr.InvalidParam("The page answered %d.", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxPageSize+1))
	if err != nil {
		return nil, apperr.InvalidParam("The page could not be read: %v", err)
	}
	if len(body) > MaxPageSize {
		return nil, apperr.InvalidParam("The page is larger than %d MB.", MaxPageSize>>20)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	p := &page{url: u.String(), body: body, title: u.Host + u.Path}
	switch mt {
	case "text/html", "application/xhtml+xml", "":
		p.mimeType, p.ext = "text/html", ".html"
		if t := htmlTitle(string(body)); t != "" {
			p.title = t
		}
	case "text/markdown":
		p.mimeType, p.ext = mt, ".md"
	case "application/json":
		p.mimeType, p.ext = mt, ".json"
	case "application/pdf":
		p.mimeType, p.ext = mt, ".pdf"
	case "text/csv":
		p.mimeType, p.ext = mt, ".csv"
	default:
		if !strings.HasPrefix(mt, "text/") {
			return nil, apperr.InvalidParam("The page is %s, which cannot be read as text.", mt)
		}
		p.mimeType, p.ext = "text/plain", ".txt"
	}
	return p, nil
}

// htmlTitle returns the text of a page's <title>, if it has one.
func htmlTitle(doc string) string {
	lower := strings.ToLower(doc)
	i := strings.Index(lower, "<title")
	if i < 0 {
		return ""
	}
	j := strings.Index(lower[i:], ">")
	if j < 0 {
		return ""
	}
	start := i + j + 1
	end := strings.Index(lower[start:], "</title>")
	if end < 0 {
		return ""
	}
	return strings.Join(strings.Fields(doc[start:start+end]), " ")
}

// safeName makes a document name out of a page title: no path separators
// or control characters, at most 100 characters.
func safeName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < 0x20 || r == 0x7f {
			return '-'
		}
		return r
	}, strings.TrimSpace(s))
	if r := []rune(s); len(r) > 100 {
		s = string(r[:100])
	}
	if s == "" {
		s = "page"
	}
	return s
}
