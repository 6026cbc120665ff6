package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ---- knowledge ----

var toolKnowledgeSearch = &Tool{
	Provider: "knowledge", Name: "knowledge_search",
	Description: "Searches knowledge bases and gives the passages that match a query.",
	Params: []Param{
		{Name: "query", Type: paramString, Required: true, LLM: true, Description: "What to search for."},
		{Name: "dataset_ids", Type: paramList, Required: true, Description: "Ids of the knowledge bases, separated by commas."},
		{Name: "top_k", Type: paramNumber, Default: float64(4), Description: "How many passages to give at most."},
		{Name: "score_threshold", Type: paramNumber, Description: "Lowest score a passage may have."},
	},
	Run: func(ctx context.Context, env *Env, args map[string]any) (*Output, error) {
		if env == nil || env.Retrieve == nil {
			return nil, errors.New("knowledge search is not available on this server")
		}
		ids, _ := args["dataset_ids"].([]string)
		if len(ids) == 0 {
			return nil, errors.New("the parameter \"dataset_ids\" names no knowledge base")
		}
		cfg := map[string]any{}
		if k, ok := num(args, "top_k"); ok && k > 0 {
			cfg["top_k"] = k
		}
		if s, ok := num(args, "score_threshold"); ok {
			cfg["score_threshold"] = s
		}
		items, err := env.Retrieve(ctx, str(args, "query"), ids, map[string]any{"multiple_retrieval_config": cfg})
		if err != nil {
			return nil, fmt.Errorf("knowledge search failed: %v", err)
		}
		var parts []string
		found := make([]any, 0, len(items))
		for _, it := range items {
			parts = append(parts, Text(it["content"]))
			found = append(found, it)
		}
		return &Output{Text: strings.Join(parts, "\n\n"), JSON: found}, nil
	},
}
