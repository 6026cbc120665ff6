package datasets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// Indexing techniques.
const (
	TechniqueHighQuality = "high_quality"
	TechniqueEconomy     = "economy"
)

// Access settings.
const (
	PermissionOnlyMe         = "only_me"
	PermissionAllTeam        = "all_team_members"
	PermissionPartialMembers = "partial_members"
)

// Providers of knowledge bases; appkb keeps only its own (vendor).
const (
	ProviderVendor   = "vendor"
	ProviderExternal = "external"
)

// The embedding model a knowledge base gets when none is named: appkb's
// builtin offline embedding.
const (
	DefaultEmbeddingProvider = "appkb"
	DefaultEmbeddingModel    = llm.BuiltinEmbeddingModel
)

// Limits on names and descriptions, in characters.
const (
	MaxDatasetName        = 40
	MaxDatasetDescription = 400
	// MaxPageSize is the largest page ListDatasets returns.
	MaxPageSize = 100
)

var (
	techniques  = []string{TechniqueHighQuality, TechniqueEconomy}
	permissions = []string{PermissionOnlyMe, PermissionAllTeam, PermissionPartialMembers}
)

// Dataset is a knowledge base as the API shows it; the JSON names are the
// API's. Fields appkb has no use for (pipelines, external knowledge, icons)
// are always null or false.
type Dataset struct {
	ID                      string               `json:"id"`
	Name                    string               `json:"name"`
	Description             string               `json:"description"`
	Provider                string               `json:"provider"`
	Permission              string               `json:"permission"`
	DataSourceType          string               `json:"data_source_type"`
	IndexingTechnique       *string              `json:"indexing_technique"`
	AppCount                int                  `json:"app_count"`
	DocumentCount           int                  `json:"document_count"`
	WordCount               int                  `json:"word_count"`
	CreatedBy               string               `json:"created_by"`
	AuthorName              string               `json:"author_name"`
	CreatedAt               int64                `json:"created_at"`
	UpdatedBy               string               `json:"updated_by"`
	UpdatedAt               int64                `json:"updated_at"`
	EmbeddingModel          string               `json:"embedding_model"`
	EmbeddingModelProvider  string               `json:"embedding_model_provider"`
	EmbeddingAvailable      bool                 `json:"embedding_available"`
	RetrievalModelDict      RetrievalModel       `json:"retrieval_model_dict"`
	SummaryIndexSetting     *SummaryIndexSetting `json:"summary_index_setting"`
	Tags                    []DatasetTag         `json:"tags"`
	DocForm                 string               `json:"doc_form"`
	ExternalKnowledgeInfo   *struct{}            `json:"external_knowledge_info"`
	ExternalRetrievalModel  *struct{}            `json:"external_retrieval_model"`
	DocMetadata             []MetadataField      `json:"doc_metadata"`
	BuiltInFieldEnabled     bool                 `json:"built_in_field_enabled"`
	PipelineID              *string              `json:"pipeline_id"`
	RuntimeMode             *string              `json:"runtime_mode"`
	ChunkStructure          *string              `json:"chunk_structure"`
	IconInfo                *struct{}            `json:"icon_info"`
	IsPublished             bool                 `json:"is_published"`
	TotalDocuments          int                  `json:"total_documents"`
	TotalAvailableDocuments int                  `json:"total_available_documents"`
	EnableAPI               bool                 `json:"enable_api"`
	IsMultimodal            bool                 `json:"is_multimodal"`
	Maintainer              *string              `json:"maintainer"`
	// PartialMemberList is shown for partial_members knowledge bases and
	// in the answer to an update.
	PartialMemberList *[]string `json:"partial_member_list,omitempty"`
}

// DatasetTag is a tag as a knowledge base lists it.
type DatasetTag struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// SummaryIndexSetting is stored as given and returned unchanged.
type SummaryIndexSetting struct {
	Enable            *bool   `json:"enable,omitempty"`
	ModelName         *string `json:"model_name,omitempty"`
	ModelProviderName *string `json:"model_provider_name,omitempty"`
	SummaryPrompt     *string `json:"summary_prompt,omitempty"`
}

