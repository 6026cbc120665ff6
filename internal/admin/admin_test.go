package admin

import (
	"context"
	"os"
	"strings"
	"testing"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

func newService(t *testing.T) (*Service, *apikeys.Store) {
	t.Helper()
	gdb := db.OpenTemp(t)
	reg, err := llm.Parse(nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	keys := apikeys.NewStore(gdb)
	return New(gdb, apps.NewStore(gdb), keys, datasets.NewStore(gdb, reg), documents.NewService(gdb, reg, t.TempDir()), nil), keys
}

func readApp(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/apps/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestApps(t *testing.T) {
	ctx := context.Background()
	s, keys := newService(t)
	a, err := s.ImportApp(ctx, readApp(t, "chat.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == "" || a.Mode != "chat" || !strings.HasPrefix(a.APIKey, apikeys.AppPrefix) {
		t.Fatalf("imported %+v", a)
	}
	p, err := keys.Authenticate(ctx, a.APIKey)
	if err != nil || p.AppID != a.ID {
		t.Fatalf("the new key: %+v, %v", p, err)
	}
	second, err := s.CreateAppKey(ctx, a.ID)
	if err != nil || second == a.APIKey {
		t.Fatalf("another key: %q, %v", second, err)
	}
	if _, err := s.RevokeKey(ctx, a.APIKey); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Authenticate(ctx, a.APIKey); !apperr.Is(err, apperr.CodeUnauthorized) {
		t.Fatalf("a revoked key still works: %v", err)
	}
	changed := strings.Replace(string(readApp(t, "chat.yml")), "name: ", "name: Renamed ", 1)
	r, err := s.ReplaceApp(ctx, a.ID, []byte(changed))
	if err != nil || r.ID != a.ID || !strings.HasPrefix(r.Name, "Renamed ") {
		t.Fatalf("replaced: %+v, %v", r, err)
	}
	if _, err := s.ReplaceApp(ctx, a.ID, readApp(t, "completion.yml")); !apperr.Is(err, apperr.CodeInvalidParam) {
		t.Fatalf("replacing a chat app by a completion app: %v", err)
	}
	if _, err := s.ImportApp(ctx, []byte("not: [a dsl")); err == nil {
		t.Fatal("a broken DSL was imported")
	}
	list, err := s.ListApps(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("list %+v, %v", list, err)
	}
	if err := s.DeleteApp(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Authenticate(ctx, second); !apperr.Is(err, apperr.CodeUnauthorized) {
		t.Fatalf("the key of a deleted app still works: %v", err)
	}
	if err := s.DeleteApp(ctx, a.ID); !apperr.Is(err, apperr.CodeNotFound) {
		t.Fatalf("deleting it again: %v", err)
	}
	if _, err := s.CreateAppKey(ctx, a.ID); !apperr.Is(err, apperr.CodeNotFound) {
		t.Fatalf("a key for a deleted app: %v", err)
	}
}

func TestKnowledgeAndReset(t *testing.T) {
	ctx := context.Background()
	s, keys := newService(t)
	kb, err := s.CreateKnowledgeBase(ctx, "handbook", "", []Doc{
		{Name: "bikes.txt", Text: "Bicycles may be parked in the courtyard racks."},
		{Text: "Travel expenses are paid back within ten days."},
	})
	if err != nil {
		t.Fatal(err)
	}
	if kb.ID == "" || len(kb.DocumentIDs) != 2 || len(kb.Batches) != 2 {
		t.Fatalf("made %+v", kb)
	}
	p, err := keys.Authenticate(ctx, kb.APIKey)
	if err != nil || !p.MayUseDataset(kb.ID) || p.MayUseDataset("other") {
		t.Fatalf("its key is not scoped to it: %+v, %v", p, err)
	}
	if _, err := s.CreateKnowledgeBase(ctx, "handbook", "", nil); !apperr.Is(err, apperr.CodeDatasetNameDuplicate) {
		t.Fatalf("a second knowledge base of the same name: %v", err)
	}
	if _, err := s.CreateKnowledgeKey(ctx, []string{"no-such-dataset"}); !apperr.Is(err, apperr.CodeNotFound) {
		t.Fatalf("a key for a missing knowledge base: %v", err)
	}
	wide, err := s.CreateKnowledgeKey(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ImportApp(ctx, readApp(t, "chat.yml")); err != nil {
		t.Fatal(err)
	}

	if err := s.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]any{"apps": &models.App{}, "datasets": &models.Dataset{}, "documents": &models.Document{},
		"api_keys": &models.APIKey{}, "segments": &models.Segment{}} {
		var n int64
		if err := s.db.Model(m).Count(&n).Error; err != nil || n != 0 {
			t.Errorf("after reset %s holds %d rows (%v)", name, n, err)
		}
	}
	if _, err := keys.Authenticate(ctx, wide); !apperr.Is(err, apperr.CodeUnauthorized) {
		t.Fatalf("a key survived the reset: %v", err)
	}
	if _, err := s.CreateKnowledgeBase(ctx, "handbook", "", nil); err != nil {
		t.Fatalf("the name is free again after a reset: %v", err)
	}
}
