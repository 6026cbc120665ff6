package retrieval

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"appkb/internal/knowledge/datasets"
	"appkb/models"
)

// docInfo is a document whose chunks may be returned.
type docInfo struct {
	id, datasetID, name, source, form string
	// values are the metadata values by field name (custom and built-in).
	values map[string]any
	// custom are the custom values only, as hits show them.
	custom map[string]any
}

func (d *docInfo) summary() DocumentSummary {
	return DocumentSummary{ID: d.id, Name: d.name, DataSourceType: d.source, DocForm: d.form, Metadata: d.custom}
}

// docSet is every document a search may return chunks of. Without a
// metadata filter only the ids are read up front (one narrow query); the
// names and metadata that hits show are read later, for the documents of
// the hits alone (see load).
type docSet struct {
	// allowed holds the ids of the documents whose chunks may be returned.
	allowed map[string]bool
	// byID holds the documents read in full so far.
	byID map[string]*docInfo
	// filtered is set when a metadata filter left some documents out.
	filtered bool
	// shared is the cached set allowed comes from, when there is no
	// metadata filter; nil otherwise.
	shared *usableSet
	// datasets are the knowledge bases searched, and names their metadata
	// field names by field id (nil until needed).
	datasetIDs []string
	names      map[string]map[string]string
}

// maxInList bounds the document ids passed to SQL to narrow a search.
const maxInList = 5000

// restrict narrows a candidate query to the documents of the set when a
// metadata filter removed some, and bounds its rows by limit. When too many
// documents passed the filter to list them, no bound is set, so that
// filtered-out rows cannot crowd out the rest.
func (d *docSet) restrict(q *gorm.DB, column string, limit int) *gorm.DB {
	if !d.filtered {
		return q.Limit(limit)
	}
	if len(d.allowed) > maxInList {
		return q
	}
	idList := make([]string, 0, len(d.allowed))
	for id := range d.allowed {
		idList = append(idList, id)
	}
	return q.Where(column+" IN ?", idList).Limit(limit)
}

// docRow is the part of a document row that filters and hits use.
type docRow struct {
	ID, DatasetID, Name, DataSourceType, DocForm, DocMetadata, CreatedBy string
	CreatedAt, UpdatedAt                                                 time.Time
}

const docColumns = "id, dataset_id, name, data_source_type, doc_form, doc_metadata, created_by, created_at, updated_at"

// usable is the condition on documents whose chunks may be returned.
const usable = "enabled AND NOT archived AND indexing_status = 'completed'"

// fieldNames reads (once per search) the metadata field names of the
// knowledge bases.
func (s *Service) fieldNames(ctx context.Context, d *docSet) error {
	if d.names != nil {
		return nil
	}
	var fields []models.DatasetMetadataField
	if err := s.db.WithContext(ctx).Where("dataset_id IN ?", d.datasetIDs).Find(&fields).Error; err != nil {
		return err
	}
	d.names = map[string]map[string]string{}
	for _, f := range fields {
		if d.names[f.DatasetID] == nil {
			d.names[f.DatasetID] = map[string]string{}
		}
		d.names[f.DatasetID][f.ID] = f.Name
	}
	return nil
}

// hasMetadata tells whether stored metadata values (a JSON object) may
// hold any value: anything but empty text, "{}" or "null".
func hasMetadata(raw string) bool {
	switch strings.TrimSpace(raw) {
	case "", "{}", "null":
		return false
	}
	return true
}

// info turns a document row into its filter values and summary.
func (d *docSet) info(r docRow) *docInfo {
	di := &docInfo{id: r.ID, datasetID: r.DatasetID, name: r.Name, source: r.DataSourceType, form: r.DocForm,
		values: map[string]any{}, custom: map[string]any{}}
	for id, v := range metadataJSON(r.DocMetadata) {
		if name, ok := d.names[r.DatasetID][id]; ok {
			di.values[name], di.custom[name] = v, v
		}
	}
	di.values[datasets.FieldDocumentName] = r.Name
	di.values[datasets.FieldUploader] = r.CreatedBy
	di.values[datasets.FieldUploadDate] = strconv.FormatInt(r.CreatedAt.Unix(), 10)
	di.values[datasets.FieldLastUpdateDate] = strconv.FormatInt(r.UpdatedAt.Unix(), 10)
	di.values[datasets.FieldSource] = r.DataSourceType
	return di
}

// load reads in full the allowed documents among idList not read yet.
func (s *Service) load(ctx context.Context, d *docSet, idList []string) error {
	var need []string
	for _, id := range uniq(idList) {
		if d.allowed[id] && d.byID[id] == nil {
			need = append(need, id)
		}
	}
	if len(need) == 0 {
		return nil
	}
	var rows []docRow
	if err := s.db.WithContext(ctx).Model(&models.Document{}).Select(docColumns).Where("id IN ?", need).Scan(&rows).Error; err != nil {
		return err
	}
	// The field names only name metadata values; documents without any
	// (the common case) need no read of them.
	for _, r := range rows {
		if hasMetadata(r.DocMetadata) {
			if err := s.fieldNames(ctx, d); err != nil {
				return err
			}
			break
		}
	}
	for _, r := range rows {
		d.byID[r.ID] = d.info(r)
	}
	return nil
}

// usableSet is the ids of the documents of some knowledge bases whose
// chunks searches may return, as cached by Service.usableDocs. It is
// shared between searches and never modified once made, so its address
// stands for its content (see docMask).
type usableSet struct {
	ids map[string]bool
	// hier holds those of parent-child documents. A document's form
	// changes only with a new indexing, which moves the counter too.
	hier map[string]bool
}