// CreateParams are the settings of a new knowledge base; nil means not given.
type CreateParams struct {
	Name                   string
	Description            *string
	IndexingTechnique      *string
	Permission             *string
	Provider               *string
	EmbeddingModel         *string
	EmbeddingModelProvider *string
	RetrievalModel         *RetrievalModel
	SummaryIndexSetting    *SummaryIndexSetting
}

// UpdateParams are the settings to change; nil leaves a setting as it is.
type UpdateParams struct {
	Name                   *string
	Description            *string
	IndexingTechnique      *string
	Permission             *string
	EmbeddingModel         *string
	EmbeddingModelProvider *string
	RetrievalModel         *RetrievalModel
	// PartialMemberList is kept only while the permission is
	// partial_members.
	PartialMemberList *[]string
}

// ListParams select a page of knowledge bases.
type ListParams struct {
	Page  int // from 1; 0 means 1
	Limit int // 1..MaxPageSize; 0 means 20
	// Keyword keeps knowledge bases whose name contains it, ignoring ASCII case.
	Keyword string
	// TagIDs keeps knowledge bases that carry at least one of the tags.
	TagIDs []string
}

// Page is one page of knowledge bases.
type Page struct {
	Data    []Dataset `json:"data"`
	HasMore bool      `json:"has_more"`
	Limit   int       `json:"limit"`
	Total   int       `json:"total"`
	Page    int       `json:"page"`
}

func errDatasetNotFound(id string) error { return apperr.NotFound("Dataset %s not found.", id) }

// errNameDuplicate is Dify's answer to creating a knowledge base under a
// name that is taken.
func errNameDuplicate() error {
	return apperr.Fail(apperr.CodeDatasetNameDuplicate,
		"The dataset name already exists. Please modify your dataset name.")
}

// CreateDataset makes an empty knowledge base. A name that is taken fails
// with 409 dataset_name_duplicate; an embedding or reranking model that
// cannot be used with 400 invalid_param.
func (s *Store) CreateDataset(ctx context.Context, actor Actor, p CreateParams) (*Dataset, error) {
	if err := actor.workspaceWide("create knowledge bases"); err != nil {
		return nil, err
	}
	name, err := checkName("name", p.Name, MaxDatasetName)
	if err != nil {
		return nil, err
	}
	row := models.Dataset{
		Name:           name,
		Provider:       ProviderVendor,
		Permission:     PermissionOnlyMe,
		PartialMembers: "[]",
		CreatedBy:      actor.KeyID,
		UpdatedBy:      actor.KeyID,
	}
	if p.Provider != nil && *p.Provider != ProviderVendor {
		if *p.Provider == ProviderExternal {
			return nil, apperr.InvalidParam("External knowledge bases are not supported; appkb keeps its knowledge bases itself (provider vendor).")
		}
		return nil, apperr.InvalidParam("provider must be vendor.")
	}
	if p.Description != nil {
		if row.Description, err = checkDescription(*p.Description); err != nil {
			return nil, err
		}
	}
	if p.IndexingTechnique != nil {
		if err := checkEnum("indexing_technique", *p.IndexingTechnique, techniques); err != nil {
			return nil, err
		}
		row.IndexingTechnique = p.IndexingTechnique
	}
	if p.Permission != nil {
		if err := checkEnum("permission", *p.Permission, permissions); err != nil {
			return nil, err
		}
		row.Permission = *p.Permission
	}
	if p.EmbeddingModel != nil && p.EmbeddingModelProvider == nil {
		return nil, apperr.InvalidParam("embedding_model_provider must be given with embedding_model.")
	}
	row.EmbeddingModelProvider, row.EmbeddingModel, err = s.checkEmbedding(DefaultEmbeddingProvider, DefaultEmbeddingModel, p.EmbeddingModelProvider, p.EmbeddingModel)
	if err != nil {
		return nil, err
	}
	if p.RetrievalModel != nil {
		if row.RetrievalModel, err = s.retrievalJSON(*p.RetrievalModel); err != nil {
			return nil, err
		}
	}
	if p.SummaryIndexSetting != nil {
		b, err := json.Marshal(p.SummaryIndexSetting)
		if err != nil {
			return nil, err
		}
		text := string(b)
		row.SummaryIndexSetting = &text
	}

	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		taken, err := nameTaken(tx, name, "")
		if err != nil {
			return err
		}
		if taken {
			return errNameDuplicate()
		}
		return tx.Create(&row).Error
	})
	if isDuplicate(err) {
		return nil, errNameDuplicate()
	}
	if err != nil {
		return nil, err
	}
	return s.GetDataset(ctx, actor, row.ID)
}

