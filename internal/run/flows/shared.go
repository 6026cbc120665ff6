package flows

import (
	"context"
	"encoding/json"
	"runtime/debug"
	"sync"
	"time"

	"appkb/internal/platform/cluster"
	"appkb/internal/run/workflowruns"
)

// What replicas tell each other through the bus (Config.Bus). Several
// appkb processes on one PostgreSQL database each hold the runs they
// execute: a stop request published here reaches the one running the
// task, and followers on any replica learn that a run wrote new events.

// stopTopic carries stop requests (a stopMessage in JSON).
const stopTopic = "task_stop"

// stopMessage asks the replica running task Task of app App to stop it:
// only when User started it, or whoever did when AnyUser is set (workflow
// runs).
type stopMessage struct {
	App     string `json:"app"`
	User    string `json:"user,omitempty"`
	Task    string `json:"task"`
	AnyUser bool   `json:"any_user,omitempty"`
}

// Pruning of stored run events (PostgreSQL).
var (
	// EventsRetain is how long the events of a finished run stay stored.
	EventsRetain = time.Hour
	// pruneEvery is how often a replica prunes.
	pruneEvery = 10 * time.Minute
)

// followPoll is how often a follower looks at the stored run and its
// events when no notification came.
var followPoll = time.Second

// publishStop hands a stop request to every replica, this one included.
// The caller already stopped the task here if it runs here; the request
// is best effort beyond that, as a stop of a task that is not found is.
func (s *Service) publishStop(ctx context.Context, m stopMessage) {
	payload, err := json.Marshal(m)
	if err == nil {
		err = s.bus.Publish(context.WithoutCancel(ctx), stopTopic, payload)
	}
	if err != nil {
		s.log.Error("flows: sending a stop request to other replicas failed", "task_id", m.Task, "err", err)
	}
}

// applyStop stops a task of this replica named by a stop request.
func (s *Service) applyStop(payload []byte) {
	var m stopMessage
	if err := json.Unmarshal(payload, &m); err != nil || m.Task == "" {
		s.log.Warn("flows: an unreadable stop request was ignored", "payload", string(payload))
		return
	}
	if m.AnyUser {
		s.tasks.StopAnyUser(m.App, m.Task)
	} else {
		s.tasks.Stop(m.App, m.User, m.Task)
	}
}

// startShared subscribes to the bus and, on PostgreSQL, prunes old run
// events, until stopShared.
func (s *Service) startShared(ctx context.Context) {
	s.sharedMu.Lock()
	defer s.sharedMu.Unlock()
	if s.sharedCancel != nil {
		return
	}
	ctx, s.sharedCancel = context.WithCancel(ctx)
	stops, cancelStops := s.bus.Subscribe(stopTopic)
	notes, cancelNotes := s.bus.Subscribe(workflowruns.EventsTopic)
	s.background(func() { <-ctx.Done(); cancelStops(); cancelNotes() })
	s.background(func() {
		for p := range stops {
			s.applyStop(p)
		}
	})
	s.background(func() {
		for p := range notes {
			if n, ok := workflowruns.ParseEventNote(string(p)); ok {
				s.waker.wake(n.RunID)
			}
		}
	})
	if s.events != nil {
		s.background(func() { s.pruneLoop(ctx) })
	}
}

// stopShared ends what startShared began and waits for it.
func (s *Service) stopShared() {
	s.sharedMu.Lock()
	cancel := s.sharedCancel
	s.sharedMu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.sharedWG.Wait()
}

// background runs fn in a goroutine that stopShared waits for; a panic
// is logged and ends that goroutine only.
func (s *Service) background(fn func()) {
	s.sharedWG.Add(1)
	go func() {
		defer s.sharedWG.Done()
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("flows: background work panicked", "panic", p, "stack", string(debug.Stack()))
			}
		}()
		fn()
	}()
}

// pruneLoop deletes the stored events of runs finished more than
// EventsRetain ago, every pruneEvery. Every replica prunes; deleting twice
// is harmless.
func (s *Service) pruneLoop(ctx context.Context) {
	cluster.Every(ctx, pruneEvery, func(ctx context.Context) {
		n, err := s.events.Prune(ctx, time.Now().Add(-EventsRetain))
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("flows: pruning run events failed", "err", err)
		case n > 0:
			s.log.Info("flows: pruned run events", "rows", n)
		}
	})
}

// waker lets followers wait for news of a run: events written by this
// replica, or announced by another.
type waker struct {
	mu      sync.Mutex
	waiting map[string]*waitEntry
}

type waitEntry struct {
	ch chan struct{}
	n  int // followers holding ch
}

// wait returns a channel closed at the next wake of runID, and a function
// to call once the channel is no longer needed. Take it before looking,
// so that news arriving in between is not missed.
func (w *waker) wait(runID string) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiting == nil {
		w.waiting = map[string]*waitEntry{}
	}
	e, ok := w.waiting[runID]
	if !ok {
		e = &waitEntry{ch: make(chan struct{})}
		w.waiting[runID] = e
	}
	e.n++
	var once sync.Once
	return e.ch, func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if e.n--; e.n == 0 && w.waiting[runID] == e {
				delete(w.waiting, runID)
			}
		})
	}
}

// wake wakes the followers of runID.
func (w *waker) wake(runID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.waiting[runID]; ok {
		close(e.ch)
		delete(w.waiting, runID)
	}
}

// pending is how many runs have followers waiting (tests).
func (w *waker) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waiting)
}