// anyHierarchical tells whether any allowed document is a parent-child
// one.
func (d *docSet) anyHierarchical() bool {
	if d.shared != nil {
		return len(d.shared.hier) > 0
	}
	for id := range d.allowed {
		if d.hierarchical(id) {
			return true
		}
	}
	return false
}

// hierarchical tells whether an allowed document is a parent-child one.
func (d *docSet) hierarchical(docID string) bool {
	if d.shared != nil {
		return d.shared.hier[docID]
	}
	info := d.byID[docID]
	return info != nil && info.form == formHierarchical
}

// allowedDocuments finds the documents of the knowledge bases that are
// enabled, not archived and done indexing, and that pass filter. Without
// a filter it reads their ids only.
func (s *Service) allowedDocuments(ctx context.Context, datasetIDs []models.Dataset, filter *datasets.MetadataFilter) (*docSet, error) {
	set := &docSet{allowed: map[string]bool{}, byID: map[string]*docInfo{}, datasetIDs: ids(datasetIDs)}
	if filter == nil || len(filter.Conditions) == 0 {
		// Shared between searches: never modified once cached.
		key := slices.Clone(set.datasetIDs)
		slices.Sort(key)
		usable, _, err := s.usableDocs.Get(ctx, strings.Join(key, ","), func(ctx context.Context) (*usableSet, bool, error) {
			var rows []struct{ ID, DocForm string }
			err := s.db.WithContext(ctx).Model(&models.Document{}).Select("id, doc_form").
				Where("dataset_id IN ? AND "+usable, set.datasetIDs).Scan(&rows).Error
			if err != nil {
				return nil, false, err
			}
			u := &usableSet{ids: make(map[string]bool, len(rows)), hier: map[string]bool{}}
			for _, r := range rows {
				u.ids[r.ID] = true
				if r.DocForm == formHierarchical {
					u.hier[r.ID] = true
				}
			}
			return u, true, nil
		})
		if err != nil {
			return nil, err
		}
		set.allowed, set.shared = usable.ids, usable
		return set, nil
	}
	var rows []docRow
	err := s.db.WithContext(ctx).Model(&models.Document{}).Select(docColumns).
		Where("dataset_id IN ? AND "+usable, set.datasetIDs).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	if len(rows) > 0 {
		if err := s.fieldNames(ctx, set); err != nil {
			return nil, err
		}
	}
	for _, r := range rows {
		d := set.info(r)
		if !matches(filter, d.values) {
			set.filtered = true
			continue
		}
		set.allowed[r.ID] = true
		set.byID[r.ID] = d
	}
	return set, nil
}

// matches applies a metadata filter to one document's values: all
// conditions must hold with "and" (the default), one with "or".
func matches(f *datasets.MetadataFilter, values map[string]any) bool {
	or := f.LogicalOperator != nil && *f.LogicalOperator == "or"
	for _, c := range f.Conditions {
		ok := condition(c, values)
		if or && ok {
			return true
		}
		if !or && !ok {
			return false
		}
	}
	return !or
}

// condition checks one comparison. A document without a value for the
// field meets only "empty" and the negative operators ("not contains",
// "is not", "not in", "≠"). Numbers and times compare as numbers; a time
// may be given as Unix seconds or as an RFC 3339 or YYYY-MM-DD date.
func condition(c datasets.MetadataCondition, values map[string]any) bool {
	raw, has := values[c.Name]
	text := ""
	if has && raw != nil {
		text = fmt.Sprint(raw)
	}
	present := text != ""
	op := c.ComparisonOperator
	switch op {
	case "empty":
		return !present
	case "not empty":
		return present
	case "not contains", "is not", "not in", "≠":
		if !present {
			return true
		}
	}
	if !present {
		return false
	}
	want := valueText(c.Value)
	switch op {
	case "contains":
		return strings.Contains(text, want)
	case "not contains":
		return !strings.Contains(text, want)
	case "start with":
		return strings.HasPrefix(text, want)
	case "end with":
		return strings.HasSuffix(text, want)
	case "is":
		return text == want
	case "is not":
		return text != want
	case "in", "not in":
		found := false
		for _, v := range valueList(c.Value) {
			if v == text {
				found = true
				break
			}
		}
		return found == (op == "in")
	case "=", "≠", ">", "<", "≥", "≤", "before", "after":
		a, ok1 := number(text)
		b, ok2 := number(want)
		if !ok1 || !ok2 {
			return op == "≠"
		}
		switch op {
		case "=":
			return a == b
		case "≠":
			return a != b
		case ">", "after":
			return a > b
		case "<", "before":
			return a < b
		case "≥":
			return a >= b
		case "≤":
			return a <= b
		}
	}
	return false
}

func valueText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, p := range x {
			parts[i] = valueText(p)
		}
		return strings.Join(parts, ",")
	default:
		return fmt.Sprint(x)
	}
}

// valueList reads the value of in/not in: a list, or text with commas.
func valueList(v any) []string {
	if l, ok := v.([]any); ok {
		out := make([]string, len(l))
		for i, p := range l {
			out[i] = valueText(p)
		}
		return out
	}
	if l, ok := v.([]string); ok {
		return l
	}
	var out []string
	for _, p := range strings.Split(valueText(v), ",") {
		out = append(out, strings.TrimSpace(p))
	}
	return out
}

// number reads a number, or a date as Unix seconds.
func number(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f, true
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return float64(t.Unix()), true
		}
	}
	return 0, false
}