// GetDataset returns one knowledge base.
func (s *Store) GetDataset(ctx context.Context, actor Actor, id string) (*Dataset, error) {
	row, err := s.FindDataset(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	views, err := s.views(ctx, []models.Dataset{*row})
	if err != nil {
		return nil, err
	}
	return &views[0], nil
}

// FindDataset returns the stored row of a knowledge base the actor may use:
// 403 forbidden outside a scoped key's knowledge bases, 404 not_found when
// there is no such knowledge base.
func (s *Store) FindDataset(ctx context.Context, actor Actor, id string) (*models.Dataset, error) {
	if err := actor.mayUse(id); err != nil {
		return nil, err
	}
	var row models.Dataset
	err := s.db.WithContext(ctx).Take(&row, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, errDatasetNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	return &row, nil
}

// ListDatasets returns one page of the knowledge bases the actor may use,
// newest first.
func (s *Store) ListDatasets(ctx context.Context, actor Actor, p ListParams) (*Page, error) {
	if p.Page == 0 {
		p.Page = 1
	}
	if p.Limit == 0 {
		p.Limit = 20
	}
	if p.Page < 1 {
		return nil, apperr.InvalidParam("page must be at least 1.")
	}
	if p.Limit < 1 || p.Limit > MaxPageSize {
		return nil, apperr.InvalidParam("limit must be between 1 and %d.", MaxPageSize)
	}
	query := func() *gorm.DB {
		q := s.db.WithContext(ctx).Model(&models.Dataset{})
		if actor.Scoped() {
			q = q.Where("id IN ?", actor.Datasets)
		}
		if kw := strings.TrimSpace(p.Keyword); kw != "" {
			q = q.Where(db.ContainsCI(s.db, "name"), "%"+db.EscapeLike(kw)+"%")
		}
		if tags := CleanIDs(p.TagIDs); len(tags) > 0 {
			q = q.Where("id IN (SELECT dataset_id FROM dataset_tag_bindings WHERE tag_id IN ?)", tags)
		}
		return q
	}
	var total int64
	if err := query().Count(&total).Error; err != nil {
		return nil, err
	}
	var rows []models.Dataset
	err := query().Order("created_at DESC, id").Offset((p.Page - 1) * p.Limit).Limit(p.Limit).Find(&rows).Error
	if err != nil {
		return nil, err
	}
	data, err := s.views(ctx, rows)
	if err != nil {
		return nil, err
	}
	return &Page{
		Data:    data,
		HasMore: int64(p.Page*p.Limit) < total,
		Limit:   p.Limit,
		Total:   int(total),
		Page:    p.Page,
	}, nil
}

// UpdateDataset changes the settings given in p. A name taken by another
// knowledge base fails with 400 invalid_param.
func (s *Store) UpdateDataset(ctx context.Context, actor Actor, id string, p UpdateParams) (*Dataset, error) {
	if err := actor.mayUse(id); err != nil {
		return nil, err
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var row models.Dataset
		err := tx.Take(&row, "id = ?", id).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return errDatasetNotFound(id)
		}
		if err != nil {
			return err
		}
		if err := s.apply(tx, &row, p); err != nil {
			return err
		}
		row.UpdatedBy = actor.KeyID
		return tx.Save(&row).Error
	})
	if isDuplicate(err) {
		return nil, apperr.InvalidParam("Dataset name already exists.")
	}
	if err != nil {
		return nil, err
	}
	out, err := s.GetDataset(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	if out.PartialMemberList == nil {
		out.PartialMemberList = &[]string{}
	}
	return out, nil
}

// apply copies the given settings of p onto row, checking each.
func (s *Store) apply(tx *gorm.DB, row *models.Dataset, p UpdateParams) error {
	if p.Name != nil {
		name, err := checkName("name", *p.Name, MaxDatasetName)
		if err != nil {
			return err
		}
		if name != row.Name {
			taken, err := nameTaken(tx, name, row.ID)
			if err != nil {
				return err
			}
			if taken {
				return apperr.InvalidParam("Dataset name already exists.")
			}
			row.Name = name
		}
	}
	if p.Description != nil {
		d, err := checkDescription(*p.Description)
		if err != nil {
			return err
		}
		row.Description = d
	}
	if p.IndexingTechnique != nil {
		if err := checkEnum("indexing_technique", *p.IndexingTechnique, techniques); err != nil {
			return err
		}
		row.IndexingTechnique = p.IndexingTechnique
	}
	if p.Permission != nil {
		if err := checkEnum("permission", *p.Permission, permissions); err != nil {
			return err
		}
		row.Permission = *p.Permission
	}
	switch {
	case row.Permission != PermissionPartialMembers:
		row.PartialMembers = "[]"
	case p.PartialMemberList != nil:
		b, err := json.Marshal(nonNil(CleanIDs(*p.PartialMemberList)))
		if err != nil {
			return err
		}
		row.PartialMembers = string(b)
	}
	if p.EmbeddingModel != nil || p.EmbeddingModelProvider != nil {
		var err error
		row.EmbeddingModelProvider, row.EmbeddingModel, err = s.checkEmbedding(row.EmbeddingModelProvider, row.EmbeddingModel, p.EmbeddingModelProvider, p.EmbeddingModel)
		if err != nil {
			return err
		}
	}
	if p.RetrievalModel != nil {
		text, err := s.retrievalJSON(*p.RetrievalModel)
		if err != nil {
			return err
		}
		row.RetrievalModel = text
	}
	return nil
}

// DeleteDataset removes a knowledge base with its tag bindings, metadata
// fields and (through the foreign keys) everything else that belongs to it.
// Scoped keys that list it keep the id, so that they do not turn into
// workspace keys.
func (s *Store) DeleteDataset(ctx context.Context, actor Actor, id string) error {
	if err := actor.mayUse(id); err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Delete(&models.Dataset{}, "id = ?", id)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return errDatasetNotFound(id)
	}
	return nil
}

