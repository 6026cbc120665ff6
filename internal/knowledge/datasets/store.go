// Package knowledge keeps appkb's knowledge bases (the API calls them
// datasets): their settings, the workspace's tags that group them, and the
// custom metadata fields their documents may carry. It knows nothing of HTTP;
// every failure it returns is an *apperr.Error or a database error.
//
// # Who may do what
//
// Every operation takes the Actor it is done for, built from the API key.
// Dify's knowledge keys act for the whole workspace; appkb can also limit a
// key to some knowledge bases (Actor.Datasets). Such a scoped key
//
//   - lists, reads, changes and deletes only its knowledge bases, and gets
//     403 forbidden for any other id (also as target_id of tag bindings);
//   - cannot create knowledge bases (it could not reach them afterwards);
//   - sees every tag, but binding counts include only its knowledge bases,
//     and it may attach and detach tags on its knowledge bases;
//   - cannot create, rename or delete tags, since a tag belongs to the whole
//     workspace and renaming or deleting it changes other knowledge bases.
//
// appkb has no console accounts, so the `permission` setting is stored and
// returned but grants nothing by itself, and `include_all` changes nothing.
package datasets

import (
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"gorm.io/gorm"

	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
)

// Store reads and writes knowledge bases, tags and metadata fields.
type Store struct {
	db     *gorm.DB
	models *llm.Registry
}

// NewStore returns a Store over db. models resolves the embedding and rerank
// models that knowledge bases name; nil means the builtin models only.
func NewStore(db *gorm.DB, models *llm.Registry) *Store {
	return &Store{db: db, models: models}
}

// Actor is the API key an operation is done for.
type Actor struct {
	// KeyID is recorded as created_by and updated_by.
	KeyID string
	// Datasets, when not empty, are the only knowledge bases the key may use.
	Datasets []string
}

// Scoped reports whether the key is limited to some knowledge bases.
func (a Actor) Scoped() bool { return len(a.Datasets) > 0 }

// MayUse reports whether the key may act on knowledge base id.
func (a Actor) MayUse(id string) bool { return !a.Scoped() || slices.Contains(a.Datasets, id) }

// mayUse fails with 403 when the key may not act on knowledge base id.
func (a Actor) mayUse(id string) error {
	if !a.MayUse(id) {
		return apperr.Forbidden("This key may not use knowledge base %s.", id)
	}
	return nil
}

// workspaceWide fails with 403 for a scoped key; what names the change that
// only a workspace key may make.
func (a Actor) workspaceWide(what string) error {
	if a.Scoped() {
		return apperr.Forbidden("A knowledge key limited to some knowledge bases cannot %s; use a workspace knowledge key.", what)
	}
	return nil
}

// checkName trims a name and checks that it has between 1 and max
// characters; field names it in the message.
func checkName(field, name string, max int) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", apperr.InvalidParam("%s must not be empty.", field)
	}
	if n := utf8.RuneCountInString(name); n > max {
		return "", apperr.InvalidParam("%s must be at most %d characters long (it has %d).", field, max, n)
	}
	return name, nil
}

// isDuplicate reports a unique-constraint failure.
func isDuplicate(err error) bool { return errors.Is(err, gorm.ErrDuplicatedKey) }

// CleanIDs drops blank and repeated ids, keeping the order.
func CleanIDs(ids []string) []string {
	var out []string
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
