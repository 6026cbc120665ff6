package documents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	appdb "appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/textsplit"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// ChildChunk is a child chunk as the API shows it.
type ChildChunk struct {
	ID        string `json:"id"`
	SegmentID string `json:"segment_id"`
	Content   string `json:"content"`
	Position  int    `json:"position"`
	WordCount int    `json:"word_count"`
	Type      string `json:"type"`
	CreatedAt int64  `json:"created_at"`
	UpdatedAt int64  `json:"updated_at"`
}

// Segment is a chunk as the API shows it.
type Segment struct {
	ID            string       `json:"id"`
	Position      int          `json:"position"`
	DocumentID    string       `json:"document_id"`
	Content       string       `json:"content"`
	SignContent   string       `json:"sign_content"`
	Answer        string       `json:"answer"`
	WordCount     int          `json:"word_count"`
	Tokens        int          `json:"tokens"`
	Keywords      []string     `json:"keywords"`
	IndexNodeID   string       `json:"index_node_id"`
	IndexNodeHash string       `json:"index_node_hash"`
	HitCount      int          `json:"hit_count"`
	Enabled       bool         `json:"enabled"`
	DisabledAt    *int64       `json:"disabled_at"`
	DisabledBy    *string      `json:"disabled_by"`
	Status        string       `json:"status"`
	CreatedBy     string       `json:"created_by"`
	CreatedAt     int64        `json:"created_at"`
	UpdatedAt     int64        `json:"updated_at"`
	UpdatedBy     *string      `json:"updated_by"`
	IndexingAt    *int64       `json:"indexing_at"`
	CompletedAt   *int64       `json:"completed_at"`
	Error         *string      `json:"error"`
	StoppedAt     *int64       `json:"stopped_at"`
	ChildChunks   []ChildChunk `json:"child_chunks"`
	Attachments   []any        `json:"attachments"`
	Summary       *string      `json:"summary"`
}

// SegmentList is a page of chunks, or the chunks just created.
type SegmentList struct {
	Data    []Segment `json:"data"`
	DocForm string    `json:"doc_form"`
	Total   int       `json:"total"`
	HasMore bool      `json:"has_more"`
	Limit   int       `json:"limit"`
	Page    int       `json:"page"`
}

// SegmentDetail is one chunk with its document's form.
type SegmentDetail struct {
	Data    Segment `json:"data"`
	DocForm string  `json:"doc_form"`
}

// ChildChunkPage is a page of child chunks.
type ChildChunkPage struct {
	Data       []ChildChunk `json:"data"`
	Total      int          `json:"total"`
	TotalPages int          `json:"total_pages"`
	Page       int          `json:"page"`
	Limit      int          `json:"limit"`
}

func childView(c *models.ChildChunk) ChildChunk {
	return ChildChunk{ID: c.ID, SegmentID: c.SegmentID, Content: c.Content, Position: c.Position,
		WordCount: c.WordCount, Type: c.Type, CreatedAt: c.CreatedAt.Unix(), UpdatedAt: c.UpdatedAt.Unix()}
}

// SegmentView is a stored chunk as the API shows it, without child chunks.
func SegmentView(s *models.Segment) Segment { return segmentView(s, nil) }

func segmentView(s *models.Segment, children []models.ChildChunk) Segment {
	var kw []string
	_ = json.Unmarshal([]byte(s.Keywords), &kw)
	if kw == nil {
		kw = []string{}
	}
	out := Segment{
		ID: s.ID, Position: s.Position, DocumentID: s.DocumentID, Content: s.Content, SignContent: s.Content,
		Answer: s.Answer, WordCount: s.WordCount, Tokens: s.Tokens, Keywords: kw, IndexNodeID: s.IndexNodeID,
		IndexNodeHash: s.IndexNodeHash, HitCount: s.HitCount, Enabled: s.Enabled, DisabledAt: unixPtr(s.DisabledAt),
		DisabledBy: s.DisabledBy, Status: s.Status, CreatedBy: s.CreatedBy, CreatedAt: s.CreatedAt.Unix(),
		UpdatedAt: s.UpdatedAt.Unix(), UpdatedBy: cmp.Or(s.UpdatedBy, &s.CreatedBy), IndexingAt: unixPtr(s.IndexingAt),
		CompletedAt: unixPtr(s.CompletedAt), Error: s.Error, ChildChunks: []ChildChunk{}, Attachments: []any{},
	}
	for i := range children {
		if children[i].SegmentID == s.ID {
			out.ChildChunks = append(out.ChildChunks, childView(&children[i]))
		}
	}
	return out
}

