package datasets_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

var (
	ctx       = context.Background()
	workspace = datasets.Actor{KeyID: "key-workspace"}
)

func newStore(t *testing.T) *datasets.Store {
	t.Helper()
	return datasets.NewStore(db.OpenTemp(t), nil)
}

func ptr[T any](v T) *T { return &v }

// wantErr fails unless err is an API error with the given status and code;
// a zero status wants no error at all.
func wantErr(t *testing.T, err error, status int, code string) {
	t.Helper()
	if status == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want %d %s", status, code)
	}
	e := apperr.From(err)
	if e.Status != status || e.Code != code {
		t.Fatalf("error %d %s (%s), want %d %s", e.Status, e.Code, e.Message, status, code)
	}
}

func mustCreate(t *testing.T, s *datasets.Store, name string) *datasets.Dataset {
	t.Helper()
	ds, err := s.CreateDataset(ctx, workspace, datasets.CreateParams{Name: name})
	if err != nil {
		t.Fatalf("create %q: %v", name, err)
	}
	return ds
}

func TestCreateDataset(t *testing.T) {
	strict, err := llm.Parse([]byte("providers:\n  - name: openai\n    base_url: http://127.0.0.1:9/v1\n    defaults: {embedding: text-embedding-3-small}\n"), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	rm := &datasets.RetrievalModel{
		SearchMethod:          datasets.SearchHybrid,
		TopK:                  5,
		RerankingEnable:       true,
		RerankingMode:         ptr(datasets.ModeRerankingModel),
		RerankingModel:        &datasets.RerankingModel{ProviderName: "appkb", ModelName: "builtin"},
		ScoreThresholdEnabled: true,
		ScoreThreshold:        ptr(0.5),
	}
	tests := []struct {
		name       string
		models     *llm.Registry
		params     datasets.CreateParams
		wantStatus int
		wantCode   string
		check      func(t *testing.T, ds *datasets.Dataset)
	}{
		{name: "a name alone gives the defaults", params: datasets.CreateParams{Name: "Docs"},
			check: func(t *testing.T, ds *datasets.Dataset) {
				if ds.Provider != "vendor" || ds.Permission != "only_me" || ds.IndexingTechnique != nil || ds.Description != "" {
					t.Errorf("settings %+v", ds)
				}
				if ds.EmbeddingModelProvider != "appkb" || ds.EmbeddingModel != llm.BuiltinEmbeddingModel || !ds.EmbeddingAvailable {
					t.Errorf("embedding %s/%s available=%v", ds.EmbeddingModelProvider, ds.EmbeddingModel, ds.EmbeddingAvailable)
				}
				r := ds.RetrievalModelDict
				if r.SearchMethod != datasets.SearchSemantic || r.TopK != datasets.DefaultTopK || r.RerankingEnable || r.RerankingModel == nil {
					t.Errorf("retrieval %+v", r)
				}
				if ds.CreatedBy != workspace.KeyID || ds.CreatedAt == 0 || ds.DocumentCount != 0 || len(ds.Tags) != 0 || len(ds.DocMetadata) != 0 {
					t.Errorf("bookkeeping %+v", ds)
				}
				if ds.PartialMemberList != nil || ds.SummaryIndexSetting != nil {
					t.Errorf("unexpected %v %v", ds.PartialMemberList, ds.SummaryIndexSetting)
				}
			}},
		{name: "economy defaults to keyword search", params: datasets.CreateParams{Name: "Cheap", IndexingTechnique: ptr("economy")},
			check: func(t *testing.T, ds *datasets.Dataset) {
				if ds.RetrievalModelDict.SearchMethod != datasets.SearchKeyword {
					t.Errorf("search method %s", ds.RetrievalModelDict.SearchMethod)
				}
			}},
		{name: "every setting is kept", params: datasets.CreateParams{Name: "  Full  ", Description: ptr("about"),
			IndexingTechnique: ptr("high_quality"), Permission: ptr("partial_members"), Provider: ptr("vendor"),
			EmbeddingModel: ptr("builtin"), EmbeddingModelProvider: ptr("langgenius/appkb/appkb"), RetrievalModel: rm,
			SummaryIndexSetting: &datasets.SummaryIndexSetting{Enable: ptr(true), SummaryPrompt: ptr("sum up")}},
			check: func(t *testing.T, ds *datasets.Dataset) {
				if ds.Name != "Full" || ds.Description != "about" || *ds.IndexingTechnique != "high_quality" || ds.Permission != "partial_members" {
					t.Errorf("settings %+v", ds)
				}
				if ds.EmbeddingModelProvider != "langgenius/appkb/appkb" {
					t.Errorf("provider %s", ds.EmbeddingModelProvider)
				}
				r := ds.RetrievalModelDict
				if r.SearchMethod != datasets.SearchHybrid || r.TopK != 5 || !r.RerankingEnable || *r.ScoreThreshold != 0.5 || r.RerankingModel.ModelName != "builtin" {
					t.Errorf("retrieval %+v", r)
				}
				if ds.SummaryIndexSetting == nil || *ds.SummaryIndexSetting.SummaryPrompt != "sum up" {
					t.Errorf("summary %+v", ds.SummaryIndexSetting)
				}
				if ds.PartialMemberList == nil || len(*ds.PartialMemberList) != 0 {
					t.Errorf("partial members %v", ds.PartialMemberList)
				}
			}},
		{name: "a configured provider alone brings its default model", models: strict,
			params: datasets.CreateParams{Name: "Remote", EmbeddingModelProvider: ptr("langgenius/openai/openai")},
			check: func(t *testing.T, ds *datasets.Dataset) {
				if ds.EmbeddingModel != "text-embedding-3-small" || !ds.EmbeddingAvailable {
					t.Errorf("embedding %s available=%v", ds.EmbeddingModel, ds.EmbeddingAvailable)
				}
			}},
		{name: "blank name → 400", params: datasets.CreateParams{Name: "   "}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "name of 41 characters → 400", params: datasets.CreateParams{Name: strings.Repeat("é", 41)}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "description of 401 characters → 400", params: datasets.CreateParams{Name: "D", Description: ptr(strings.Repeat("x", 401))}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "external provider → 400", params: datasets.CreateParams{Name: "Ext", Provider: ptr("external")}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "unknown permission → 400", params: datasets.CreateParams{Name: "P", Permission: ptr("everyone")}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "embedding model name of 256 characters → 400", params: datasets.CreateParams{Name: "L", EmbeddingModelProvider: ptr("appkb"),
			EmbeddingModel: ptr(strings.Repeat("ä", 256))}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "reranking model name of 256 characters → 400", params: datasets.CreateParams{Name: "L", RetrievalModel: &datasets.RetrievalModel{
			SearchMethod: "semantic_search", TopK: 2, RerankingEnable: true,
			RerankingModel: &datasets.RerankingModel{ProviderName: "appkb", ModelName: strings.Repeat("r", 256)}}},
			wantStatus: 400, wantCode: "invalid_param"},
		{name: "embedding model without provider → 400", params: datasets.CreateParams{Name: "E", EmbeddingModel: ptr("x")}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "unconfigured embedding provider in strict mode → 400", models: strict,
			params: datasets.CreateParams{Name: "E", EmbeddingModel: ptr("m"), EmbeddingModelProvider: ptr("cohere")}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "unconfigured rerank provider in strict mode → 400", models: strict,
			params: datasets.CreateParams{Name: "R", RetrievalModel: &datasets.RetrievalModel{SearchMethod: "semantic_search", TopK: 2,
				RerankingEnable: true, RerankingModel: &datasets.RerankingModel{ProviderName: "cohere", ModelName: "rerank-3"}}},
			wantStatus: 400, wantCode: "invalid_param"},
		{name: "top_k 0 → 400", params: datasets.CreateParams{Name: "K", RetrievalModel: &datasets.RetrievalModel{SearchMethod: "semantic_search"}},
			wantStatus: 400, wantCode: "invalid_param"},
		{name: "score threshold above 1 → 400", params: datasets.CreateParams{Name: "S", RetrievalModel: &datasets.RetrievalModel{
			SearchMethod: "semantic_search", TopK: 1, ScoreThreshold: ptr(1.5)}}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "unknown search method → 400", params: datasets.CreateParams{Name: "M", RetrievalModel: &datasets.RetrievalModel{
			SearchMethod: "magic", TopK: 1}}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "a scoped key cannot create → 403", params: datasets.CreateParams{Name: "Scoped"}, wantStatus: 403, wantCode: "forbidden"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := datasets.NewStore(db.OpenTemp(t), tc.models)
			actor := workspace
			if tc.wantCode == "forbidden" {
				actor = datasets.Actor{KeyID: "k", Datasets: []string{"x"}}
			}
			ds, err := s.CreateDataset(ctx, actor, tc.params)
			wantErr(t, err, tc.wantStatus, tc.wantCode)
			if tc.check != nil {
				tc.check(t, ds)
				got, err := s.GetDataset(ctx, actor, ds.ID)
				if err != nil {
					t.Fatal(err)
				}
				a, _ := json.Marshal(ds)
				b, _ := json.Marshal(got)
				if string(a) != string(b) {
					t.Errorf("read back differs:\n%s\n%s", a, b)
				}
			}
		})
	}
}

