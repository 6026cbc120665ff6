package datasets

import (
	"context"

	"appkb/db"
)

// Stats are the figures of a knowledge base that come from outside its own
// row: its documents and the apps that use it.
type Stats struct {
	Documents          int // all documents
	AvailableDocuments int // documents usable for retrieval (enabled, indexed)
	Words              int // words over all documents
	Apps               int // apps whose definition names the knowledge base
}

// stats returns the figures of the knowledge bases ids, keyed by id. This is
// the one place that counts documents (the indexing package writes them).
func (s *Store) stats(ctx context.Context, ids []string) (map[string]Stats, error) {
	out := make(map[string]Stats, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		DatasetID string
		Docs      int
		Available int
		Words     int
	}
	err := s.db.WithContext(ctx).Raw(`SELECT dataset_id, COUNT(*) AS docs,
		SUM(CASE WHEN indexing_status = 'completed' AND enabled AND NOT archived THEN 1 ELSE 0 END) AS available,
		COALESCE(SUM(word_count), 0) AS words
		FROM documents WHERE dataset_id IN ? GROUP BY dataset_id`, ids).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.DatasetID] = Stats{Documents: r.Docs, AvailableDocuments: r.Available, Words: r.Words}
	}
	return out, nil
}

// metadataUsage returns, per custom field id, how many documents have a
// value for it (documents keep their values as a JSON object keyed by
// field id).
func (s *Store) metadataUsage(ctx context.Context, fieldIDs []string) (map[string]int, error) {
	out := make(map[string]int, len(fieldIDs))
	if len(fieldIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		Key string
		N   int
	}
	query := `SELECT j.key AS key, COUNT(*) AS n
		FROM documents d, json_each(d.doc_metadata) j
		WHERE j.key IN ? AND j.value IS NOT NULL GROUP BY j.key`
	if db.IsPostgres(s.db) {
		// jsonb_each gives JSON null as a jsonb 'null', not SQL NULL.
		query = `SELECT j.key AS key, COUNT(*) AS n
		FROM documents d, jsonb_each(d.doc_metadata::jsonb) j
		WHERE j.key IN ? AND jsonb_typeof(j.value) <> 'null' GROUP BY j.key`
	}
	err := s.db.WithContext(ctx).Raw(query, fieldIDs).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.Key] = r.N
	}
	return out, nil
}
