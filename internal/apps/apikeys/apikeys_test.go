package apikeys_test

import (
	"context"
	"strings"
	"testing"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/apps/apikeys"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

func newStore(t *testing.T) (*apikeys.Store, string) {
	t.Helper()
	gdb := db.OpenTemp(t)
	app := &models.App{Name: "a", Mode: "chat", Definition: "app: {name: a, mode: chat}"}
	if err := gdb.Create(app).Error; err != nil {
		t.Fatal(err)
	}
	return apikeys.NewStore(gdb), app.ID
}

func TestKeysAreStoredOnlyAsHashes(t *testing.T) {
	gdb := db.OpenTemp(t)
	store := apikeys.NewStore(gdb)
	key, err := store.CreateKnowledgeKey(context.Background(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var rows []models.APIKey
	gdb.Find(&rows)
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	if strings.Contains(rows[0].Hash, key) || strings.Contains(rows[0].Prefix, key) || len(rows[0].Hash) != 64 {
		t.Errorf("stored row reveals the key: %+v", rows[0])
	}
}

func TestAuthenticate(t *testing.T) {
	ctx := context.Background()
	store, appID := newStore(t)
	appKey, err := store.CreateAppKey(ctx, appID, "")
	if err != nil {
		t.Fatal(err)
	}
	wide, _ := store.CreateKnowledgeKey(ctx, nil, "")
	scoped, _ := store.CreateKnowledgeKey(ctx, []string{"d1", "d2", "d1", " "}, "")

	tests := []struct {
		name     string
		token    string
		wantKind string
		wantApp  string
		may      map[string]bool
	}{
		{"app key", appKey, models.KeyKindApp, appID, map[string]bool{"d1": false}},
		{"workspace knowledge key", wide, models.KeyKindKnowledge, "", map[string]bool{"d1": true, "zz": true}},
		{"scoped knowledge key", scoped, models.KeyKindKnowledge, "", map[string]bool{"d1": true, "d2": true, "zz": false}},
		{"unknown key", "app-nope", "", "", nil},
		{"key text altered", altered(appKey), "", "", nil},
		{"no prefix", "secret", "", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := store.Authenticate(ctx, tc.token)
			if tc.wantKind == "" {
				if !apperr.Is(err, apperr.CodeUnauthorized) {
					t.Fatalf("err = %v, want unauthorized", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Kind != tc.wantKind || p.AppID != tc.wantApp {
				t.Errorf("principal = %+v", p)
			}
			for ds, want := range tc.may {
				if got := p.MayUseDataset(ds); got != want {
					t.Errorf("MayUseDataset(%s) = %v, want %v", ds, got, want)
				}
			}
		})
	}
}

func TestCreateAppKeyForMissingApp(t *testing.T) {
	store, _ := newStore(t)
	if _, err := store.CreateAppKey(context.Background(), "no-such-app", ""); !apperr.Is(err, apperr.CodeNotFound) {
		t.Fatalf("err = %v, want not_found", err)
	}
}

func TestRevoke(t *testing.T) {
	ctx := context.Background()
	store, appID := newStore(t)
	k1, _ := store.CreateAppKey(ctx, appID, "")
	k2, _ := store.CreateAppKey(ctx, appID, "")

	tests := []struct {
		name     string
		prefix   string
		wantCode string
	}{
		{"too short a prefix is refused", "app-", apperr.CodeInvalidParam},
		{"unknown prefix", "app-ZZZZZZZZ", apperr.CodeNotFound},
		{"by shown prefix", k1[:12], ""},
		{"already revoked", k1[:12], apperr.CodeNotFound},
		{"by whole key", k2, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := store.Revoke(ctx, tc.prefix)
			if tc.wantCode == "" && err != nil {
				t.Fatal(err)
			}
			if tc.wantCode != "" && !apperr.Is(err, tc.wantCode) {
				t.Fatalf("err = %v, want %s", err, tc.wantCode)
			}
		})
	}
	for _, k := range []string{k1, k2} {
		if _, err := store.Authenticate(ctx, k); !apperr.Is(err, apperr.CodeUnauthorized) {
			t.Errorf("revoked key still works: %v", err)
		}
	}
	list, _ := store.List(ctx)
	for _, info := range list {
		if info.RevokedAt == nil {
			t.Errorf("key %s not marked revoked", info.Prefix)
		}
	}
}

// TestRevokedKeyIsNeverServedFromCache authenticates a key (filling the
// cache), revokes it by each route a change can take, and expects the very
// next lookup to fail.
func TestRevokedKeyIsNeverServedFromCache(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		revoke func(t *testing.T, gdb *gorm.DB, key string)
	}{
		{"another store revokes (another process)", func(t *testing.T, gdb *gorm.DB, key string) {
			if _, err := apikeys.NewStore(gdb).Revoke(ctx, key); err != nil {
				t.Fatal(err)
			}
		}},
		{"raw SQL update", func(t *testing.T, gdb *gorm.DB, key string) {
			if err := gdb.Exec(`UPDATE api_keys SET revoked_at = CURRENT_TIMESTAMP`).Error; err != nil {
				t.Fatal(err)
			}
		}},
		{"row deleted", func(t *testing.T, gdb *gorm.DB, key string) {
			if err := gdb.Exec(`DELETE FROM api_keys`).Error; err != nil {
				t.Fatal(err)
			}
		}},
		{"labelled keys revoked", func(t *testing.T, gdb *gorm.DB, key string) {
			if err := apikeys.NewStore(gdb).RevokeLabelled(ctx, "demo"); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gdb := db.OpenTemp(t)
			store := apikeys.NewStore(gdb)
			key, err := store.CreateKnowledgeKey(ctx, nil, "demo")
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second lookup is served from the cache
				if _, err := store.Authenticate(ctx, key); err != nil {
					t.Fatalf("before revocation: %v", err)
				}
			}
			tt.revoke(t, gdb, key)
			if _, err := store.Authenticate(ctx, key); apperr.From(err).Code != apperr.CodeUnauthorized {
				t.Fatalf("after revocation: got %v, want unauthorized", err)
			}
		})
	}
}

// TestScopeChangeReachesCache adds a knowledge base to a scoped key behind
// the store's back and expects the next lookup to see it.
func TestScopeChangeReachesCache(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	store := apikeys.NewStore(gdb)
	key, _ := store.CreateKnowledgeKey(ctx, []string{"d1"}, "")
	p, err := store.Authenticate(ctx, key)
	if err != nil || p.MayUseDataset("d2") {
		t.Fatalf("before: %v, %+v", err, p)
	}
	if err := gdb.Exec(`INSERT INTO api_key_datasets (api_key_id, dataset_id) VALUES (?, 'd2')`, p.KeyID).Error; err != nil {
		t.Fatal(err)
	}
	if p, err = store.Authenticate(ctx, key); err != nil || !p.MayUseDataset("d2") {
		t.Fatalf("after: %v, %+v", err, p)
	}
}

// altered changes the last character of key to another one (a random key
// may already end in any given character).
func altered(key string) string {
	last := "x"
	if strings.HasSuffix(key, "x") {
		last = "y"
	}
	return key[:len(key)-1] + last
}
