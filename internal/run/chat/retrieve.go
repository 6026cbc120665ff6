package chat

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"appkb/internal/apps"
)

// retrieve asks the Retrieve hook for the knowledge of the app's
// dataset_configs. Chat apps search with the query; completion apps with
// the input that dataset_query_variable names (the query when it names
// none). The resources get their ids and the message id here.
func (g *Generation) retrieve(ctx context.Context, mc *apps.ModelConfig) error {
	hook := g.svc.cfg.Retrieve
	if hook == nil || mc == nil || len(mc.DatasetConfigs.Datasets.Datasets) == 0 || g.directHit {
		return nil
	}
	query := g.query
	if v := mc.DatasetQueryVariable; v != "" && !g.chatOp {
		if s, ok := g.inputs[v].(string); ok && s != "" {
			query = s
		}
	}
	texts, resources, err := hook(ctx, g.appID, mc, query)
	if err != nil {
		return err
	}
	g.knowledge = texts
	g.showSources = mc.RetrieverResource == nil || mc.RetrieverResource.On()
	for i := range resources {
		r := &resources[i]
		r.ID = uuidFor("retriever-resource", g.MessageID, i)
		r.MessageID = g.MessageID
		r.CreatedAt = g.CreatedAt.Unix()
		if r.Position == 0 {
			r.Position = i + 1
		}
	}
	g.resources = resources
	return nil
}

// citations are the resources an answer reports: none when an annotation
// or the moderation preset answered instead of the model, or when the app
// switched the citation feature off.
func (g *Generation) citations(out *outcome) []RetrieverResource {
	if out.annotation != nil || g.directHit || !g.showSources || g.resources == nil {
		return []RetrieverResource{}
	}
	return g.resources
}

// storedCitations are the resources kept with the message; the message in
// its first, empty state keeps none.
func (g *Generation) storedCitations(answer, status string) []RetrieverResource {
	if answer == "" && status == StatusNormal {
		return nil
	}
	return g.resources
}

// uuidFor derives a stable id from a message id, so that every copy of a
// resource (events, blocking answer, history) carries the same one.
func uuidFor(kind, messageID string, i int) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprintf("%s:%s:%d", kind, messageID, i))).String()
}
