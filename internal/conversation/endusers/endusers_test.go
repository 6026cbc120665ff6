package endusers_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"appkb/db"
	"appkb/internal/conversation/endusers"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

func TestResolve(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	var appIDs []string
	for _, name := range []string{"a", "b"} {
		app := &models.App{Name: name, Mode: "chat", Definition: "x"}
		if err := gdb.Create(app).Error; err != nil {
			t.Fatal(err)
		}
		appIDs = append(appIDs, app.ID)
	}
	store := endusers.NewStore(gdb)

	// Many concurrent first uses of one name end with one row.
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			eu, err := store.Resolve(ctx, appIDs[0], "alice")
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = eu.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent resolves gave different end users: %v", ids)
		}
	}

	tests := []struct {
		name     string
		app      string
		user     string
		sameAs   string // id it must equal, or "" for a new one
		wantCode string
	}{
		{"same name same app", appIDs[0], "alice", ids[0], ""},
		{"same name other app", appIDs[1], "alice", "", ""},
		{"empty user", appIDs[0], "  ", "", apperr.CodeInvalidParam},
		{"too long", appIDs[0], strings.Repeat("x", 256), "", apperr.CodeInvalidParam},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eu, err := store.Resolve(ctx, tc.app, tc.user)
			if tc.wantCode != "" {
				if !apperr.Is(err, tc.wantCode) {
					t.Fatalf("err = %v, want %s", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tc.sameAs != "") != (eu.ID == tc.sameAs) {
				t.Errorf("id %s, same-as %q", eu.ID, tc.sameAs)
			}
			if _, err := store.Get(ctx, tc.app, eu.ID); err != nil {
				t.Errorf("Get: %v", err)
			}
		})
	}
	if _, err := store.Get(ctx, appIDs[1], ids[0]); err == nil {
		t.Error("an end user of app a is visible to app b")
	}

	// Deleting the app removes its end users (cascade); the cache must not
	// keep answering with the removed row.
	if err := gdb.Exec("DELETE FROM apps WHERE id = ?", appIDs[0]).Error; err != nil {
		t.Fatal(err)
	}
	if eu, err := store.Resolve(ctx, appIDs[0], "alice"); err == nil && eu.ID == ids[0] {
		t.Error("a deleted end user was served from the cache")
	}
}
