package documents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	appdb "appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/textsplit"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/docparse"
	"appkb/models"
)

// MetadataValue is one custom metadata value of a document.
type MetadataValue struct {
	ID    string  `json:"id"`
	Name  string  `json:"name"`
	Type  string  `json:"type"`
	Value *string `json:"value"`
}

// DocumentState is what a document shows alike in lists and in its
// detail: its name, creator, progress and counts.
type DocumentState struct {
	Name           string  `json:"name"`
	CreatedFrom    string  `json:"created_from"`
	CreatedBy      string  `json:"created_by"`
	CreatedAt      int64   `json:"created_at"`
	Tokens         int     `json:"tokens"`
	IndexingStatus string  `json:"indexing_status"`
	Error          *string `json:"error"`
	Enabled        bool    `json:"enabled"`
	DisabledAt     *int64  `json:"disabled_at"`
	DisabledBy     *string `json:"disabled_by"`
	Archived       bool    `json:"archived"`
	DisplayStatus  string  `json:"display_status"`
	WordCount      int     `json:"word_count"`
	HitCount       int     `json:"hit_count"`
	DocForm        string  `json:"doc_form"`
}

// Document is a document as lists and write operations show it; the JSON
// names are the API's and every key is always present.
type Document struct {
	ID                   string         `json:"id"`
	Position             int            `json:"position"`
	DataSourceType       string         `json:"data_source_type"`
	DataSourceInfo       map[string]any `json:"data_source_info"`
	DataSourceDetailDict map[string]any `json:"data_source_detail_dict"`
	DatasetProcessRuleID string         `json:"dataset_process_rule_id"`
	DocumentState
	DocMetadata        []MetadataValue `json:"doc_metadata"`
	SummaryIndexStatus *string         `json:"summary_index_status"`
	NeedSummary        bool            `json:"need_summary"`
}

// Created is the answer to creating or updating a document.
type Created struct {
	Document Document `json:"document"`
	Batch    string   `json:"batch"`
}

// DocumentPage is one page of documents.
type DocumentPage struct {
	Data    []Document `json:"data"`
	HasMore bool       `json:"has_more"`
	Limit   int        `json:"limit"`
	Total   int        `json:"total"`
	Page    int        `json:"page"`
}

// Settings are the processing settings of a create or update call; nil
// means not given.
type Settings struct {
	IndexingTechnique      *string
	DocForm                *string
	DocLanguage            *string
	ProcessRule            *textsplit.ProcessRule
	RetrievalModel         *datasets.RetrievalModel
	EmbeddingModel         *string
	EmbeddingModelProvider *string
}

// FileSettings is the JSON of the `data` field of file uploads.
type FileSettings struct {
	IndexingTechnique      *string                  `json:"indexing_technique"`
	DocForm                *string                  `json:"doc_form"`
	DocLanguage            *string                  `json:"doc_language"`
	ProcessRule            *textsplit.ProcessRule   `json:"process_rule"`
	RetrievalModel         *datasets.RetrievalModel `json:"retrieval_model"`
	EmbeddingModel         *string                  `json:"embedding_model"`
	EmbeddingModelProvider *string                  `json:"embedding_model_provider"`
}

// Settings converts the decoded `data` field.
func (f FileSettings) Settings() Settings {
	return Settings{
		IndexingTechnique: f.IndexingTechnique, DocForm: f.DocForm, DocLanguage: f.DocLanguage,
		ProcessRule: f.ProcessRule, RetrievalModel: f.RetrievalModel,
		EmbeddingModel: f.EmbeddingModel, EmbeddingModelProvider: f.EmbeddingModelProvider,
	}
}

// ParseFileSettings decodes the `data` field of an upload; "" is no settings.
func ParseFileSettings(data string) (Settings, error) {
	var fs FileSettings
	if strings.TrimSpace(data) == "" {
		return Settings{}, nil
	}
	if err := json.Unmarshal([]byte(data), &fs); err != nil {
		return Settings{}, apperr.InvalidParam("data must be a JSON object of processing settings: %s", err)
	}
	return fs.Settings(), nil
}

// Upload is a file sent to create or update a document.
type Upload struct {
	Name     string
	MimeType string
	Body     io.Reader
}

