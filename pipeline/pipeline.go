// Package pipeline runs knowledge pipelines: a data source feeds documents
// through extraction and chunking into a knowledge base's index.
//
// appkb has no pipeline editor. Every knowledge base has one default
// pipeline equivalent to how its documents are already processed:
//
//	data source → extractor → chunker → knowledge index
//
// with two built-in data sources, a local file (uploaded with Upload) and a
// web page (fetched through the network guard). The chunker applies the
// process rule and document form of the knowledge base's latest document
// (automatic splitting for an empty one), and the index step adds the
// documents through the indexing service, so they are indexed in the
// background like any other document.
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
	"os"
	"path"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"appkb/apperr"
	"appkb/files"
	"appkb/indexing"
	"appkb/knowledge"
	"appkb/llm"
	"appkb/models"
	"appkb/netguard"
	"appkb/textsplit"
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
	NodeExtractor = "extractor"
	NodeChunker   = "chunker"
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
	kb    *knowledge.Store
	docs  *indexing.Service
	files *files.Store
	guard *netguard.Guard
}

// NewService returns a pipeline service; guard decides which hosts web
// pages may be fetched from.
func NewService(db *gorm.DB, registry *llm.Registry, dataDir string, guard *netguard.Guard) *Service {
	return &Service{db: db, kb: knowledge.NewStore(db, registry), docs: indexing.NewService(db, registry, dataDir),
		files: files.NewStore(db, dataDir), guard: guard}
}