func (s *Service) views(ctx context.Context, segs []models.Segment) ([]Segment, error) {
	out := make([]Segment, 0, len(segs))
	if len(segs) == 0 {
		return out, nil
	}
	ids := make([]string, len(segs))
	for i := range segs {
		ids[i] = segs[i].ID
	}
	var children []models.ChildChunk
	if err := s.db.WithContext(ctx).Where("segment_id IN ?", ids).Order("position").Find(&children).Error; err != nil {
		return nil, err
	}
	for i := range segs {
		out = append(out, segmentView(&segs[i], children))
	}
	return out, nil
}

// writableDocument loads a document whose chunks may be changed: not
// archived (403) and done indexing (404, as Dify answers).
func (s *Service) writableDocument(ctx context.Context, actor datasets.Actor, datasetID, documentID string) (*models.Dataset, *models.Document, error) {
	ds, d, err := s.findDocument(ctx, actor, datasetID, documentID)
	if err != nil {
		return nil, nil, err
	}
	if d.Archived {
		return nil, nil, errArchived()
	}
	if d.IndexingStatus != StatusCompleted {
		return nil, nil, apperr.NotFound("Document %s is not completed.", documentID)
	}
	return ds, d, nil
}

func (s *Service) findSegment(ctx context.Context, documentID, segmentID string) (*models.Segment, error) {
	var seg models.Segment
	err := s.db.WithContext(ctx).Take(&seg, "id = ? AND document_id = ?", segmentID, documentID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, apperr.NotFound("Segment %s not found.", segmentID)
	}
	return &seg, err
}

// NewSegment is a chunk to add.
type NewSegment struct {
	Content  string
	Answer   *string
	Keywords []string
}

// CreateSegments adds chunks at the end of a document and indexes them.
// Everything slow (token counts, keywords, child chunks, vectors) is worked
// out before the write transaction, which then only inserts rows.
func (s *Service) CreateSegments(ctx context.Context, actor datasets.Actor, datasetID, documentID string, in []NewSegment) (*SegmentList, error) {
	ds, d, err := s.writableDocument(ctx, actor, datasetID, documentID)
	if err != nil {
		return nil, err
	}
	if len(in) == 0 {
		return nil, apperr.InvalidParam("segments must not be empty.")
	}
	embed, key, err := s.embedder(ds)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	made := make([]models.Segment, 0, len(in))
	for i, n := range in {
		if strings.TrimSpace(n.Content) == "" {
			return nil, apperr.InvalidParam("segments[%d].content must not be empty.", i)
		}
		answer := ""
		if n.Answer != nil {
			answer = *n.Answer
		}
		if d.DocForm == FormQA && strings.TrimSpace(answer) == "" {
			return nil, apperr.InvalidParam("segments[%d].answer is required for Q&A documents.", i)
		}
		seg := models.Segment{
			ID: uuid.NewString(), DatasetID: d.DatasetID, DocumentID: d.ID,
			Content: n.Content, Answer: answer, Enabled: true, Status: StatusCompleted, CreatedBy: actor.KeyID,
			CreatedAt: now, UpdatedAt: now, IndexingAt: &now, CompletedAt: &now,
		}
		deriveSegment(&seg, n.Keywords)
		made = append(made, seg)
	}
	rows, err := s.indexRows(ctx, d, made, true, d.DocForm == FormHierarchical, embed, key)
	if err != nil {
		return nil, err
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var pos int
		if err := tx.Raw(`SELECT COALESCE(MAX(position), 0) FROM segments WHERE document_id = ?`, d.ID).Scan(&pos).Error; err != nil {
			return err
		}
		for i := range made {
			made[i].Position = pos + i + 1
		}
		if err := tx.CreateInBatches(&made, 200).Error; err != nil {
			return err
		}
		return rows.writeAndCount(tx, d.ID)
	})
	if err != nil {
		return nil, err
	}
	data, err := s.views(ctx, made)
	if err != nil {
		return nil, err
	}
	return &SegmentList{Data: data, DocForm: d.DocForm, Total: len(data), Limit: len(data), Page: 1}, nil
}