// displayStatus combines indexing stage and state the way Dify shows them.
func displayStatus(d *models.Document) string {
	switch d.IndexingStatus {
	case StatusWaiting:
		return "queuing"
	case StatusParsing, StatusCleaning, StatusSplitting, StatusIndexing:
		return "indexing"
	case StatusPaused:
		return "paused"
	case StatusError:
		return "error"
	}
	switch {
	case d.Archived:
		return "archived"
	case !d.Enabled:
		return "disabled"
	}
	return "available"
}

// statusFilter is the SQL condition for a display status.
func statusFilter(q *gorm.DB, status string) (*gorm.DB, error) {
	switch status {
	case "":
		return q, nil
	case "queuing":
		return q.Where("indexing_status = ?", StatusWaiting), nil
	case "indexing":
		return q.Where("indexing_status IN ?", []string{StatusParsing, StatusCleaning, StatusSplitting, StatusIndexing}), nil
	case "paused", "error":
		return q.Where("indexing_status = ?", status), nil
	case "available":
		return q.Where("indexing_status = ? AND enabled AND NOT archived", StatusCompleted), nil
	case "disabled":
		return q.Where("indexing_status = ? AND NOT enabled AND NOT archived", StatusCompleted), nil
	case "archived":
		return q.Where("indexing_status = ? AND archived", StatusCompleted), nil
	}
	return nil, apperr.InvalidParam("status must be one of queuing, indexing, paused, error, available, disabled, archived.")
}

func uploadFileInfo(d *models.Document) map[string]any {
	return map[string]any{
		"id":         d.FileID,
		"name":       d.FileName,
		"size":       d.FileSize,
		"extension":  d.FileExtension,
		"mime_type":  d.FileMimeType,
		"created_by": d.CreatedBy,
		"created_at": d.CreatedAt.Unix(),
	}
}

// metadataValues returns the values of the document's custom fields that
// still exist, in the fields' order.
func metadataValues(d *models.Document, fields []models.DatasetMetadataField) []MetadataValue {
	var stored map[string]any
	_ = json.Unmarshal([]byte(d.DocMetadata), &stored)
	out := []MetadataValue{}
	for _, f := range fields {
		v, ok := stored[f.ID]
		if !ok || v == nil {
			continue
		}
		text := fmt.Sprint(v)
		out = append(out, MetadataValue{ID: f.ID, Name: f.Name, Type: f.Type, Value: &text})
	}
	return out
}

func (s *Service) fields(ctx context.Context, datasetID string) ([]models.DatasetMetadataField, error) {
	var fields []models.DatasetMetadataField
	err := s.db.WithContext(ctx).Where("dataset_id = ?", datasetID).Order("created_at, id").Find(&fields).Error
	return fields, err
}

// stateOf is the DocumentState of a stored document; hits is its chunks'
// hit count, which only the detail adds up.
func stateOf(d *models.Document, hits int) DocumentState {
	return DocumentState{Name: d.Name, CreatedFrom: "api", CreatedBy: d.CreatedBy, CreatedAt: d.CreatedAt.Unix(),
		Tokens: d.Tokens, IndexingStatus: d.IndexingStatus, Error: d.Error, Enabled: d.Enabled,
		DisabledAt: unixPtr(d.DisabledAt), DisabledBy: d.DisabledBy, Archived: d.Archived,
		DisplayStatus: displayStatus(d), WordCount: d.WordCount, HitCount: hits, DocForm: d.DocForm}
}

func view(d *models.Document, fields []models.DatasetMetadataField) Document {
	return Document{
		ID:                   d.ID,
		Position:             d.Position,
		DataSourceType:       d.DataSourceType,
		DataSourceInfo:       map[string]any{"upload_file_id": d.FileID},
		DataSourceDetailDict: map[string]any{"upload_file": uploadFileInfo(d)},
		DatasetProcessRuleID: d.ProcessRuleID,
		DocumentState:        stateOf(d, 0),
		DocMetadata:          metadataValues(d, fields),
	}
}

func (s *Service) viewOne(ctx context.Context, d *models.Document) (Document, error) {
	fields, err := s.fields(ctx, d.DatasetID)
	if err != nil {
		return Document{}, err
	}
	return view(d, fields), nil
}

// resolved is what a create or update call works out from its settings.
type resolved struct {
	rule     textsplit.ProcessRule
	docForm  string
	language string
}

