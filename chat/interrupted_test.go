package chat

import (
	"context"
	"testing"
	"time"

	"appkb/db"
	"appkb/models"
)

func TestCloseInterrupted(t *testing.T) {
	gdb := db.OpenTemp(t)
	gdb.Exec(`PRAGMA foreign_keys = OFF`)
	now := time.Now().UTC()
	for _, m := range []models.Message{
		{ID: "cut", AppID: "a", Query: "q", Answer: "half an ans", Status: StatusNormal, Generating: true, CreatedAt: now, UpdatedAt: now},
		{ID: "done", AppID: "a", Query: "q", Answer: "whole", Status: StatusNormal, CreatedAt: now, UpdatedAt: now},
	} {
		if err := gdb.Create(&m).Error; err != nil {
			t.Fatal(err)
		}
	}
	n, err := CloseInterrupted(context.Background(), gdb)
	if err != nil || n != 1 {
		t.Fatalf("closed %d (%v), want 1", n, err)
	}
	var got []models.Message
	gdb.Order("id").Find(&got)
	if got[0].ID != "cut" || got[0].Status != StatusError || got[0].Error == nil || *got[0].Error != InterruptedError || got[0].Answer != "half an ans" || got[0].Generating {
		t.Fatalf("cut message: %+v", got[0])
	}
	if got[1].Status != StatusNormal || got[1].Error != nil {
		t.Fatalf("finished message changed: %+v", got[1])
	}
}