// deriveSegment fills the fields of a chunk that follow from its text:
// counts, node id and hash, and keywords (extracted when none are given).
func deriveSegment(seg *models.Segment, keywords []string) {
	seg.WordCount = wordCount(seg.Content) + wordCount(seg.Answer)
	seg.Tokens = llm.CountTokens(seg.Content) + llm.CountTokens(seg.Answer)
	if seg.IndexNodeID == "" {
		seg.IndexNodeID = uuid.NewString()
	}
	seg.IndexNodeHash = hashText(seg.Content)
	if keywords == nil {
		keywords = textsplit.Keywords(seg.Content+"\n"+seg.Answer, 10)
	}
	seg.Keywords = keywordsJSON(keywords)
}

// indexRows works out, outside any transaction, the rows that index some
// chunks of d: with children set, new automatic child chunks (parent-child
// documents); with vectors set, the chunks' own vectors (other documents);
// and the vectors of the new child chunks. All texts go to the embedding
// model in one call. The chunks themselves are not part of the result.
func (s *Service) indexRows(ctx context.Context, d *models.Document, segs []models.Segment, vectors, children bool, embed llm.Embedder, key string) (*built, error) {
	b := &built{}
	type pending struct {
		text, segmentID, nodeID string
		childID                 *string
	}
	var toEmbed []pending
	var cfg textsplit.Config
	if children {
		var err error
		if cfg, err = ruleOf(d); err != nil {
			return nil, err
		}
	}
	now := time.Now().UTC()
	for i := range segs {
		seg := &segs[i]
		if vectors && d.DocForm != FormHierarchical {
			toEmbed = append(toEmbed, pending{text: seg.Content, segmentID: seg.ID, nodeID: seg.IndexNodeID})
		}
		if !children {
			continue
		}
		for _, ch := range cfg.Child.Split(seg.Content) {
			c := models.ChildChunk{ID: uuid.NewString(), SegmentID: seg.ID, DocumentID: d.ID, DatasetID: d.DatasetID,
				Position: ch.Position, Content: ch.Content, WordCount: wordCount(ch.Content), IndexNodeID: uuid.NewString(),
				IndexNodeHash: hashText(ch.Content), Type: ChildAutomatic, CreatedAt: now, UpdatedAt: now}
			b.children = append(b.children, c)
			id := c.ID
			toEmbed = append(toEmbed, pending{text: c.Content, segmentID: seg.ID, childID: &id, nodeID: c.IndexNodeID})
		}
	}
	if embed == nil || len(toEmbed) == 0 {
		return b, nil
	}
	texts := make([]string, len(toEmbed))
	for i, p := range toEmbed {
		texts[i] = p.text
	}
	vecs, err := embedTexts(ctx, embed, texts)
	if err != nil {
		return nil, err
	}
	for i, p := range toEmbed {
		b.vectors = append(b.vectors, models.SegmentEmbedding{NodeID: p.nodeID, Model: key, DatasetID: d.DatasetID,
			SegmentID: p.segmentID, ChildID: p.childID, Dims: len(vecs[i]), Vector: EncodeVector(vecs[i])})
	}
	return b, nil
}

// embedTexts asks the model for one vector per text.
func embedTexts(ctx context.Context, embed llm.Embedder, texts []string) ([][]float32, error) {
	vecs, _, err := embed.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("the embedding model returned %d vectors for %d texts", len(vecs), len(texts))
	}
	return vecs, nil
}

// childVector is the vector row of one child chunk, or nil without an
// embedding model. It calls the model, so it runs before any transaction.
func childVector(ctx context.Context, embed llm.Embedder, key string, c *models.ChildChunk) (*models.SegmentEmbedding, error) {
	if embed == nil {
		return nil, nil
	}
	vecs, err := embedTexts(ctx, embed, []string{c.Content})
	if err != nil {
		return nil, err
	}
	id := c.ID
	return &models.SegmentEmbedding{NodeID: c.IndexNodeID, Model: key, DatasetID: c.DatasetID, SegmentID: c.SegmentID,
		ChildID: &id, Dims: len(vecs[0]), Vector: EncodeVector(vecs[0])}, nil
}