// nameTaken reports whether a knowledge base other than exceptID has name.
func nameTaken(tx *gorm.DB, name, exceptID string) (bool, error) {
	var n int64
	err := tx.Model(&models.Dataset{}).Where("name = ? AND id <> ?", name, exceptID).Count(&n).Error
	return n > 0, err
}

// checkEmbedding works out the embedding provider and model from the current
// pair and the given parts, and checks that the registry can serve them.
// A model name alone keeps the current provider; a provider alone takes the
// embedding model that provider offers by default.
func (s *Store) checkEmbedding(curProvider, curModel string, provider, model *string) (string, string, error) {
	outProvider, outModel := curProvider, curModel
	if provider != nil {
		outProvider = strings.TrimSpace(*provider)
		outModel = ""
	}
	if model != nil {
		outModel = strings.TrimSpace(*model)
	}
	if outProvider == "" {
		return "", "", apperr.InvalidParam("embedding_model_provider must not be empty.")
	}
	if outModel == "" {
		outModel = s.defaultEmbeddingModel(outProvider)
	}
	if outModel == "" {
		return "", "", apperr.InvalidParam("embedding_model must be given: provider %q has no default embedding model.", outProvider)
	}
	if _, err := s.models.Embedding(outProvider, outModel); err != nil {
		return "", "", apperr.InvalidParam("The embedding model %q of provider %q cannot be used: %s",
			clip(outModel), clip(outProvider), apperr.From(err).Message)
	}
	return outProvider, outModel, nil
}

