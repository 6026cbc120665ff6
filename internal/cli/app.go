package cli

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"appkb/db"
	"appkb/handlers"
	"appkb/internal/knowledge/documents"
	"appkb/internal/run/chat"
	"appkb/internal/run/codeworker"
	"appkb/internal/wiring"
)

// worker is a piece of background work the application owns.
type worker interface {
	// Start begins the work; it runs until Stop (or ctx ends).
	Start(ctx context.Context)
	// Stop ends the work and waits for it to return.
	Stop()
}

// application is one serving process: the HTTP server and every
// background worker over one database. run starts the workers, then
// serves; when ctx ends it drains HTTP first (requests in flight finish,
// streams included, within shutdownGrace), then stops the workers in the
// reverse order of their start, and only then may the caller close the
// database.
type application struct {
	log     *slog.Logger
	http    *http.Server
	workers []namedWorker
	// started runs once the workers run and the listener serves; stopping
	// runs when a shutdown begins. Either may be nil.
	started, stopping func()
}

type namedWorker struct {
	name string
	worker
}

// shutdownGrace bounds how long a stop waits for requests in flight.
const shutdownGrace = 15 * time.Second

// newApplication puts the finished graph g (internal/wiring) to work:
// the replica's sweeps, then the workers in their start order: database
// checkpoints, the replica registry, the bus to the other replicas, the
// indexing queue (idx), annotation reply jobs, the python sandboxes, the
// code workers and the resumer of paused workflow runs (which also times
// out their forms).
func newApplication(g *wiring.Graph, deps handlers.Deps, idx documents.Config) *application {
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	svc, rep := g.Services, g.Replica
	// On a shared database the replica's sweeps close the runs and
	// streams of replicas that died (the workers take over their jobs
	// themselves).
	rep.OnSweep("workflow runs", func(ctx context.Context) (int64, error) {
		return svc.Flows.Runs().CloseInterrupted(ctx, rep)
	})
	rep.OnSweep("streamed messages", func(ctx context.Context) (int64, error) {
		return chat.CloseInterrupted(ctx, deps.DB, rep)
	})
	rep.OnSweep("replica rows", func(ctx context.Context) (int64, error) {
		return rep.Forget(ctx, time.Hour)
	})
	workers := []namedWorker{
		// Stopped after every writer, so that the last checkpoint
		// follows the last write (SQLite only).
		{"sqlite checkpoints", db.NewCheckpointer(deps.DB, log)},
		// Started before the rest and stopped after it: work is
		// stamped with the replica's id only while its heartbeat
		// runs, and its row goes once nothing of it runs any more.
		{"replica", rep},
		// Next: the other workers publish and receive on the bus
		// until they stop.
		{"cluster bus", deps.Bus},
		// Then: conversations named in the background are
		// stored before the database closes.
		{"chat background work", chatWork{svc.Chat}},
		{"indexing", &indexingWorker{cfg: idx}},
		{"annotation jobs", svc.Annotations},
	}
	// python3 sandboxes started ahead of the code nodes that will use
	// them; stopped after the resumer, the last to run workflows.
	if py, ok := deps.Python.(worker); ok {
		workers = append(workers, namedWorker{"python sandboxes", py})
	}
	// javascript and template workers, started lazily (Start warms a
	// few); stopped after the resumer, as the python sandboxes are.
	workers = append(workers, namedWorker{"code workers", codeworker.Default()})
	workers = append(workers, namedWorker{"workflow resumer", svc.Flows})
	return &application{
		log:     log,
		http:    &http.Server{Handler: g.Server, ReadHeaderTimeout: 10 * time.Second},
		workers: workers,
	}
}

// run serves on ln until ctx ends or the listener fails, then shuts down
// in order: HTTP, then the workers.
func (a *application) run(ctx context.Context, ln net.Listener) error {
	// Workers run on their own context: they are stopped explicitly, after
	// HTTP has drained, not as soon as the signal arrives.
	workCtx := context.WithoutCancel(ctx)
	for _, w := range a.workers {
		w.Start(workCtx)
	}
	errc := make(chan error, 1)
	go func() { errc <- a.http.Serve(ln) }()
	if a.started != nil {
		a.started()
	}

	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
		a.log.Info("shutting down")
		if a.stopping != nil {
			a.stopping()
		}
		shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		if err := a.http.Shutdown(shutdownCtx); err != nil {
			a.log.Warn("requests still running at shutdown were cut", "err", err)
			_ = a.http.Close()
		}
		cancel()
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
		}
	}
	for i := len(a.workers) - 1; i >= 0; i-- {
		w := a.workers[i]
		w.Stop()
		a.log.Info("stopped", "worker", w.name)
	}
	return serveErr
}

// chatWork gives the chat runtime's background work (conversation names
// that arrive after the answer) the Start/Stop shape: nothing to start,
// and Stop waits for what is still running.
type chatWork struct{ svc *chat.Service }

func (chatWork) Start(context.Context) {}
func (w chatWork) Stop()               { w.svc.Wait() }

// indexingWorker gives the indexing queue the Start/Stop shape.
type indexingWorker struct {
	cfg  documents.Config
	stop func()
}

func (w *indexingWorker) Start(ctx context.Context) { w.stop = documents.Start(ctx, w.cfg) }

func (w *indexingWorker) Stop() {
	if w.stop != nil {
		w.stop()
	}
}
