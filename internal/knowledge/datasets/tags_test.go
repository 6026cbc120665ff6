package datasets_test

import (
	"strings"
	"testing"

	"appkb/internal/knowledge/datasets"
)

func TestTags(t *testing.T) {
	s := newStore(t)
	a := mustCreate(t, s, "A")
	b := mustCreate(t, s, "B")
	first, err := s.CreateTag(ctx, workspace, "first")
	if err != nil {
		t.Fatal(err)
	}
	if first.BindingCount != "0" || first.Type != "knowledge" {
		t.Errorf("new tag %+v", first)
	}

	t.Run("create", func(t *testing.T) {
		tests := []struct {
			name       string
			tag        string
			wantStatus int
		}{
			{"a new name", "second", 0},
			{"fifty characters", strings.Repeat("ж", 50), 0},
			{"a taken name → 400", "first", 400},
			{"a taken name with spaces around → 400", "  first ", 400},
			{"a blank name → 400", " ", 400},
			{"fifty-one characters → 400", strings.Repeat("x", 51), 400},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, err := s.CreateTag(ctx, workspace, tc.tag)
				if tc.wantStatus == 0 {
					wantErr(t, err, 0, "")
				} else {
					wantErr(t, err, tc.wantStatus, "invalid_param")
				}
			})
		}
	})

	t.Run("rename", func(t *testing.T) {
		tests := []struct {
			name       string
			id, tag    string
			wantStatus int
			wantCode   string
		}{
			{"to a new name", first.ID, "renamed", 0, ""},
			{"to its own name", first.ID, "renamed", 0, ""},
			{"to another tag's name → 400", first.ID, "second", 400, "invalid_param"},
			{"an unknown tag → 404", "no-such-tag", "whatever", 404, "not_found"},
			{"an unknown tag to a taken name → 404", "no-such-tag", "second", 404, "not_found"},
			{"to a blank name → 400", first.ID, "", 400, "invalid_param"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				tag, err := s.RenameTag(ctx, workspace, tc.id, tc.tag)
				wantErr(t, err, tc.wantStatus, tc.wantCode)
				if err == nil && (tag.Name != tc.tag || tag.ID != tc.id) {
					t.Errorf("renamed tag %+v", tag)
				}
			})
		}
	})

	t.Run("binding counts", func(t *testing.T) {
		if err := s.BindTags(ctx, workspace, a.ID, []string{first.ID, "unknown-tag", first.ID}); err != nil {
			t.Fatal(err)
		}
		if err := s.BindTags(ctx, workspace, a.ID, []string{first.ID}); err != nil {
			t.Fatalf("binding twice: %v", err)
		}
		if err := s.BindTags(ctx, workspace, b.ID, []string{first.ID}); err != nil {
			t.Fatal(err)
		}
		tags, err := s.ListTags(ctx, workspace)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]string{}
		for _, tag := range tags {
			counts[tag.Name] = tag.BindingCount
		}
		if counts["renamed"] != "2" || counts["second"] != "0" || len(tags) != 3 {
			t.Errorf("counts %v", counts)
		}
		if tags[0].Name != strings.Repeat("ж", 50) || tags[2].Name != "renamed" {
			t.Errorf("not newest first: %+v", tags)
		}
		renamed, err := s.RenameTag(ctx, workspace, first.ID, "renamed")
		if err != nil || renamed.BindingCount != "2" {
			t.Errorf("rename reports the count: %+v %v", renamed, err)
		}
		refs, err := s.DatasetTags(ctx, workspace, a.ID)
		if err != nil || len(refs) != 1 || refs[0].Name != "renamed" {
			t.Errorf("tags of A: %+v %v", refs, err)
		}
		ds, err := s.GetDataset(ctx, workspace, a.ID)
		if err != nil || len(ds.Tags) != 1 || ds.Tags[0] != (datasets.DatasetTag{ID: first.ID, Name: "renamed", Type: "knowledge"}) {
			t.Errorf("tags in the knowledge base: %+v %v", ds.Tags, err)
		}
	})

	t.Run("binding errors", func(t *testing.T) {
		wantErr(t, s.BindTags(ctx, workspace, "no-such-dataset", []string{first.ID}), 404, "not_found")
		wantErr(t, s.UnbindTags(ctx, workspace, "no-such-dataset", []string{first.ID}), 404, "not_found")
		wantErr(t, s.BindTags(ctx, workspace, a.ID, []string{" "}), 400, "invalid_param")
		wantErr(t, s.UnbindTags(ctx, workspace, a.ID, nil), 400, "invalid_param")
		_, err := s.DatasetTags(ctx, workspace, "no-such-dataset")
		wantErr(t, err, 404, "not_found")
	})

	t.Run("unbind", func(t *testing.T) {
		if err := s.UnbindTags(ctx, workspace, b.ID, []string{first.ID, "never-bound"}); err != nil {
			t.Fatal(err)
		}
		refs, err := s.DatasetTags(ctx, workspace, b.ID)
		if err != nil || len(refs) != 0 {
			t.Errorf("tags of B after unbinding: %+v %v", refs, err)
		}
	})

	t.Run("delete", func(t *testing.T) {
		if err := s.DeleteTag(ctx, workspace, first.ID); err != nil {
			t.Fatal(err)
		}
		wantErr(t, s.DeleteTag(ctx, workspace, first.ID), 404, "not_found")
		refs, err := s.DatasetTags(ctx, workspace, a.ID)
		if err != nil || len(refs) != 0 {
			t.Errorf("bindings outlive their tag: %+v %v", refs, err)
		}
		if _, err := s.GetDataset(ctx, workspace, a.ID); err != nil {
			t.Errorf("the knowledge base must stay: %v", err)
		}
	})
}