// refreshDocumentCounts recomputes a document's words, tokens and chunk
// counts from its chunks.
func refreshDocumentCounts(tx *gorm.DB, documentID string) error {
	return tx.Exec(`UPDATE documents SET
		word_count = (SELECT COALESCE(SUM(word_count), 0) FROM segments WHERE document_id = documents.id),
		tokens = (SELECT COALESCE(SUM(tokens), 0) FROM segments WHERE document_id = documents.id),
		total_segments = (SELECT COUNT(*) FROM segments WHERE document_id = documents.id),
		completed_segments = (SELECT COUNT(*) FROM segments WHERE document_id = documents.id),
		updated_at = ? WHERE id = ?`, time.Now().UTC(), documentID).Error
}

// SegmentQuery selects a page of chunks.
type SegmentQuery struct {
	Page, Limit int
	Keyword     string
	Status      []string
}

// ListSegments returns a page of a document's chunks in document order.
func (s *Service) ListSegments(ctx context.Context, actor datasets.Actor, datasetID, documentID string, q SegmentQuery) (*SegmentList, error) {
	_, d, err := s.findDocument(ctx, actor, datasetID, documentID)
	if err != nil {
		return nil, err
	}
	page, limit, err := pageArgs(q.Page, q.Limit, 20)
	if err != nil {
		return nil, err
	}
	segs, total, err := pageByPosition[models.Segment](func() *gorm.DB {
		db := s.db.WithContext(ctx).Model(&models.Segment{}).Where("document_id = ?", d.ID)
		if st := cleanIDs(q.Status); len(st) > 0 {
			db = db.Where("status IN ?", st)
		}
		return s.contentContains(db, q.Keyword)
	}, page, limit)
	if err != nil {
		return nil, err
	}
	data, err := s.views(ctx, segs)
	if err != nil {
		return nil, err
	}
	return &SegmentList{Data: data, DocForm: d.DocForm, Total: int(total), HasMore: int64(page*limit) < total, Limit: limit, Page: page}, nil
}

// GetSegment returns one chunk.
func (s *Service) GetSegment(ctx context.Context, actor datasets.Actor, datasetID, documentID, segmentID string) (*SegmentDetail, error) {
	_, d, err := s.findDocument(ctx, actor, datasetID, documentID)
	if err != nil {
		return nil, err
	}
	seg, err := s.findSegment(ctx, d.ID, segmentID)
	if err != nil {
		return nil, err
	}
	v, err := s.views(ctx, []models.Segment{*seg})
	if err != nil {
		return nil, err
	}
	return &SegmentDetail{Data: v[0], DocForm: d.DocForm}, nil
}

// SegmentUpdate changes a chunk; nil fields stay.
type SegmentUpdate struct {
	Content               *string
	Answer                *string
	Keywords              *[]string
	Enabled               *bool
	RegenerateChildChunks bool
}

