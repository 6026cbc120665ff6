package cli

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
)

// fakeWorker records when it starts and stops.
type fakeWorker struct {
	name string
	log  *eventLog
	srv  *http.Server
}

type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(s string) {
	l.mu.Lock()
	l.events = append(l.events, s)
	l.mu.Unlock()
}

func (w *fakeWorker) Start(context.Context) { w.log.add("start " + w.name) }
func (w *fakeWorker) Stop() {
	// HTTP must be closed by the time any worker stops.
	if err := w.srv.ListenAndServe(); err != http.ErrServerClosed {
		w.log.add("http still open")
	}
	w.log.add("stop " + w.name)
}

// TestApplicationShutdownOrder checks the lifecycle: workers start in
// order, and a stop drains HTTP before the workers stop in reverse order.
func TestApplicationShutdownOrder(t *testing.T) {
	events := &eventLog{}
	srv := &http.Server{Addr: "127.0.0.1:0", Handler: http.NotFoundHandler()}
	app := &application{
		log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		http: srv,
		workers: []namedWorker{
			{"a", &fakeWorker{name: "a", log: events, srv: srv}},
			{"b", &fakeWorker{name: "b", log: events, srv: srv}},
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stop at once: run still starts, serves and shuts down in order
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := app.run(ctx, ln); err != nil {
		t.Fatal(err)
	}
	want := []string{"start a", "start b", "stop b", "stop a"}
	if !slices.Equal(events.events, want) {
		t.Errorf("events %v, want %v", events.events, want)
	}
}