// resolve checks settings against the knowledge base, fills the defaults,
// and records on the knowledge base what its first document decides
// (indexing technique, embedding model, search settings).
func (s *Service) resolve(ctx context.Context, actor datasets.Actor, ds *models.Dataset, st Settings, prev *models.Document) (*resolved, error) {
	out := &resolved{docForm: FormText, language: "English"}
	if prev != nil {
		out.docForm, out.language = prev.DocForm, prev.DocLanguage
		if err := json.Unmarshal([]byte(prev.ProcessRule), &out.rule); err != nil {
			return nil, err
		}
	} else {
		out.rule = textsplit.ProcessRule{Mode: textsplit.ModeAutomatic}
	}
	if st.ProcessRule != nil {
		out.rule = *st.ProcessRule
	}
	if st.DocForm != nil && *st.DocForm != "" {
		out.docForm = *st.DocForm
	}
	if !slices.Contains([]string{FormText, FormHierarchical, FormQA}, out.docForm) {
		return nil, apperr.InvalidParam("doc_form must be text_model, hierarchical_model or qa_model.")
	}
	if st.DocLanguage != nil && *st.DocLanguage != "" {
		out.language = *st.DocLanguage
	}
	switch {
	case out.rule.Mode == textsplit.ModeHierarchical && out.docForm == FormQA:
		return nil, apperr.InvalidParam("process_rule.mode hierarchical cannot be used with doc_form qa_model.")
	case out.rule.Mode == textsplit.ModeHierarchical:
		out.docForm = FormHierarchical
	case out.docForm == FormHierarchical && st.ProcessRule == nil && (prev == nil || prev.DocForm != FormHierarchical):
		out.rule = textsplit.ProcessRule{Mode: textsplit.ModeHierarchical}
	case out.docForm == FormHierarchical:
		return nil, apperr.InvalidParam("doc_form hierarchical_model needs process_rule.mode hierarchical.")
	}
	cfg, err := out.rule.Resolve()
	if err != nil {
		var re *textsplit.RuleError
		if errors.As(err, &re) {
			return nil, apperr.InvalidParam("%s", re.Error())
		}
		return nil, err
	}
	out.rule = cfg.Rule()
	if ds.DocForm != nil && *ds.DocForm != out.docForm && prev == nil {
		var n int64
		if err := s.db.WithContext(ctx).Model(&models.Document{}).Where("dataset_id = ?", ds.ID).Count(&n).Error; err != nil {
			return nil, err
		}
		if n > 0 {
			return nil, apperr.InvalidParam("doc_form %s differs from the knowledge base's doc_form %s.", out.docForm, *ds.DocForm)
		}
	}

	// What the knowledge base takes from this call.
	up := datasets.UpdateParams{RetrievalModel: st.RetrievalModel}
	if ds.IndexingTechnique == nil {
		if st.IndexingTechnique == nil || *st.IndexingTechnique == "" {
			return nil, apperr.InvalidParam("indexing_technique is required for the first document of a knowledge base.")
		}
		up.IndexingTechnique = st.IndexingTechnique
		up.EmbeddingModel, up.EmbeddingModelProvider = st.EmbeddingModel, st.EmbeddingModelProvider
	}
	if up.IndexingTechnique != nil || up.RetrievalModel != nil || up.EmbeddingModel != nil || up.EmbeddingModelProvider != nil {
		if _, err := s.kb.UpdateDataset(ctx, actor, ds.ID, up); err != nil {
			return nil, err
		}
		fresh, err := s.kb.FindDataset(ctx, actor, ds.ID)
		if err != nil {
			return nil, err
		}
		*ds = *fresh
	}
	if _, _, err := s.embedder(ds); err != nil {
		return nil, err
	}
	return out, nil
}

// CreateFromText adds a document whose content is text and queues it.
func (s *Service) CreateFromText(ctx context.Context, actor datasets.Actor, datasetID, name, text string, st Settings) (*Created, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, apperr.InvalidParam("name must not be empty.")
	}
	up := Upload{Name: name + ".txt", MimeType: "text/plain", Body: strings.NewReader(text)}
	return s.create(ctx, actor, datasetID, name, up, st)
}

// CreateFromFile adds a document from an uploaded file and queues it. An
// unsupported file type fails with 415 unsupported_file_type, a file over
// the size limit with 413 file_too_large.
func (s *Service) CreateFromFile(ctx context.Context, actor datasets.Actor, datasetID string, up Upload, st Settings) (*Created, error) {
	return s.create(ctx, actor, datasetID, up.Name, up, st)
}