// clip shortens a name for an error message: the message need not repeat
// the whole of an absurdly long one.
func clip(name string) string {
	if r := []rune(name); len(r) > 80 {
		return string(r[:80]) + "…"
	}
	return name
}

// defaultEmbeddingModel is the embedding model a provider offers when none
// is named, or "" when it offers none.
func (s *Store) defaultEmbeddingModel(provider string) string {
	want := llm.NormalizeProvider(provider)
	for _, p := range s.models.Catalog(llm.TypeEmbedding) {
		if p.Provider == want && len(p.Models) > 0 {
			return p.Models[0]
		}
	}
	return ""
}

// embeddingAvailable reports whether the knowledge base's embedding model can
// be used now.
func (s *Store) embeddingAvailable(row *models.Dataset) bool {
	_, err := s.models.Embedding(row.EmbeddingModelProvider, row.EmbeddingModel)
	return err == nil
}

// retrievalJSON checks search settings and encodes them for storage.
func (s *Store) retrievalJSON(rm RetrievalModel) (*string, error) {
	rm, err := s.checkRetrievalModel(rm)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(rm)
	if err != nil {
		return nil, err
	}
	text := string(b)
	return &text, nil
}

func checkDescription(d string) (string, error) {
	if n := utf8.RuneCountInString(d); n > MaxDatasetDescription {
		return "", apperr.InvalidParam("description must be at most %d characters long (it has %d).", MaxDatasetDescription, n)
	}
	return d, nil
}