// Datasources lists the data source nodes of a knowledge base's pipeline.
func (s *Service) Datasources(ctx context.Context, actor knowledge.Actor, datasetID string) ([]Datasource, error) {
	if _, err := s.kb.FindDataset(ctx, actor, datasetID); err != nil {
		return nil, err
	}
	return append([]Datasource(nil), datasources...), nil
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
func (s *Service) Upload(ctx context.Context, actor knowledge.Actor, staged *files.Staged) (*UploadedFile, error) {
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
func (s *Service) RunDatasource(ctx context.Context, actor knowledge.Actor, datasetID, nodeID, datasourceType string,
	inputs map[string]any, emit func(Event) error) error {
	if _, err := s.kb.FindDataset(ctx, actor, datasetID); err != nil {
		return err
	}
	node, err := Node(nodeID, datasourceType)
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
		ref, _ := inputs["reference"].(string)
		if ref == "" {
			ref, _ = inputs["upload_file_id"].(string)
		}
		f, ferr := s.files.Get(ctx, ref)
		if ferr != nil {
			return emit(Event{"event": "datasource_error", "error": apperr.From(ferr).Message})
		}
		data = map[string]any{"id": f.ID, "name": f.Name, "size": f.Size, "extension": f.Extension, "mime_type": f.MimeType}
	}
	return emit(Event{"event": "datasource_completed", "data": data, "time_consuming": time.Since(start).Seconds()})
}

// Node finds a data source node of the pipeline: 400 invalid_param for an
// unknown one, or one of another type than datasourceType (when given).
func Node(nodeID, datasourceType string) (Datasource, error) {
	for _, d := range datasources {
		if d.NodeID == nodeID {
			if datasourceType != "" && datasourceType != d.DatasourceType {
				return Datasource{}, apperr.InvalidParam("datasource_type: node %s is a %s data source, not %s.", nodeID, d.DatasourceType, datasourceType)
			}
			return d, nil
		}
	}
	return Datasource{}, apperr.InvalidParam("node_id: the pipeline has no data source node %q; its nodes are %s and %s.", nodeID, NodeLocalFile, NodeWebPage)
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

// Run runs the default pipeline over the sources: every source becomes a
// document of the knowledge base, queued for indexing. emit receives the
// run's events (nil: none). A source that cannot be read fails the run
// with 400 invalid_param before any document is made.
func (s *Service) Run(ctx context.Context, actor knowledge.Actor, datasetID string, req RunRequest, emit func(Event) error) (*Result, error) {
	if emit == nil {
		emit = func(Event) error { return nil }
	}
	ds, err := s.kb.FindDataset(ctx, actor, datasetID)
	if err != nil {
		return nil, err
	}
	node, err := Check(req)
	if err != nil {
		return nil, err
	}
	settings, err := s.defaultSettings(ctx, ds)
	if err != nil {
		return nil, err
	}

	run := &runState{emit: emit, taskID: uuid.NewString(), runID: uuid.NewString(), started: time.Now()}
	inputs := req.Inputs
	if inputs == nil {
		inputs = map[string]any{}
	}
	if err := run.send("workflow_started", map[string]any{"id": run.runID, "workflow_id": ds.ID, "inputs": inputs,
		"created_at": run.started.Unix()}); err != nil {
		return nil, err
	}

	// Data source: read every source before anything is written.
	var uploads []indexing.Upload
	err = run.node(node.NodeID, "datasource", node.Title, "", func() (map[string]any, error) {
		for i, src := range req.Sources {
			up, err := s.read(ctx, node.DatasourceType, i, src)
			if err != nil {
				return nil, err
			}
			uploads = append(uploads, up)
		}
		return map[string]any{"count": len(uploads)}, nil
	})
	if err == nil {
		err = run.node(NodeExtractor, "document-extractor", "Extract text", node.NodeID, func() (map[string]any, error) {
			return map[string]any{"documents": len(uploads)}, nil
		})
	}
	if err == nil {
		err = run.node(NodeChunker, "chunker", "Split into chunks", NodeExtractor, func() (map[string]any, error) {
			return map[string]any{"process_rule": settings.ProcessRule, "doc_form": *settings.DocForm}, nil
		})
	}
	var outputs map[string]any
	if err == nil {
		err = run.node(NodeIndex, "knowledge-index", "Knowledge base", NodeChunker, func() (map[string]any, error) {
			docs := make([]map[string]any, 0, len(uploads))
			batch := ""
			for _, up := range uploads {
				created, err := s.docs.CreateFromFile(ctx, actor, ds.ID, up, settings)
				if err != nil {
					return nil, err
				}
				if batch == "" {
					batch = created.Batch
				}
				d := created.Document
				docs = append(docs, map[string]any{"id": d.ID, "name": d.Name, "indexing_status": d.IndexingStatus,
					"batch": created.Batch, "doc_form": d.DocForm})
			}
			outputs = map[string]any{"dataset": map[string]any{"id": ds.ID, "name": ds.Name}, "documents": docs, "batch": batch}
			return outputs, nil
		})
	}
	status, errText := "succeeded", any(nil)
	if err != nil {
		status, errText = "failed", apperr.From(err).Message
	}
	finished := time.Now()
	data := map[string]any{"id": run.runID, "workflow_id": ds.ID, "status": status, "outputs": outputs, "error": errText,
		"elapsed_time": finished.Sub(run.started).Seconds(), "total_tokens": 0, "total_steps": run.steps,
		"created_at": run.started.Unix(), "finished_at": finished.Unix()}
	if serr := run.send("workflow_finished", data); serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		return nil, err
	}
	return &Result{TaskID: run.taskID, WorkflowRunID: run.runID, Data: data}, nil
}

// Check finds the start node of a run and checks what can be checked
// before it starts: 400 invalid_param for a data source type the pipeline
// has no node for, a start node that is not a data source of that type, or
// no sources.
func Check(req RunRequest) (Datasource, error) {
	switch req.DatasourceType {
	case TypeOnlineDocument, TypeOnlineDrive:
		return Datasource{}, apperr.InvalidParam("datasource_type: %s sources need a data source plugin; this pipeline offers %s and %s.",
			req.DatasourceType, TypeLocalFile, TypeWebsiteCrawl)
	}
	node, err := Node(req.StartNodeID, req.DatasourceType)
	if err != nil {
		return Datasource{}, err
	}
	if len(req.Sources) == 0 {
		return Datasource{}, apperr.InvalidParam("datasource_info_list must name at least one source.")
	}
	return node, nil
}

// runState numbers the nodes of a run and sends their events.
type runState struct {
	emit          func(Event) error
	taskID, runID string
	started       time.Time
	steps         int
}

func (r *runState) send(name string, data map[string]any) error {
	return r.emit(Event{"event": name, "task_id": r.taskID, "workflow_run_id": r.runID, "data": data})
}

// node runs one step between its node_started and node_finished events.
func (r *runState) node(id, typ, title, predecessor string, work func() (map[string]any, error)) error {
	r.steps++
	execID := uuid.NewString()
	start := time.Now()
	var pred any
	if predecessor != "" {
		pred = predecessor
	}
	base := map[string]any{"id": execID, "node_id": id, "node_type": typ, "title": title, "index": r.steps,
		"predecessor_node_id": pred, "inputs": map[string]any{}, "created_at": start.Unix()}
	if err := r.send("node_started", base); err != nil {
		return err
	}
	outputs, werr := work()
	done := map[string]any{}
	for k, v := range base {
		done[k] = v
	}
	done["outputs"], done["status"], done["error"] = outputs, "succeeded", nil
	if werr != nil {
		done["status"], done["error"] = "failed", apperr.From(werr).Message
	}
	done["elapsed_time"], done["execution_metadata"], done["finished_at"] = time.Since(start).Seconds(), map[string]any{}, time.Now().Unix()
	if err := r.send("node_finished", done); err != nil {
		return err
	}
	return werr
}

// defaultSettings are the chunker settings of the default pipeline: those
// of the knowledge base's latest document, else automatic splitting into
// plain text chunks; the indexing technique is the knowledge base's, or
// high_quality for one that has none yet.
func (s *Service) defaultSettings(ctx context.Context, ds *models.Dataset) (indexing.Settings, error) {
	technique := knowledge.TechniqueHighQuality
	if ds.IndexingTechnique != nil && *ds.IndexingTechnique != "" {
		technique = *ds.IndexingTechnique
	}
	form := indexing.FormText
	rule := textsplit.ProcessRule{Mode: textsplit.ModeAutomatic}
	var last models.Document
	err := s.db.WithContext(ctx).Where("dataset_id = ?", ds.ID).Order("created_at DESC, position DESC").Limit(1).Take(&last).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
	case err != nil:
		return indexing.Settings{}, err
	default:
		form = last.DocForm
		if err := json.Unmarshal([]byte(last.ProcessRule), &rule); err != nil {
			return indexing.Settings{}, fmt.Errorf("document %s: stored process rule: %w", last.ID, err)
		}
	}
	return indexing.Settings{IndexingTechnique: &technique, DocForm: &form, ProcessRule: &rule}, nil
}