func TestDatasetNamesAreUnique(t *testing.T) {
	s := newStore(t)
	a := mustCreate(t, s, "Alpha")
	b := mustCreate(t, s, "Beta")

	_, err := s.CreateDataset(ctx, workspace, datasets.CreateParams{Name: "Alpha"})
	wantErr(t, err, http.StatusConflict, apperr.CodeDatasetNameDuplicate)
	_, err = s.CreateDataset(ctx, workspace, datasets.CreateParams{Name: " Alpha "})
	wantErr(t, err, http.StatusConflict, apperr.CodeDatasetNameDuplicate)
	if _, err := s.CreateDataset(ctx, workspace, datasets.CreateParams{Name: "alpha"}); err != nil {
		t.Errorf("names differ in case: %v", err)
	}
	_, err = s.UpdateDataset(ctx, workspace, b.ID, datasets.UpdateParams{Name: ptr("Alpha")})
	wantErr(t, err, 400, "invalid_param")
	if _, err := s.UpdateDataset(ctx, workspace, a.ID, datasets.UpdateParams{Name: ptr("Alpha")}); err != nil {
		t.Errorf("keeping one's own name: %v", err)
	}
}

func TestUpdateDataset(t *testing.T) {
	strict, err := llm.Parse(nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		params     datasets.UpdateParams
		wantStatus int
		wantCode   string
		check      func(t *testing.T, ds *datasets.Dataset)
	}{
		{name: "nothing given changes nothing", check: func(t *testing.T, ds *datasets.Dataset) {
			if ds.Name != "Orig" || ds.Description != "first" || ds.Permission != "only_me" {
				t.Errorf("%+v", ds)
			}
			if ds.PartialMemberList == nil || len(*ds.PartialMemberList) != 0 {
				t.Errorf("an update shows the (empty) member list: %v", ds.PartialMemberList)
			}
		}},
		{name: "name, description and technique", params: datasets.UpdateParams{Name: ptr("New"), Description: ptr(""), IndexingTechnique: ptr("economy")},
			check: func(t *testing.T, ds *datasets.Dataset) {
				if ds.Name != "New" || ds.Description != "" || *ds.IndexingTechnique != "economy" || ds.RetrievalModelDict.SearchMethod != "keyword_search" {
					t.Errorf("%+v", ds)
				}
			}},
		{name: "partial members are kept with that permission", params: datasets.UpdateParams{Permission: ptr("partial_members"),
			PartialMemberList: &[]string{"u1", "u2", "u1", ""}},
			check: func(t *testing.T, ds *datasets.Dataset) {
				if got := strings.Join(*ds.PartialMemberList, ","); got != "u1,u2" {
					t.Errorf("members %s", got)
				}
			}},
		{name: "partial members are dropped for other permissions", params: datasets.UpdateParams{Permission: ptr("all_team_members"),
			PartialMemberList: &[]string{"u1"}},
			check: func(t *testing.T, ds *datasets.Dataset) {
				if len(*ds.PartialMemberList) != 0 || ds.Permission != "all_team_members" {
					t.Errorf("%s %v", ds.Permission, *ds.PartialMemberList)
				}
			}},
		{name: "embedding model alone keeps the provider", params: datasets.UpdateParams{EmbeddingModel: ptr("builtin-v2")},
			check: func(t *testing.T, ds *datasets.Dataset) {
				if ds.EmbeddingModelProvider != "appkb" || ds.EmbeddingModel != "builtin-v2" {
					t.Errorf("%s/%s", ds.EmbeddingModelProvider, ds.EmbeddingModel)
				}
			}},
		{name: "retrieval model replaces the defaults", params: datasets.UpdateParams{RetrievalModel: &datasets.RetrievalModel{
			SearchMethod: "full_text_search", TopK: 7, MetadataFilteringConditions: &datasets.MetadataFilter{
				LogicalOperator: ptr("or"), Conditions: []datasets.MetadataCondition{{Name: "author", ComparisonOperator: "is", Value: "me"}}}}},
			check: func(t *testing.T, ds *datasets.Dataset) {
				r := ds.RetrievalModelDict
				if r.SearchMethod != "full_text_search" || r.TopK != 7 || r.MetadataFilteringConditions == nil || r.MetadataFilteringConditions.Conditions[0].Value != "me" {
					t.Errorf("%+v", r)
				}
			}},
		{name: "blank name → 400", params: datasets.UpdateParams{Name: ptr("")}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "unknown technique → 400", params: datasets.UpdateParams{IndexingTechnique: ptr("premium")}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "unknown comparison operator → 400", params: datasets.UpdateParams{RetrievalModel: &datasets.RetrievalModel{
			SearchMethod: "semantic_search", TopK: 1, MetadataFilteringConditions: &datasets.MetadataFilter{
				Conditions: []datasets.MetadataCondition{{Name: "a", ComparisonOperator: "like"}}}}}, wantStatus: 400, wantCode: "invalid_param"},
		{name: "unusable embedding provider → 400", params: datasets.UpdateParams{EmbeddingModelProvider: ptr("openai"), EmbeddingModel: ptr("e")},
			wantStatus: 400, wantCode: "invalid_param"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := datasets.NewStore(db.OpenTemp(t), strict)
			orig, err := s.CreateDataset(ctx, workspace, datasets.CreateParams{Name: "Orig", Description: ptr("first")})
			if err != nil {
				t.Fatal(err)
			}
			editor := datasets.Actor{KeyID: "key-editor"}
			ds, err := s.UpdateDataset(ctx, editor, orig.ID, tc.params)
			wantErr(t, err, tc.wantStatus, tc.wantCode)
			if tc.check != nil {
				if ds.UpdatedBy != "key-editor" || ds.CreatedBy != workspace.KeyID {
					t.Errorf("created by %s, updated by %s", ds.CreatedBy, ds.UpdatedBy)
				}
				tc.check(t, ds)
			}
		})
	}
}

