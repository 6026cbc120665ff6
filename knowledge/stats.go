package knowledge

import "context"

// Stats are the figures of a knowledge base that come from outside its own
// row: its documents and the apps that use it.
type Stats struct {
	Documents          int // all documents
	AvailableDocuments int // documents usable for retrieval (enabled, indexed)
	Words              int // words over all documents
	Apps               int // apps whose definition names the knowledge base
}

// stats returns the figures of the knowledge bases ids, keyed by id.
// Documents are not stored yet, so every figure is zero for now; once the
// documents table exists this is the one place that counts them.
func (s *Store) stats(_ context.Context, ids []string) (map[string]Stats, error) {
	return make(map[string]Stats, len(ids)), nil
}

// metadataUsage returns, per custom field id, how many documents have a
// value for it. Like stats, it is zero until documents are stored.
func (s *Store) metadataUsage(_ context.Context, fieldIDs []string) (map[string]int, error) {
	return make(map[string]int, len(fieldIDs)), nil
}
