package apps_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"appkb/apperr"
	"appkb/apps"
	"appkb/db"
	"appkb/models"
)

func TestImport(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		wantMode string
		wantErr  string // part of the message
	}{
		{"chat app", "version: 0.1.5\nkind: app\napp:\n  name: Helper\n  mode: chat\nmodel_config: {}\n", "chat", ""},
		{"workflow app with unknown extra keys", "app: {name: W, mode: workflow, whatever: 1}\nworkflow: {graph: {nodes: []}}\nextra: [1]\n", "workflow", ""},
		{"not YAML", "app: [unclosed", "", "not valid YAML"},
		{"not a mapping", "- a\n- b\n", "", "mapping"},
		{"empty file", "", "", "YAML"},
		{"no app section", "kind: app\n", "", "no `app` section"},
		{"no mode", "app: {name: X}\n", "", "app.mode"},
		{"unknown mode", "app: {name: X, mode: chatbot}\n", "", `"chatbot"`},
		{"no name", "app: {mode: chat}\n", "", "app.name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gdb := db.OpenTemp(t)
			store := apps.NewStore(gdb)
			app, err := store.Import(context.Background(), []byte(tc.file))
			var n int64
			gdb.Model(&models.App{}).Count(&n)
			if tc.wantErr != "" {
				if !apperr.Is(err, apperr.CodeInvalidParam) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want invalid_param mentioning %q", err, tc.wantErr)
				}
				if n != 0 {
					t.Errorf("a failed import created %d apps", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := store.Get(context.Background(), app.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Mode != tc.wantMode || got.Definition != tc.file {
				t.Errorf("stored %+v", got)
			}
		})
	}
}

// FuzzParse checks that no input makes the app definition parser panic, and
// that whatever it accepts has a known mode and a name.
func FuzzParse(f *testing.F) {
	f.Add([]byte("app: {name: a, mode: chat}\n"))
	f.Add([]byte("version: 0.1.5\nkind: app\napp:\n  name: W\n  mode: workflow\nworkflow: {graph: {}}\n"))
	f.Add([]byte("- 1\n"))
	f.Add([]byte("app: &a {name: *a}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		def, err := apps.Parse(data)
		if err != nil {
			if !apperr.Is(err, apperr.CodeInvalidParam) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if def.App.Name == "" || !slices.Contains(apps.Modes, def.App.Mode) {
			t.Fatalf("accepted a definition without name or with mode %q", def.App.Mode)
		}
	})
}
