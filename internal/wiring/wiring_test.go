package wiring

import (
	"net/netip"
	"reflect"
	"testing"

	"appkb/db"
	"appkb/handlers"
	"appkb/internal/platform/cluster"
	"appkb/internal/platform/netguard"
)

// Build fills every service, hands the guard it was given on (or makes
// one from the allow-list), and the server refuses to be built without
// finished services.
func TestBuild(t *testing.T) {
	gdb := db.OpenTemp(t)
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	given := &netguard.Guard{Allow: allow}
	tests := []struct {
		name    string
		deps    handlers.Deps
		replica *cluster.Replica
		guard   *netguard.Guard // nil: any guard with allow
	}{
		{"a guard given", handlers.Deps{DB: gdb, DataDir: t.TempDir(), Guard: given}, nil, given},
		{"a guard made from the allow-list", handlers.Deps{DB: gdb, DataDir: t.TempDir(), FetchAllow: allow}, cluster.NewReplica(gdb), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Build(tc.deps, tc.replica)
			if err != nil {
				t.Fatal(err)
			}
			if g.Server == nil || g.Replica != tc.replica {
				t.Fatalf("server %v, replica %p (want %p)", g.Server, g.Replica, tc.replica)
			}
			if tc.guard != nil && g.Guard != tc.guard {
				t.Errorf("the graph made its own guard instead of using the one given")
			}
			if !reflect.DeepEqual(g.Guard.Allow, allow) {
				t.Errorf("guard allows %v, want %v", g.Guard.Allow, allow)
			}
			v := reflect.ValueOf(*g.Services)
			for i := range v.NumField() {
				if v.Field(i).IsNil() {
					t.Errorf("Services.%s is not built", v.Type().Field(i).Name)
				}
			}
			if g.Services.Uploads.Remote.Allow[0] != allow[0] {
				t.Errorf("remote files do not use the guard's allow-list: %v", g.Services.Uploads.Remote.Allow)
			}
		})
	}
	if _, err := handlers.NewServer(handlers.Deps{DB: gdb}); err == nil {
		t.Error("NewServer without services built a server")
	}
}
