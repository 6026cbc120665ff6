package demo_test

import (
	"context"
	"testing"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/cli/demo"
)

func TestEnsureReusesTheAppAndRotatesItsKeys(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	appStore, keyStore := apps.NewStore(gdb), apikeys.NewStore(gdb)

	first, err := demo.Ensure(ctx, appStore, keyStore)
	if err != nil {
		t.Fatal(err)
	}
	second, err := demo.Ensure(ctx, appStore, keyStore)
	if err != nil {
		t.Fatal(err)
	}
	if first.AppID != second.AppID || first.CompletionAppID != second.CompletionAppID {
		t.Errorf("second start made another app: %s vs %s", first.AppID, second.AppID)
	}
	list, _ := appStore.List(ctx)
	if len(list) != 2 {
		t.Errorf("%d apps, want 2 (chat and completion)", len(list))
	}
	tests := []struct {
		name    string
		key     string
		wantErr bool
	}{
		{"old app key is revoked", first.AppKey, true},
		{"old knowledge key is revoked", first.KnowledgeKey, true},
		{"old completion app key is revoked", first.CompletionAppKey, true},
		{"new completion app key works", second.CompletionAppKey, false},
		{"new app key works", second.AppKey, false},
		{"new knowledge key works", second.KnowledgeKey, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := keyStore.Authenticate(ctx, tc.key)
			if (err != nil) != tc.wantErr {
				t.Errorf("Authenticate err = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}