func TestStoredRetrievalModelSurvivesTechniqueChange(t *testing.T) {
	s := newStore(t)
	ds := mustCreate(t, s, "R")
	rm := datasets.RetrievalModel{SearchMethod: "semantic_search", TopK: 4}
	if _, err := s.UpdateDataset(ctx, workspace, ds.ID, datasets.UpdateParams{RetrievalModel: &rm}); err != nil {
		t.Fatal(err)
	}
	got, err := s.UpdateDataset(ctx, workspace, ds.ID, datasets.UpdateParams{IndexingTechnique: ptr("economy")})
	if err != nil {
		t.Fatal(err)
	}
	if got.RetrievalModelDict.SearchMethod != "semantic_search" || got.RetrievalModelDict.TopK != 4 {
		t.Errorf("stored settings lost: %+v", got.RetrievalModelDict)
	}
	row, err := s.FindDataset(ctx, workspace, ds.ID)
	if err != nil {
		t.Fatal(err)
	}
	eff, err := datasets.EffectiveRetrievalModel(row)
	if err != nil || eff.TopK != 4 {
		t.Errorf("EffectiveRetrievalModel = %+v, %v", eff, err)
	}
}

func TestListDatasets(t *testing.T) {
	s := newStore(t)
	names := []string{"Product docs", "API reference", "Support FAQ", "100% coverage", "snake_case notes"}
	ids := map[string]string{}
	for _, n := range names {
		ids[n] = mustCreate(t, s, n).ID
	}
	red, err := s.CreateTag(ctx, workspace, "red")
	if err != nil {
		t.Fatal(err)
	}
	blue, err := s.CreateTag(ctx, workspace, "blue")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ tag, ds string }{{red.ID, "Product docs"}, {red.ID, "Support FAQ"}, {blue.ID, "Support FAQ"}, {blue.ID, "API reference"}} {
		if err := s.BindTags(ctx, workspace, ids[b.ds], []string{b.tag}); err != nil {
			t.Fatal(err)
		}
	}
	scoped := datasets.Actor{KeyID: "k2", Datasets: []string{ids["Product docs"], ids["API reference"]}}

	tests := []struct {
		name       string
		actor      datasets.Actor
		params     datasets.ListParams
		want       []string // names in order
		wantTotal  int
		wantMore   bool
		wantStatus int
	}{
		{name: "everything, newest first", params: datasets.ListParams{},
			want: []string{"snake_case notes", "100% coverage", "Support FAQ", "API reference", "Product docs"}, wantTotal: 5},
		{name: "first page of two", params: datasets.ListParams{Limit: 2},
			want: []string{"snake_case notes", "100% coverage"}, wantTotal: 5, wantMore: true},
		{name: "last page of two", params: datasets.ListParams{Page: 3, Limit: 2},
			want: []string{"Product docs"}, wantTotal: 5},
		{name: "a page past the end is empty", params: datasets.ListParams{Page: 9, Limit: 2}, want: []string{}, wantTotal: 5},
		{name: "keyword ignores case", params: datasets.ListParams{Keyword: "DOCS"}, want: []string{"Product docs"}, wantTotal: 1},
		{name: "a percent sign is literal", params: datasets.ListParams{Keyword: "%"}, want: []string{"100% coverage"}, wantTotal: 1},
		{name: "an underscore is literal", params: datasets.ListParams{Keyword: "_"}, want: []string{"snake_case notes"}, wantTotal: 1},
		{name: "one tag", params: datasets.ListParams{TagIDs: []string{red.ID}}, want: []string{"Support FAQ", "Product docs"}, wantTotal: 2},
		{name: "any of several tags", params: datasets.ListParams{TagIDs: []string{red.ID, blue.ID}},
			want: []string{"Support FAQ", "API reference", "Product docs"}, wantTotal: 3},
		{name: "tag and keyword together", params: datasets.ListParams{TagIDs: []string{blue.ID}, Keyword: "faq"}, want: []string{"Support FAQ"}, wantTotal: 1},
		{name: "unknown tag matches nothing", params: datasets.ListParams{TagIDs: []string{"nope"}}, want: []string{}, wantTotal: 0},
		{name: "blank tag ids are ignored", params: datasets.ListParams{TagIDs: []string{""}, Limit: 1},
			want: []string{"snake_case notes"}, wantTotal: 5, wantMore: true},
		{name: "a scoped key sees its own only", actor: scoped, params: datasets.ListParams{},
			want: []string{"API reference", "Product docs"}, wantTotal: 2},
		{name: "a scoped key with a tag filter", actor: scoped, params: datasets.ListParams{TagIDs: []string{red.ID}},
			want: []string{"Product docs"}, wantTotal: 1},
		{name: "limit above the maximum → 400", params: datasets.ListParams{Limit: 101}, wantStatus: 400},
		{name: "negative page → 400", params: datasets.ListParams{Page: -1}, wantStatus: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			actor := tc.actor
			if actor.KeyID == "" {
				actor = workspace
			}
			page, err := s.ListDatasets(ctx, actor, tc.params)
			if tc.wantStatus != 0 {
				wantErr(t, err, tc.wantStatus, "invalid_param")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if page.Total != tc.wantTotal || page.HasMore != tc.wantMore {
				t.Errorf("total %d has_more %v, want %d %v", page.Total, page.HasMore, tc.wantTotal, tc.wantMore)
			}
			var got []string
			for _, d := range page.Data {
				got = append(got, d.Name)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestScopedActor(t *testing.T) {
	s := newStore(t)
	mine := mustCreate(t, s, "Mine")
	other := mustCreate(t, s, "Other")
	scoped := datasets.Actor{KeyID: "k", Datasets: []string{mine.ID}}
	tag, err := s.CreateTag(ctx, workspace, "t")
	if err != nil {
		t.Fatal(err)
	}

	forbidden := []struct {
		name string
		call func() error
	}{
		{"get another knowledge base", func() error { _, err := s.GetDataset(ctx, scoped, other.ID); return err }},
		{"update another knowledge base", func() error {
			_, err := s.UpdateDataset(ctx, scoped, other.ID, datasets.UpdateParams{Name: ptr("x")})
			return err
		}},
		{"delete another knowledge base", func() error { return s.DeleteDataset(ctx, scoped, other.ID) }},
		{"create a knowledge base", func() error {
			_, err := s.CreateDataset(ctx, scoped, datasets.CreateParams{Name: "New"})
			return err
		}},
		{"create a tag", func() error { _, err := s.CreateTag(ctx, scoped, "x"); return err }},
		{"rename a tag", func() error { _, err := s.RenameTag(ctx, scoped, tag.ID, "y"); return err }},
		{"delete a tag", func() error { return s.DeleteTag(ctx, scoped, tag.ID) }},
		{"bind a tag to another knowledge base", func() error { return s.BindTags(ctx, scoped, other.ID, []string{tag.ID}) }},
		{"unbind a tag from another knowledge base", func() error { return s.UnbindTags(ctx, scoped, other.ID, []string{tag.ID}) }},
		{"list tags of another knowledge base", func() error { _, err := s.DatasetTags(ctx, scoped, other.ID); return err }},
		{"add metadata to another knowledge base", func() error {
			_, err := s.CreateMetadataField(ctx, scoped, other.ID, "a", "string")
			return err
		}},
		{"switch built-in fields of another knowledge base", func() error { return s.SetBuiltInFields(ctx, scoped, other.ID, true) }},
	}
	for _, tc := range forbidden {
		t.Run(tc.name+" → 403", func(t *testing.T) { wantErr(t, tc.call(), 403, "forbidden") })
	}

	t.Run("its own knowledge base works", func(t *testing.T) {
		if _, err := s.UpdateDataset(ctx, scoped, mine.ID, datasets.UpdateParams{Description: ptr("d")}); err != nil {
			t.Fatal(err)
		}
		if err := s.BindTags(ctx, scoped, mine.ID, []string{tag.ID}); err != nil {
			t.Fatal(err)
		}
		if err := s.BindTags(ctx, workspace, other.ID, []string{tag.ID}); err != nil {
			t.Fatal(err)
		}
		tags, err := s.ListTags(ctx, scoped)
		if err != nil || len(tags) != 1 || tags[0].BindingCount != "1" {
			t.Errorf("scoped count: %+v %v", tags, err)
		}
		tags, err = s.ListTags(ctx, workspace)
		if err != nil || len(tags) != 1 || tags[0].BindingCount != "2" {
			t.Errorf("workspace count: %+v %v", tags, err)
		}
	})
}

func TestDeleteDatasetCascades(t *testing.T) {
	gdb := db.OpenTemp(t)
	s := datasets.NewStore(gdb, nil)
	ds := mustCreate(t, s, "Doomed")
	keep := mustCreate(t, s, "Kept")
	tag, err := s.CreateTag(ctx, workspace, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{ds.ID, keep.ID} {
		if err := s.BindTags(ctx, workspace, id, []string{tag.ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateMetadataField(ctx, workspace, id, "author", "string"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteDataset(ctx, workspace, ds.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.DeleteDataset(ctx, workspace, ds.ID), 404, "not_found")
	_, err = s.GetDataset(ctx, workspace, ds.ID)
	wantErr(t, err, 404, "not_found")

	count := func(model any) int64 {
		var n int64
		if err := gdb.Model(model).Where("dataset_id = ?", ds.ID).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(&models.DatasetTagBinding{}); n != 0 {
		t.Errorf("%d tag bindings left", n)
	}
	if n := count(&models.DatasetMetadataField{}); n != 0 {
		t.Errorf("%d metadata fields left", n)
	}
	tags, err := s.ListTags(ctx, workspace)
	if err != nil || len(tags) != 1 || tags[0].BindingCount != "1" {
		t.Errorf("the tag stays, bound to the other one: %+v %v", tags, err)
	}
	kept, err := s.GetDataset(ctx, workspace, keep.ID)
	if err != nil || len(kept.Tags) != 1 || len(kept.DocMetadata) != 1 {
		t.Errorf("the other knowledge base lost something: %+v %v", kept, err)
	}
}