func (s *Service) create(ctx context.Context, actor datasets.Actor, datasetID, name string, up Upload, st Settings) (*Created, error) {
	ds, err := s.kb.FindDataset(ctx, actor, datasetID)
	if err != nil {
		return nil, err
	}
	if err := checkUploadName(up.Name); err != nil {
		return nil, err
	}
	res, err := s.resolve(ctx, actor, ds, st, nil)
	if err != nil {
		return nil, err
	}
	doc := models.Document{ID: uuid.NewString(), DatasetID: ds.ID, Name: name, CreatedBy: actor.KeyID}
	key := fileKey(ds.ID, doc.ID)
	if err := s.storeFile(ctx, &doc, up, key); err != nil {
		return nil, err
	}
	ruleJSON, _ := json.Marshal(res.rule)
	doc.DataSourceType = "upload_file"
	doc.ProcessRule = string(ruleJSON)
	doc.ProcessRuleID = uuid.NewString()
	doc.DocForm = res.docForm
	doc.DocLanguage = res.language
	doc.IndexingStatus = StatusWaiting
	doc.Enabled = true
	doc.Batch = newBatch()
	doc.DocMetadata = "{}"
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var maxPos int
		if err := tx.Raw(`SELECT COALESCE(MAX(position), 0) FROM documents WHERE dataset_id = ?`, ds.ID).Scan(&maxPos).Error; err != nil {
			return err
		}
		doc.Position = maxPos + 1
		if err := tx.Create(&doc).Error; err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE datasets SET doc_form = COALESCE(doc_form, ?), data_source_type = COALESCE(data_source_type, 'upload_file') WHERE id = ?`,
			doc.DocForm, ds.ID).Error; err != nil {
			return err
		}
		return enqueue(tx, doc.ID)
	})
	if err != nil {
		s.removeFile(key)
		return nil, err
	}
	notify()
	v, err := s.viewOne(ctx, &doc)
	if err != nil {
		return nil, err
	}
	return &Created{Document: v, Batch: doc.Batch}, nil
}

func newBatch() string {
	return time.Now().UTC().Format("20060102150405") + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
}

func checkUploadName(name string) error {
	if strings.TrimSpace(name) == "" {
		return apperr.Fail(apperr.CodeFilenameNotExists, "The uploaded file has no file name.")
	}
	if !docparse.Supported(docparse.Ext(name)) {
		return apperr.Fail(apperr.CodeUnsupportedFileType,
			"Files of type %q are not supported; use one of %s.", filepath.Ext(name), strings.Join(docparse.Extensions(), ", "))
	}
	return nil
}

// storeFile writes the upload to the blob store under key, replacing what
// was there only once the whole upload was read and found within the size
// limit, and fills the file fields of doc.
func (s *Service) storeFile(ctx context.Context, doc *models.Document, up Upload, key string) error {
	if err := checkUploadName(up.Name); err != nil {
		return err
	}
	limit := docparse.DefaultLimits.MaxFileSize
	n, err := s.blobs.Put(ctx, key, &cappedReader{r: up.Body, left: limit})
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.Is(err, errFileTooLarge):
			return apperr.Fail(apperr.CodeFileTooLarge,
				"The file is larger than %d MB.", limit>>20)
		case errors.As(err, &tooLarge):
			return apperr.Fail(apperr.CodeFileTooLarge, "The file is too large.")
		}
		return err
	}
	ext := docparse.Ext(up.Name)
	mt := up.MimeType
	if mt == "" || mt == "application/octet-stream" {
		if guess := mime.TypeByExtension("." + ext); guess != "" {
			mt = guess
		}
	}
	doc.FileID = uuid.NewString()
	doc.FileName = up.Name
	doc.FileSize = n
	doc.FileExtension = ext
	doc.FileMimeType = mt
	return nil
}

// ListParams select a page of documents.
type ListParams struct {
	Page, Limit int
	Keyword     string
	Status      string // a display status, "" for all
}

// ListDocuments returns a page of a knowledge base's documents, newest
// first.
func (s *Service) ListDocuments(ctx context.Context, actor datasets.Actor, datasetID string, p ListParams) (*DocumentPage, error) {
	if _, err := s.kb.FindDataset(ctx, actor, datasetID); err != nil {
		return nil, err
	}
	page, limit, err := pageArgs(p.Page, p.Limit, 20)
	if err != nil {
		return nil, err
	}
	query := func() (*gorm.DB, error) {
		q := s.db.WithContext(ctx).Model(&models.Document{}).Where("dataset_id = ?", datasetID)
		if kw := strings.TrimSpace(p.Keyword); kw != "" {
			q = q.Where(appdb.ContainsCI(s.db, "name"), "%"+escapeLike(kw)+"%")
		}
		return statusFilter(q, p.Status)
	}
	q, err := query()
	if err != nil {
		return nil, err
	}
	var total int64
	if err := q.Count(&total).Error; err != nil {
		return nil, err
	}
	q, _ = query()
	var rows []models.Document
	if err := q.Order("position DESC").Offset((page - 1) * limit).Limit(limit).Find(&rows).Error; err != nil {
		return nil, err
	}
	fields, err := s.fields(ctx, datasetID)
	if err != nil {
		return nil, err
	}
	out := &DocumentPage{Data: []Document{}, HasMore: int64(page*limit) < total, Limit: limit, Total: int(total), Page: page}
	for i := range rows {
		out.Data = append(out.Data, view(&rows[i], fields))
	}
	return out, nil
}

// DocumentDetail is the full view of one document.
type DocumentDetail struct {
	ID                   string         `json:"id"`
	Position             int            `json:"position"`
	DataSourceType       string         `json:"data_source_type"`
	DataSourceInfo       map[string]any `json:"data_source_info"`
	DatasetProcessRuleID string         `json:"dataset_process_rule_id"`
	DatasetProcessRule   map[string]any `json:"dataset_process_rule"`
	DocumentProcessRule  map[string]any `json:"document_process_rule"`
	DocumentState
	DocLanguage          string           `json:"doc_language"`
	DocType              *string          `json:"doc_type"`
	DocMetadata          *[]MetadataValue `json:"doc_metadata,omitempty"`
	CompletedAt          *int64           `json:"completed_at"`
	UpdatedAt            *int64           `json:"updated_at"`
	IndexingLatency      *float64         `json:"indexing_latency"`
	SegmentCount         int              `json:"segment_count"`
	AverageSegmentLength float64          `json:"average_segment_length"`
	SummaryIndexStatus   *string          `json:"summary_index_status"`
	NeedSummary          bool             `json:"need_summary"`
}

// MetadataOnly is the answer of GetDocument with metadata=only.
type MetadataOnly struct {
	ID          string          `json:"id"`
	DocType     *string         `json:"doc_type"`
	DocMetadata []MetadataValue `json:"doc_metadata"`
}

// GetDocument returns one document: metadata "all" (or "") gives every
// field, "without" leaves out doc_metadata, "only" returns a *MetadataOnly.
func (s *Service) GetDocument(ctx context.Context, actor datasets.Actor, datasetID, documentID, metadata string) (any, error) {
	if !slices.Contains([]string{"", "all", "only", "without"}, metadata) {
		return nil, apperr.Fail(apperr.CodeInvalidMetadata, "metadata must be all, only or without.")
	}
	_, d, err := s.findDocument(ctx, actor, datasetID, documentID)
	if err != nil {
		return nil, err
	}
	fields, err := s.fields(ctx, datasetID)
	if err != nil {
		return nil, err
	}
	values := metadataValues(d, fields)
	if metadata == "only" {
		return &MetadataOnly{ID: d.ID, DocMetadata: values}, nil
	}
	var agg struct {
		N    int
		Len  float64
		Hits int
	}
	if err := s.db.WithContext(ctx).Raw(`SELECT COUNT(*) AS n, COALESCE(AVG(LENGTH(content)), 0) AS len, COALESCE(SUM(hit_count), 0) AS hits
		FROM segments WHERE document_id = ?`, d.ID).Scan(&agg).Error; err != nil {
		return nil, err
	}
	var rule map[string]any
	_ = json.Unmarshal([]byte(d.ProcessRule), &rule)
	updated := d.UpdatedAt.Unix()
	out := &DocumentDetail{
		ID:                   d.ID,
		Position:             d.Position,
		DataSourceType:       d.DataSourceType,
		DataSourceInfo:       map[string]any{"upload_file": uploadFileInfo(d)},
		DatasetProcessRuleID: d.ProcessRuleID,
		DatasetProcessRule:   rule,
		DocumentProcessRule:  rule,
		DocumentState:        stateOf(d, agg.Hits),
		DocLanguage:          d.DocLanguage,
		CompletedAt:          unixPtr(d.CompletedAt),
		UpdatedAt:            &updated,
		SegmentCount:         agg.N,
		AverageSegmentLength: agg.Len,
	}
	if d.CompletedAt != nil && d.ProcessingStartedAt != nil {
		lat := d.CompletedAt.Sub(*d.ProcessingStartedAt).Seconds()
		out.IndexingLatency = &lat
	}
	if metadata != "without" {
		out.DocMetadata = &values
	}
	return out, nil
}

// DeleteDocument removes a document with its chunks, index entries and
// stored file. Archived documents fail with 403 archived_document_immutable.
func (s *Service) DeleteDocument(ctx context.Context, actor datasets.Actor, datasetID, documentID string) error {
	_, d, err := s.findDocument(ctx, actor, datasetID, documentID)
	if err != nil {
		return err
	}
	if d.Archived {
		return errArchived()
	}
	if err := s.db.WithContext(ctx).Delete(&models.Document{}, "id = ?", d.ID).Error; err != nil {
		return err
	}
	s.removeFile(fileKey(datasetID, d.ID))
	return nil
}

// UpdateParams change a document; nil fields stay as they are.
type UpdateParams struct {
	Name     *string
	Text     *string
	File     *Upload
	Settings Settings
}

// UpdateDocument renames a document and/or replaces its content or
// settings. New content or settings queue it again under a new batch.
func (s *Service) UpdateDocument(ctx context.Context, actor datasets.Actor, datasetID, documentID string, p UpdateParams) (*Created, error) {
	ds, d, err := s.findDocument(ctx, actor, datasetID, documentID)
	if err != nil {
		return nil, err
	}
	if d.Archived {
		return nil, errArchived()
	}
	if p.Text != nil && p.Name == nil {
		return nil, apperr.InvalidParam("name is required when text is given.")
	}
	st := p.Settings
	st.IndexingTechnique = nil // only creation decides it
	res, err := s.resolve(ctx, actor, ds, st, d)
	if err != nil {
		return nil, err
	}
	if p.Name != nil {
		name := strings.TrimSpace(*p.Name)
		if name == "" {
			return nil, apperr.InvalidParam("name must not be empty.")
		}
		d.Name = name
	}
	var up *Upload
	switch {
	case p.File != nil:
		up = p.File
		if p.Name == nil {
			d.Name = up.Name
		}
	case p.Text != nil:
		up = &Upload{Name: d.Name + ".txt", MimeType: "text/plain", Body: strings.NewReader(*p.Text)}
	}
	if up != nil {
		// A failed upload leaves the current file as it is (see storeFile).
		if err := s.storeFile(ctx, d, *up, fileKey(datasetID, d.ID)); err != nil {
			return nil, err
		}
	}
	ruleJSON, _ := json.Marshal(res.rule)
	reindex := up != nil || string(ruleJSON) != d.ProcessRule || res.docForm != d.DocForm
	if string(ruleJSON) != d.ProcessRule || d.ProcessRuleID == "" {
		d.ProcessRuleID = uuid.NewString()
	}
	d.ProcessRule, d.DocForm, d.DocLanguage = string(ruleJSON), res.docForm, res.language
	if reindex {
		d.Batch = newBatch()
		d.IndexingStatus = StatusWaiting
		d.Error = nil
		d.Content = nil
		d.CompletedSegments, d.TotalSegments = 0, 0
		d.ProcessingStartedAt, d.ParsingCompletedAt, d.CleaningCompletedAt = nil, nil, nil
		d.SplittingCompletedAt, d.CompletedAt, d.StoppedAt, d.PausedAt = nil, nil, nil, nil
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Save(d).Error; err != nil {
			return err
		}
		if reindex {
			return enqueue(tx, d.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if reindex {
		notify()
	}
	v, err := s.viewOne(ctx, d)
	if err != nil {
		return nil, err
	}
	return &Created{Document: v, Batch: d.Batch}, nil
}

// errFileTooLarge ends the reading of an upload over the size limit.
var errFileTooLarge = errors.New("file over the size limit")

// cappedReader reads r and fails with errFileTooLarge once it yields more
// than left bytes, so that a store never keeps an upload over the limit.
type cappedReader struct {
	r    io.Reader
	left int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, errFileTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, errFileTooLarge
	}
	return n, err
}
