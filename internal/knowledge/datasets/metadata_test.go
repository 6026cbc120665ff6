package datasets_test

import (
	"strings"
	"testing"

	"appkb/internal/knowledge/datasets"
)

func TestMetadataFields(t *testing.T) {
	s := newStore(t)
	a := mustCreate(t, s, "A")
	b := mustCreate(t, s, "B")
	author, err := s.CreateMetadataField(ctx, workspace, a.ID, "author", "string")
	if err != nil {
		t.Fatal(err)
	}
	inB, err := s.CreateMetadataField(ctx, workspace, b.ID, "pages", "number")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("create", func(t *testing.T) {
		tests := []struct {
			name, dataset, field, typ string
			wantStatus                int
			wantCode                  string
		}{
			{"a number field", a.ID, "pages", "number", 0, ""},
			{"a time field", a.ID, "published", "time", 0, ""},
			{"255 characters", a.ID, strings.Repeat("n", 255), "string", 0, ""},
			{"the same name in another knowledge base", b.ID, "author", "string", 0, ""},
			{"a taken name → 400", a.ID, "author", "number", 400, "invalid_param"},
			{"a built-in name → 400", a.ID, "upload_date", "time", 400, "invalid_param"},
			{"256 characters → 400", a.ID, strings.Repeat("n", 256), "string", 400, "invalid_param"},
			{"a blank name → 400", a.ID, "  ", "string", 400, "invalid_param"},
			{"an unknown type → 400", a.ID, "flag", "boolean", 400, "invalid_param"},
			{"an unknown knowledge base → 404", "no-such-dataset", "x", "string", 404, "not_found"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				f, err := s.CreateMetadataField(ctx, workspace, tc.dataset, tc.field, tc.typ)
				wantErr(t, err, tc.wantStatus, tc.wantCode)
				if err == nil && (f.Name != tc.field || f.Type != tc.typ || f.ID == "") {
					t.Errorf("field %+v", f)
				}
			})
		}
	})

	t.Run("rename", func(t *testing.T) {
		tests := []struct {
			name, dataset, id, field string
			wantStatus               int
			wantCode                 string
		}{
			{"to a new name", a.ID, author.ID, "writer", 0, ""},
			{"to a taken name → 400", a.ID, author.ID, "pages", 400, "invalid_param"},
			{"to a built-in name → 400", a.ID, author.ID, "source", 400, "invalid_param"},
			{"a field of another knowledge base → 404", a.ID, inB.ID, "x", 404, "not_found"},
			{"an unknown field → 404", a.ID, "no-such-field", "x", 404, "not_found"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				f, err := s.RenameMetadataField(ctx, workspace, tc.dataset, tc.id, tc.field)
				wantErr(t, err, tc.wantStatus, tc.wantCode)
				if err == nil && (f.Name != tc.field || f.Type != "string") {
					t.Errorf("field %+v", f)
				}
			})
		}
	})

	t.Run("list", func(t *testing.T) {
		list, err := s.ListMetadataFields(ctx, workspace, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range list.DocMetadata {
			names = append(names, f.Name)
			if f.Count != 0 {
				t.Errorf("%s used by %d documents", f.Name, f.Count)
			}
		}
		if got := strings.Join(names, ","); got != "writer,pages,published,"+strings.Repeat("n", 255) || list.BuiltInFieldEnabled {
			t.Errorf("fields %s, built-in %v", got, list.BuiltInFieldEnabled)
		}
	})

	t.Run("delete", func(t *testing.T) {
		wantErr(t, s.DeleteMetadataField(ctx, workspace, a.ID, inB.ID), 404, "not_found")
		if err := s.DeleteMetadataField(ctx, workspace, a.ID, author.ID); err != nil {
			t.Fatal(err)
		}
		wantErr(t, s.DeleteMetadataField(ctx, workspace, a.ID, author.ID), 404, "not_found")
		if _, err := s.CreateMetadataField(ctx, workspace, a.ID, "writer", "string"); err != nil {
			t.Errorf("the name is free again: %v", err)
		}
	})
}

func TestBuiltInFields(t *testing.T) {
	s := newStore(t)
	ds := mustCreate(t, s, "A")
	if _, err := s.CreateMetadataField(ctx, workspace, ds.ID, "author", "string"); err != nil {
		t.Fatal(err)
	}
	fields, err := s.GetBuiltInFields(ctx, workspace, ds.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fields {
		got = append(got, f.Name+":"+f.Type)
	}
	want := "document_name:string,uploader:string,upload_date:time,last_update_date:time,source:string"
	if strings.Join(got, ",") != want {
		t.Errorf("built-in fields %s", strings.Join(got, ","))
	}
	_, err = s.GetBuiltInFields(ctx, workspace, "no-such-dataset")
	wantErr(t, err, 404, "not_found")
	wantErr(t, s.SetBuiltInFields(ctx, workspace, "no-such-dataset", true), 404, "not_found")

	for _, enabled := range []bool{true, true, false} {
		if err := s.SetBuiltInFields(ctx, workspace, ds.ID, enabled); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetDataset(ctx, workspace, ds.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantLen := 1
		if enabled {
			wantLen = 6
		}
		if got.BuiltInFieldEnabled != enabled || len(got.DocMetadata) != wantLen {
			t.Fatalf("enabled=%v: %v %+v", enabled, got.BuiltInFieldEnabled, got.DocMetadata)
		}
		if enabled && (got.DocMetadata[0].Name != "author" || got.DocMetadata[1] != (datasets.MetadataField{ID: "built-in", Name: "document_name", Type: "string"})) {
			t.Errorf("doc_metadata %+v", got.DocMetadata)
		}
		list, err := s.ListMetadataFields(ctx, workspace, ds.ID)
		if err != nil || list.BuiltInFieldEnabled != enabled || len(list.DocMetadata) != 1 {
			t.Errorf("list: %+v %v", list, err)
		}
	}
}