// UpdateSegment changes a chunk and indexes it again.
func (s *Service) UpdateSegment(ctx context.Context, actor datasets.Actor, datasetID, documentID, segmentID string, u SegmentUpdate) (*SegmentDetail, error) {
	ds, d, err := s.writableDocument(ctx, actor, datasetID, documentID)
	if err != nil {
		return nil, err
	}
	seg, err := s.findSegment(ctx, d.ID, segmentID)
	if err != nil {
		return nil, err
	}
	embed, key, err := s.embedder(ds)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	changed := false
	if u.Content != nil {
		if strings.TrimSpace(*u.Content) == "" {
			return nil, apperr.InvalidParam("segment.content must not be empty.")
		}
		changed = changed || *u.Content != seg.Content
		seg.Content = *u.Content
	}
	if u.Answer != nil {
		changed = changed || *u.Answer != seg.Answer
		seg.Answer = *u.Answer
	}
	if d.DocForm == FormQA && strings.TrimSpace(seg.Answer) == "" {
		return nil, apperr.InvalidParam("segment.answer is required for Q&A documents.")
	}
	var kw []string
	if u.Keywords != nil {
		kw = *u.Keywords
		if kw == nil {
			kw = []string{}
		}
	} else if !changed {
		_ = json.Unmarshal([]byte(seg.Keywords), &kw)
	}
	if u.Enabled != nil && *u.Enabled != seg.Enabled {
		seg.Enabled = *u.Enabled
		if seg.Enabled {
			seg.DisabledAt, seg.DisabledBy = nil, nil
		} else {
			by := actor.KeyID
			seg.DisabledAt, seg.DisabledBy = &now, &by
		}
	}
	deriveSegment(seg, kw)
	by := actor.KeyID
	seg.UpdatedBy, seg.UpdatedAt, seg.IndexingAt, seg.CompletedAt = &by, now, &now, &now
	regenerate := d.DocForm == FormHierarchical && (changed || u.RegenerateChildChunks)
	rows, err := s.indexRows(ctx, d, []models.Segment{*seg}, changed, regenerate, embed, key)
	if err != nil {
		return nil, err
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Save(seg).Error; err != nil {
			return err
		}
		if changed {
			if err := tx.Where("segment_id = ? AND child_id IS NULL", seg.ID).Delete(&models.SegmentEmbedding{}).Error; err != nil {
				return err
			}
		}
		if regenerate {
			// Their vectors go with them (ON DELETE CASCADE).
			if err := tx.Where("segment_id = ?", seg.ID).Delete(&models.ChildChunk{}).Error; err != nil {
				return err
			}
		}
		return rows.writeAndCount(tx, d.ID)
	})
	if err != nil {
		return nil, err
	}
	return s.GetSegment(ctx, actor, datasetID, documentID, segmentID)
}

// DeleteSegment removes a chunk with its child chunks and index entries.
func (s *Service) DeleteSegment(ctx context.Context, actor datasets.Actor, datasetID, documentID, segmentID string) error {
	_, d, err := s.findDocument(ctx, actor, datasetID, documentID)
	if err != nil {
		return err
	}
	if d.Archived {
		return errArchived()
	}
	seg, err := s.findSegment(ctx, d.ID, segmentID)
	if err != nil {
		return err
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Delete(&models.Segment{}, "id = ?", seg.ID).Error; err != nil {
			return err
		}
		return refreshDocumentCounts(tx, d.ID)
	})
}

// parentChunk loads a chunk of a parent-child document for child chunk
// operations.
func (s *Service) parentChunk(ctx context.Context, actor datasets.Actor, datasetID, documentID, segmentID string, write bool) (*models.Dataset, *models.Document, *models.Segment, error) {
	ds, d, err := s.findDocument(ctx, actor, datasetID, documentID)
	if err != nil {
		return nil, nil, nil, err
	}
	if write && d.Archived {
		return nil, nil, nil, errArchived()
	}
	seg, err := s.findSegment(ctx, d.ID, segmentID)
	if err != nil {
		return nil, nil, nil, err
	}
	return ds, d, seg, nil
}

// ListChildChunks returns a page of a chunk's child chunks.
func (s *Service) ListChildChunks(ctx context.Context, actor datasets.Actor, datasetID, documentID, segmentID string, page, limit int, keyword string) (*ChildChunkPage, error) {
	_, _, seg, err := s.parentChunk(ctx, actor, datasetID, documentID, segmentID, false)
	if err != nil {
		return nil, err
	}
	page, limit, err = pageArgs(page, limit, 20)
	if err != nil {
		return nil, err
	}
	rows, total, err := pageByPosition[models.ChildChunk](func() *gorm.DB {
		return s.contentContains(s.db.WithContext(ctx).Model(&models.ChildChunk{}).Where("segment_id = ?", seg.ID), keyword)
	}, page, limit)
	if err != nil {
		return nil, err
	}
	out := &ChildChunkPage{Data: []ChildChunk{}, Total: int(total), TotalPages: (int(total) + limit - 1) / limit, Page: page, Limit: limit}
	for i := range rows {
		out.Data = append(out.Data, childView(&rows[i]))
	}
	return out, nil
}

// contentContains narrows db to the rows whose content holds keyword,
// ignoring case; a blank keyword leaves db as it is.
func (s *Service) contentContains(db *gorm.DB, keyword string) *gorm.DB {
	if kw := strings.TrimSpace(keyword); kw != "" {
		db = db.Where(appdb.ContainsCI(s.db, "content"), "%"+escapeLike(kw)+"%")
	}
	return db
}

