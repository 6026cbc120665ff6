// Package clustertest stages replicas in the registry for tests of the
// packages that share work between replicas.
package clustertest

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/internal/platform/cluster"
)

// Beating returns n replicas of gdb that have each sent one heartbeat.
func Beating(t testing.TB, gdb *gorm.DB, n int) []*cluster.Replica {
	t.Helper()
	out := make([]*cluster.Replica, n)
	for i := range out {
		out[i] = cluster.NewReplica(gdb)
		if err := out[i].Beat(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Backdate makes replica id's heartbeat an hour old, so that the registry
// takes it for gone.
func Backdate(t testing.TB, gdb *gorm.DB, id string) {
	t.Helper()
	if err := gdb.Exec(`UPDATE replicas SET heartbeat_at = ? WHERE id = ?`, time.Now().UTC().Add(-time.Hour), id).Error; err != nil {
		t.Fatal(err)
	}
}