func checkEnum(field, value string, allowed []string) error {
	if !slices.Contains(allowed, value) {
		return apperr.InvalidParam("%s must be one of %s.", field, strings.Join(allowed, ", "))
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// views turns rows into what the API shows, loading tags, metadata fields
// and document figures for all of them at once.
func (s *Store) views(ctx context.Context, rows []models.Dataset) ([]Dataset, error) {
	out := make([]Dataset, 0, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	db := s.db.WithContext(ctx)

	var tagRows []struct {
		DatasetID string
		ID        string
		Name      string
	}
	err := db.Raw(`SELECT b.dataset_id, t.id, t.name FROM dataset_tag_bindings b
		JOIN dataset_tags t ON t.id = b.tag_id
		WHERE b.dataset_id IN ? ORDER BY t.name, t.id`, ids).Scan(&tagRows).Error
	if err != nil {
		return nil, err
	}
	tags := map[string][]DatasetTag{}
	for _, t := range tagRows {
		tags[t.DatasetID] = append(tags[t.DatasetID], DatasetTag{ID: t.ID, Name: t.Name, Type: TagTypeKnowledge})
	}

	var fieldRows []models.DatasetMetadataField
	if err := db.Where("dataset_id IN ?", ids).Order("created_at, id").Find(&fieldRows).Error; err != nil {
		return nil, err
	}
	fields := map[string][]MetadataField{}
	for _, f := range fieldRows {
		fields[f.DatasetID] = append(fields[f.DatasetID], MetadataField{ID: f.ID, Name: f.Name, Type: f.Type})
	}

	stats, err := s.stats(ctx, ids)
	if err != nil {
		return nil, err
	}

	creators := make([]string, 0, len(rows))
	for i := range rows {
		creators = append(creators, rows[i].CreatedBy)
	}
	authors, err := authorNames(db, creators)
	if err != nil {
		return nil, err
	}

	for i := range rows {
		v, err := s.view(&rows[i], tags[rows[i].ID], fields[rows[i].ID], stats[rows[i].ID])
		if err != nil {
			return nil, err
		}
		v.AuthorName = authorName(authors, rows[i].CreatedBy)
		out = append(out, v)
	}
	return out, nil
}

// view builds the API form of one knowledge base.
func (s *Store) view(row *models.Dataset, tags []DatasetTag, fields []MetadataField, st Stats) (Dataset, error) {
	rm, err := EffectiveRetrievalModel(row)
	if err != nil {
		return Dataset{}, err
	}
	if rm.ScoreThreshold == nil {
		// Shown as 0 rather than null for typed clients; it only counts
		// when score_threshold_enabled is true, and then it is set.
		zero := 0.0
		rm.ScoreThreshold = &zero
	}
	var summary *SummaryIndexSetting
	if row.SummaryIndexSetting != nil && *row.SummaryIndexSetting != "" {
		summary = &SummaryIndexSetting{}
		if err := json.Unmarshal([]byte(*row.SummaryIndexSetting), summary); err != nil {
			return Dataset{}, fmt.Errorf("knowledge base %s: stored summary index setting: %w", row.ID, err)
		}
	}
	docMetadata := append([]MetadataField{}, fields...)
	if row.BuiltInFieldEnabled {
		for _, f := range BuiltInFields {
			docMetadata = append(docMetadata, MetadataField{ID: BuiltInFieldID, Name: f.Name, Type: f.Type})
		}
	}
	v := Dataset{
		ID:                      row.ID,
		Name:                    row.Name,
		Description:             row.Description,
		Provider:                row.Provider,
		Permission:              row.Permission,
		DataSourceType:          valueOr(row.DataSourceType, DefaultDataSourceType),
		IndexingTechnique:       row.IndexingTechnique,
		AppCount:                st.Apps,
		DocumentCount:           st.Documents,
		WordCount:               st.Words,
		CreatedBy:               row.CreatedBy,
		CreatedAt:               unix(row.CreatedAt),
		UpdatedBy:               row.UpdatedBy,
		UpdatedAt:               unix(row.UpdatedAt),
		EmbeddingModel:          row.EmbeddingModel,
		EmbeddingModelProvider:  row.EmbeddingModelProvider,
		EmbeddingAvailable:      s.embeddingAvailable(row),
		RetrievalModelDict:      rm,
		SummaryIndexSetting:     summary,
		Tags:                    nonNilTags(tags),
		DocForm:                 valueOr(row.DocForm, DefaultDocForm),
		DocMetadata:             docMetadata,
		BuiltInFieldEnabled:     row.BuiltInFieldEnabled,
		TotalDocuments:          st.Documents,
		TotalAvailableDocuments: st.AvailableDocuments,
		EnableAPI:               true,
	}
	if row.Permission == PermissionPartialMembers {
		members := []string{}
		if err := json.Unmarshal([]byte(row.PartialMembers), &members); err != nil {
			return Dataset{}, fmt.Errorf("knowledge base %s: stored partial members: %w", row.ID, err)
		}
		v.PartialMemberList = &members
	}
	return v, nil
}

func nonNilTags(t []DatasetTag) []DatasetTag {
	if t == nil {
		return []DatasetTag{}
	}
	return t
}

func unix(t time.Time) int64 { return t.Unix() }

// What an empty knowledge base shows as its data source and document form:
// the source every API document has, and the form a first document takes
// unless it asks for another. The stored values stay unset until then, so
// the first document may still choose its form.
const (
	DefaultDataSourceType = "upload_file"
	DefaultDocForm        = "text_model"
)

// WorkspaceAuthor is the author name of a knowledge base whose creating key
// has no label (or is gone): the workspace's own name.
const WorkspaceAuthor = "appkb"

func valueOr(p *string, def string) string {
	if p == nil || *p == "" {
		return def
	}
	return *p
}

// authorNames maps key ids to their labels. Knowledge bases are created
// through API keys, so a key's label plays the part of Dify's account name.
func authorNames(db *gorm.DB, keyIDs []string) (map[string]string, error) {
	out := map[string]string{}
	if len(keyIDs) == 0 {
		return out, nil
	}
	var keys []models.APIKey
	if err := db.Select("id", "label").Where("id IN ?", keyIDs).Find(&keys).Error; err != nil {
		return nil, err
	}
	for _, k := range keys {
		out[k.ID] = k.Label
	}
	return out, nil
}

func authorName(labels map[string]string, keyID string) string {
	if l := labels[keyID]; l != "" {
		return l
	}
	return WorkspaceAuthor
}