// read turns one source of a run into a document upload.
func (s *Service) read(ctx context.Context, typ string, i int, src map[string]any) (indexing.Upload, error) {
	switch typ {
	case TypeLocalFile:
		ref, _ := src["reference"].(string)
		if strings.TrimSpace(ref) == "" {
			return indexing.Upload{}, apperr.InvalidParam("datasource_info_list[%d].reference: the id of an uploaded file is required.", i)
		}
		f, err := s.files.Get(ctx, ref)
		if err != nil {
			return indexing.Upload{}, err
		}
		p, err := s.files.Path(f)
		if err != nil {
			return indexing.Upload{}, err
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return indexing.Upload{}, apperr.Internal(fmt.Errorf("read pipeline file %s: %w", f.ID, err))
		}
		name := f.Name
		if n, _ := src["name"].(string); strings.TrimSpace(n) != "" && path.Ext(n) == path.Ext(f.Name) {
			name = n
		}
		return indexing.Upload{Name: name, MimeType: f.MimeType, Body: strings.NewReader(string(body))}, nil
	case TypeWebsiteCrawl:
		raw, _ := src["url"].(string)
		page, err := s.fetch(ctx, raw)
		if err != nil {
			return indexing.Upload{}, apperr.InvalidParam("datasource_info_list[%d].url: %s", i, apperr.From(err).Message)
		}
		name := page.title
		if t, _ := src["title"].(string); strings.TrimSpace(t) != "" {
			name = t
		}
		return indexing.Upload{Name: safeName(name) + page.ext, MimeType: page.mimeType, Body: strings.NewReader(string(page.body))}, nil
	}
	return indexing.Upload{}, apperr.InvalidParam("datasource_type %q is not supported.", typ)
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
