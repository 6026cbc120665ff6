package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// postgresPair opens two connections to one fresh database and a started
// bus on each: two replicas.
func postgresPair(t *testing.T) (a, b *PostgresBus, gdbA *gorm.DB) {
	t.Helper()
	url := db.TempURL(t)
	var buses []*PostgresBus
	for range 2 {
		gdb, err := db.OpenPostgres(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close(gdb) })
		bus, ok := NewBus(gdb, quietLog()).(*PostgresBus)
		if !ok {
			t.Fatal("NewBus on PostgreSQL is not a PostgresBus")
		}
		bus.Start(context.Background())
		t.Cleanup(bus.Stop)
		if bus.pid.Load() == 0 {
			t.Fatal("Start returned before listening")
		}
		buses = append(buses, bus)
		gdbA = gdb
	}
	return buses[0], buses[1], gdbA
}

// receive waits for one payload on ch.
func receive(t *testing.T, ch <-chan []byte) string {
	t.Helper()
	select {
	case p, ok := <-ch:
		if !ok {
			t.Fatal("subscription closed")
		}
		return string(p)
	case <-time.After(5 * time.Second):
		t.Fatal("no message within 5s")
	}
	return ""
}

// quiet fails when ch receives something within a short while.
func quiet(t *testing.T, ch <-chan []byte) {
	t.Helper()
	select {
	case p := <-ch:
		t.Fatalf("unexpected message %q", p)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestBusDelivery(t *testing.T) {
	engines := []struct {
		name string
		// pair returns the buses of two replicas (the same bus twice
		// in-process, where there is only one).
		pair func(t *testing.T) (Bus, Bus)
	}{
		{"in-process", func(t *testing.T) (Bus, Bus) {
			gdb, err := db.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close(gdb) })
			bus := NewBus(gdb, quietLog())
			if _, ok := bus.(*LocalBus); !ok {
				t.Fatalf("NewBus on SQLite gave %T", bus)
			}
			bus.Start(context.Background())
			t.Cleanup(bus.Stop)
			return bus, bus
		}},
		{"postgres", func(t *testing.T) (Bus, Bus) {
			a, b, _ := postgresPair(t)
			return a, b
		}},
	}
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			a, b := eng.pair(t)
			ctx := context.Background()
			onA, cancelA := a.Subscribe("stop")
			defer cancelA()
			onB, cancelB := b.Subscribe("stop")
			defer cancelB()
			otherB, cancelOther := b.Subscribe("other")
			defer cancelOther()

			// The publisher hears its own message, the other replica too,
			// and a subscriber of another topic hears nothing.
			if err := a.Publish(ctx, "stop", []byte("task-1")); err != nil {
				t.Fatal(err)
			}
			if got := receive(t, onA); got != "task-1" {
				t.Errorf("publisher got %q", got)
			}
			if got := receive(t, onB); got != "task-1" {
				t.Errorf("other replica got %q", got)
			}
			quiet(t, otherB)

			// Messages arrive in the order they were published.
			for _, p := range []string{"1", "2", "3"} {
				if err := b.Publish(ctx, "stop", []byte(p)); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for range 3 {
				got = append(got, receive(t, onA))
			}
			if strings.Join(got, ",") != "1,2,3" {
				t.Errorf("order %v", got)
			}
			for range 3 {
				receive(t, onB)
			}

			// A cancelled subscription is closed and hears nothing more.
			cancelA()
			if err := b.Publish(ctx, "stop", []byte("late")); err != nil {
				t.Fatal(err)
			}
			if got := receive(t, onB); got != "late" {
				t.Errorf("got %q", got)
			}
			if _, ok := <-onA; ok {
				t.Error("cancelled subscription still delivers")
			}

			// What cannot travel on PostgreSQL is refused on both engines.
			refused := []struct {
				name    string
				topic   string
				payload []byte
				want    error
			}{
				{"too large", "stop", []byte(strings.Repeat("x", MaxMessage)), ErrTooLarge},
				{"empty topic", "", []byte("x"), ErrBadTopic},
				{"topic with newline", "a\nb", []byte("x"), ErrBadTopic},
				{"NUL byte", "stop", []byte("a\x00b"), ErrNotText},
				{"not UTF-8", "stop", []byte{0xff, 0xfe}, ErrNotText},
			}
			for _, r := range refused {
				if err := a.Publish(ctx, r.topic, r.payload); !errors.Is(err, r.want) {
					t.Errorf("%s: got %v, want %v", r.name, err, r.want)
				}
			}
			// The largest message that fits goes through.
			big := strings.Repeat("y", MaxMessage-len("stop")-1)
			if err := a.Publish(ctx, "stop", []byte(big)); err != nil {
				t.Fatal(err)
			}
			if got := receive(t, onB); got != big {
				t.Errorf("large message came back with %d bytes", len(got))
			}
		})
	}
}

// TestPostgresBusReconnects cuts the listening connection of a replica
// and checks that it listens again and receives what is published after.
func TestPostgresBusReconnects(t *testing.T) {
	a, b, gdbA := postgresPair(t)
	ctx := context.Background()
	onB, cancel := b.Subscribe("ping")
	defer cancel()

	old := b.pid.Load()
	if err := gdbA.Exec("SELECT pg_terminate_backend(?)", old).Error; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pid := b.pid.Load(); pid != 0 && pid != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the listener did not reconnect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := a.Publish(ctx, "ping", []byte("after")); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, onB); got != "after" {
		t.Errorf("got %q", got)
	}
}

// TestPostgresBusStop checks that Stop ends the listener: nothing is
// delivered afterwards and the connection is gone.
func TestPostgresBusStop(t *testing.T) {
	a, b, gdbA := postgresPair(t)
	onB, cancel := b.Subscribe("ping")
	defer cancel()
	pid := b.pid.Load()
	b.Stop()
	if err := a.Publish(context.Background(), "ping", []byte("x")); err != nil {
		t.Fatal(err)
	}
	quiet(t, onB)
	var n int64
	for range 50 {
		if err := gdbA.Raw("SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ?", pid).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("the listening connection %d is still open after Stop", pid)
}

// TestPostgresBusPublishTx checks that a message sent within a transaction
// reaches the other replica only when the transaction commits, and never
// when it rolls back.
func TestPostgresBusPublishTx(t *testing.T) {
	a, b, gdbA := postgresPair(t)
	onB, cancel := b.Subscribe("runs")
	defer cancel()

	cases := []struct {
		name   string
		commit bool
	}{
		{"rolled back", false},
		{"committed", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tx := gdbA.Begin()
			if err := a.PublishTx(tx, "runs", []byte(c.name)); err != nil {
				tx.Rollback()
				t.Fatal(err)
			}
			// Nothing is delivered while the transaction is open.
			quiet(t, onB)
			if c.commit {
				if err := tx.Commit().Error; err != nil {
					t.Fatal(err)
				}
				if got := receive(t, onB); got != c.name {
					t.Errorf("got %q", got)
				}
				return
			}
			if err := tx.Rollback().Error; err != nil {
				t.Fatal(err)
			}
			quiet(t, onB)
		})
	}
	// What Publish refuses, PublishTx refuses too.
	if err := a.PublishTx(gdbA, "a\nb", []byte("x")); !errors.Is(err, ErrBadTopic) {
		t.Errorf("bad topic: %v", err)
	}
}
