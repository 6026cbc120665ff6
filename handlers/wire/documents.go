package wire

import (
	"appkb/gen"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/textsplit"
)

// Documents, domain → wire.

// docMetaItem is the element type of gen.Document.DocMetadata (an
// anonymous struct in the generated code; the alias names the same type).
type docMetaItem = struct {
	Id    string  `json:"id"`
	Name  string  `json:"name"`
	Type  string  `json:"type"`
	Value *string `json:"value"`
}

// mapOrNil points at m, or is nil for a nil map.
func mapOrNil(m map[string]any) *map[string]any {
	if m == nil {
		return nil
	}
	return &m
}

func documentOf(d *documents.Document) gen.Document {
	out := gen.Document{Id: d.ID, Position: d.Position, DataSourceType: d.DataSourceType,
		DataSourceInfo: mapOrNil(d.DataSourceInfo), DataSourceDetailDict: mapOrNil(d.DataSourceDetailDict),
		DatasetProcessRuleId: d.DatasetProcessRuleID, Name: d.Name, CreatedFrom: d.CreatedFrom, CreatedBy: &d.CreatedBy,
		CreatedAt: float64(d.CreatedAt), Tokens: &d.Tokens, IndexingStatus: d.IndexingStatus, Error: d.Error,
		Enabled: d.Enabled, DisabledAt: unixF(d.DisabledAt), DisabledBy: d.DisabledBy, Archived: d.Archived,
		DisplayStatus: d.DisplayStatus, WordCount: &d.WordCount, HitCount: d.HitCount, DocForm: d.DocForm,
		SummaryIndexStatus: d.SummaryIndexStatus, NeedSummary: d.NeedSummary}
	if d.DocMetadata != nil {
		meta := make([]docMetaItem, len(d.DocMetadata))
		for i, m := range d.DocMetadata {
			meta[i] = docMetaItem{Id: m.ID, Name: m.Name, Type: m.Type, Value: m.Value}
		}
		out.DocMetadata = &meta
	}
	return out
}

func Created(c *documents.Created) gen.DocumentCreatedResult {
	return gen.DocumentCreatedResult{Document: documentOf(&c.Document), Batch: c.Batch}
}

func DocumentPage(p *documents.DocumentPage) gen.DocumentList {
	return gen.DocumentList{Data: eachOf(p.Data, documentOf), HasMore: p.HasMore, Limit: p.Limit, Total: p.Total, Page: p.Page}
}

// DomainProcessRule reads the cleaning and splitting settings of a
// request; what the request leaves out reads as the zero value.
func DomainProcessRule(rule *gen.ProcessRule) textsplit.ProcessRule {
	out := textsplit.ProcessRule{Mode: string(rule.Mode)}
	r := rule.Rules
	if r == nil {
		return out
	}
	rules := &textsplit.Rules{ParentMode: string(ValueOf(r.ParentMode)),
		Segmentation: domainSegmentation(r.Segmentation), SubchunkSegmentation: domainSegmentation(r.SubchunkSegmentation)}
	if r.PreProcessingRules != nil {
		rules.PreProcessingRules = make([]textsplit.PreProcessingRule, len(*r.PreProcessingRules))
		for i, p := range *r.PreProcessingRules {
			rules.PreProcessingRules[i] = textsplit.PreProcessingRule{ID: string(ValueOf(p.Id)), Enabled: ValueOf(p.Enabled)}
		}
	}
	out.Rules = rules
	return out
}

func domainSegmentation(s *gen.ProcessRuleSegmentation) *textsplit.Segmentation {
	if s == nil {
		return nil
	}
	return &textsplit.Segmentation{Separator: ValueOf(s.Separator), MaxTokens: ValueOf(s.MaxTokens), ChunkOverlap: ValueOf(s.ChunkOverlap)}
}

// IndexingStatuses is the progress of a batch's documents; times are
// Unix seconds, a nil list is null.
func IndexingStatuses(list []documents.IndexingStatus) gen.IndexingStatusList {
	return gen.IndexingStatusList{Data: eachOf(list, func(st *documents.IndexingStatus) gen.DocumentIndexingStatus {
		return gen.DocumentIndexingStatus{Id: st.ID, IndexingStatus: st.IndexingStatus,
			ProcessingStartedAt: unixF(st.ProcessingStartedAt), ParsingCompletedAt: unixF(st.ParsingCompletedAt),
			CleaningCompletedAt: unixF(st.CleaningCompletedAt), SplittingCompletedAt: unixF(st.SplittingCompletedAt),
			CompletedAt: unixF(st.CompletedAt), PausedAt: unixF(st.PausedAt), Error: st.Error, StoppedAt: unixF(st.StoppedAt),
			CompletedSegments: st.CompletedSegments, TotalSegments: st.TotalSegments}
	})}
}
