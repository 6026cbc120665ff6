package chat

import (
	"context"
	"testing"
	"time"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/conversation/endusers"
	"appkb/internal/platform/cluster"
	"appkb/internal/platform/cluster/clustertest"
	"appkb/models"
)

const interruptedApp = `version: 0.3.0
kind: app
app: {name: interrupted, mode: chat}
model_config:
  model: {provider: appkb, name: builtin, mode: chat}
`

// Messages still being written when a process starts: on SQLite the
// process is alone, so all of them were cut off by a stop; on PostgreSQL
// only those of replicas that are gone, and the streams of live replicas
// go on.
func TestCloseInterrupted(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	app, err := apps.NewStore(gdb).Import(ctx, []byte(interruptedApp))
	if err != nil {
		t.Fatal(err)
	}
	user, err := endusers.NewStore(gdb).Resolve(ctx, app.ID, "someone")
	if err != nil {
		t.Fatal(err)
	}
	rs := clustertest.Beating(t, gdb, 3)
	live, dead, starting := rs[0], rs[1], rs[2]
	clustertest.Backdate(t, gdb, dead.ID)
	// The live replica's message is stamped as a stream stamps it.
	g := &Generation{svc: &Service{replica: live}, MessageID: "live", appID: app.ID, query: "q", CreatedAt: time.Now().UTC()}
	liveMsg := g.startRecord()
	liveMsg.Answer = "still streaming"
	gone := "gone-replica"
	tests := []struct {
		msg *models.Message
		// closed with a replica starting on a shared database, and when
		// the process is alone (SQLite, or no replica at all)
		closedShared, closedAlone bool
	}{
		{liveMsg, false, true},
		{&models.Message{ID: "dead", Answer: "half an ans", Generating: true, ReplicaID: &dead.ID}, true, true},
		{&models.Message{ID: "gone", Answer: "half", Generating: true, ReplicaID: &gone}, true, true},
		{&models.Message{ID: "nobody", Answer: "half", Generating: true}, true, true},
		{&models.Message{ID: "done", Answer: "whole"}, false, false},
	}
	now := time.Now().UTC()
	for _, tc := range tests {
		m := tc.msg
		m.AppID, m.EndUserID, m.Query, m.Status, m.Inputs, m.MessageFiles, m.RetrieverResources, m.AgentThoughts = app.ID, user.ID, "q", StatusNormal, "{}", "[]", "[]", "[]"
		m.CreatedAt, m.UpdatedAt = now, now
		if err := gdb.Create(m).Error; err != nil {
			t.Fatal(err)
		}
	}
	for _, round := range []struct {
		name     string
		replica  *cluster.Replica
		isClosed func(closedShared, closedAlone bool) bool
	}{
		{"a replica starts", starting, func(s, a bool) bool {
			if starting.Shared() {
				return s
			}
			return a
		}},
		{"a process alone starts", nil, func(_, a bool) bool { return a }},
	} {
		t.Run(round.name, func(t *testing.T) {
			if _, err := CloseInterrupted(ctx, gdb, round.replica); err != nil {
				t.Fatal(err)
			}
			for _, tc := range tests {
				var got models.Message
				if err := gdb.Take(&got, "id = ?", tc.msg.ID).Error; err != nil {
					t.Fatal(err)
				}
				if !round.isClosed(tc.closedShared, tc.closedAlone) {
					if got.Status != StatusNormal || got.Error != nil || got.Generating != tc.msg.Generating {
						t.Errorf("%s changed: %+v", got.ID, got)
					}
					continue
				}
				if got.Status != StatusError || got.Error == nil || *got.Error != InterruptedError || got.Answer != tc.msg.Answer || got.Generating {
					t.Errorf("%s not closed: %+v", got.ID, got)
				}
			}
		})
	}
	if liveMsg.ReplicaID == nil || *liveMsg.ReplicaID != live.ID {
		t.Errorf("a streamed message belongs to %v, want %s", liveMsg.ReplicaID, live.ID)
	}
}