// pageByPosition counts the rows query selects and loads page (from 1) of
// limit of them in position order; query is called once for each.
func pageByPosition[T any](query func() *gorm.DB, page, limit int) ([]T, int64, error) {
	var total int64
	if err := query().Count(&total).Error; err != nil {
		return nil, 0, err
	}
	var rows []T
	if err := query().Order("position").Offset((page - 1) * limit).Limit(limit).Find(&rows).Error; err != nil {
		return nil, 0, err
	}
	return rows, total, nil
}

func errNotHierarchical() error {
	return apperr.InvalidParam("Child chunks exist only in parent-child (hierarchical_model) documents.")
}

// CreateChildChunk adds a customized child chunk at the end of a chunk.
func (s *Service) CreateChildChunk(ctx context.Context, actor datasets.Actor, datasetID, documentID, segmentID, content string) (*ChildChunk, error) {
	ds, d, seg, err := s.parentChunk(ctx, actor, datasetID, documentID, segmentID, true)
	if err != nil {
		return nil, err
	}
	if d.DocForm != FormHierarchical {
		return nil, errNotHierarchical()
	}
	if strings.TrimSpace(content) == "" {
		return nil, apperr.InvalidParam("content must not be empty.")
	}
	embed, key, err := s.embedder(ds)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	c := models.ChildChunk{ID: uuid.NewString(), SegmentID: seg.ID, DocumentID: d.ID, DatasetID: d.DatasetID,
		Content: content, WordCount: wordCount(content), IndexNodeID: uuid.NewString(),
		IndexNodeHash: hashText(content), Type: ChildCustomized, CreatedAt: now, UpdatedAt: now}
	vec, err := childVector(ctx, embed, key, &c)
	if err != nil {
		return nil, err
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Raw(`SELECT COALESCE(MAX(position), 0) + 1 FROM child_chunks WHERE segment_id = ?`, seg.ID).Scan(&c.Position).Error; err != nil {
			return err
		}
		if err := tx.Create(&c).Error; err != nil {
			return err
		}
		if vec != nil {
			return tx.Create(vec).Error
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	v := childView(&c)
	return &v, nil
}

func (s *Service) findChild(ctx context.Context, segmentID, childID string) (*models.ChildChunk, error) {
	var c models.ChildChunk
	err := s.db.WithContext(ctx).Take(&c, "id = ? AND segment_id = ?", childID, segmentID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, apperr.NotFound("Child chunk %s not found.", childID)
	}
	return &c, err
}

// UpdateChildChunk replaces a child chunk's text; it becomes customized.
func (s *Service) UpdateChildChunk(ctx context.Context, actor datasets.Actor, datasetID, documentID, segmentID, childID, content string) (*ChildChunk, error) {
	ds, d, seg, err := s.parentChunk(ctx, actor, datasetID, documentID, segmentID, true)
	if err != nil {
		return nil, err
	}
	c, err := s.findChild(ctx, seg.ID, childID)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(content) == "" {
		return nil, apperr.InvalidParam("content must not be empty.")
	}
	embed, key, err := s.embedder(ds)
	if err != nil {
		return nil, err
	}
	c.Content, c.WordCount, c.IndexNodeHash = content, wordCount(content), hashText(content)
	c.Type, c.UpdatedAt = ChildCustomized, time.Now().UTC()
	c.DatasetID, c.SegmentID = d.DatasetID, seg.ID
	vec, err := childVector(ctx, embed, key, c)
	if err != nil {
		return nil, err
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Save(c).Error; err != nil {
			return err
		}
		if err := tx.Where("child_id = ?", c.ID).Delete(&models.SegmentEmbedding{}).Error; err != nil {
			return err
		}
		if vec != nil {
			return tx.Create(vec).Error
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	v := childView(c)
	return &v, nil
}

// DeleteChildChunk removes a child chunk and its vector.
func (s *Service) DeleteChildChunk(ctx context.Context, actor datasets.Actor, datasetID, documentID, segmentID, childID string) error {
	_, _, seg, err := s.parentChunk(ctx, actor, datasetID, documentID, segmentID, true)
	if err != nil {
		return err
	}
	c, err := s.findChild(ctx, seg.ID, childID)
	if err != nil {
		return err
	}
	return s.db.WithContext(ctx).Delete(&models.ChildChunk{}, "id = ?", c.ID).Error
}
