package handlers

import (
	"appkb/gen"
	"appkb/internal/knowledge/datasets"
)

// Tags and metadata fields of knowledge bases, domain → wire.

func wireTag(t *datasets.Tag) gen.KnowledgeTag {
	return gen.KnowledgeTag{Id: t.ID, Name: t.Name, Type: &t.Type, BindingCount: &t.BindingCount}
}

// wireTags lists tags; no tags is an empty list.
func wireTags(list []datasets.Tag) []gen.KnowledgeTag {
	out := make([]gen.KnowledgeTag, len(list))
	for i := range list {
		out[i] = wireTag(&list[i])
	}
	return out
}

// wireTagRefs lists the tags of a knowledge base; none is an empty list.
func wireTagRefs(list []datasets.TagRef) []gen.DatasetTagRef {
	out := make([]gen.DatasetTagRef, len(list))
	for i, t := range list {
		out[i] = gen.DatasetTagRef{Id: t.ID, Name: t.Name}
	}
	return out
}

func wireMetadataList(l *datasets.MetadataList) gen.MetadataFieldList {
	out := gen.MetadataFieldList{BuiltInFieldEnabled: &l.BuiltInFieldEnabled}
	if l.DocMetadata != nil {
		fields := make([]gen.MetadataFieldUsage, len(l.DocMetadata))
		for i, f := range l.DocMetadata {
			count := f.Count
			fields[i] = gen.MetadataFieldUsage{Id: f.ID, Name: f.Name, Type: f.Type, Count: &count}
		}
		out.DocMetadata = &fields
	}
	return out
}
