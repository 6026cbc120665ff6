package chat

import (
	"context"
	"errors"
	"strings"
	"sync"

	"appkb/internal/platform/apperr"
)

// ErrStopped is the cause given to a generation's context when its client
// asked to stop it.
var ErrStopped = errors.New("generation stopped on request")

// Tasks keeps the generations that are running, by task id, so that a stop
// request can reach them. It is safe for concurrent use. Tasks live in this
// process only; with several replicas, flows hands every stop request to
// each replica's registry (through the cluster bus), and the one running
// the task stops it.
type Tasks struct {
	mu      sync.Mutex
	running map[string]*task
}

type task struct {
	appID string
	user  string // the caller's user string
	stop  context.CancelCauseFunc
}

// NewTasks returns an empty registry.
func NewTasks() *Tasks { return &Tasks{running: map[string]*task{}} }

func (t *Tasks) add(id string, tk *task) {
	t.mu.Lock()
	t.running[id] = tk
	t.mu.Unlock()
}

func (t *Tasks) remove(id string) {
	t.mu.Lock()
	delete(t.running, id)
	t.mu.Unlock()
}

// Stop ends the running task id if it belongs to appID and was started by
// user. It reports whether a task was stopped; an unknown task, a finished
// one or somebody else's is left alone.
func (t *Tasks) Stop(appID, user, id string) bool {
	t.mu.Lock()
	tk, ok := t.running[id]
	t.mu.Unlock()
	if !ok || tk.appID != appID || tk.user != user {
		return false
	}
	tk.stop(ErrStopped)
	return true
}

// Track registers a generation that runs outside this package (a workflow
// run) under id, so that stop requests reach it. The returned function
// removes it and must be called when the generation ends.
func (t *Tasks) Track(id, appID, user string, stop context.CancelCauseFunc) (untrack func()) {
	t.add(id, &task{appID: appID, user: user, stop: stop})
	return func() { t.remove(id) }
}

// StopAnyUser ends the running task id of appID whoever started it, as the
// workflow stop operation does. It reports whether a task was stopped.
func (t *Tasks) StopAnyUser(appID, id string) bool {
	t.mu.Lock()
	tk, ok := t.running[id]
	t.mu.Unlock()
	if !ok || tk.appID != appID {
		return false
	}
	tk.stop(ErrStopped)
	return true
}

// Running returns how many tasks are in progress.
func (t *Tasks) Running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.running)
}

// StopChat asks the chat task taskID to stop. It fails with not_chat_app
// when the app holds no conversations. Stopping a task that is unknown,
// finished or another user's quietly does nothing, as Dify does.
func (s *Service) StopChat(ctx context.Context, appID, user, taskID string) error {
	return s.stop(ctx, appID, user, taskID, true)
}

// StopCompletion asks the completion task taskID to stop. It fails with
// app_unavailable when the app is not a text generator.
func (s *Service) StopCompletion(ctx context.Context, appID, user, taskID string) error {
	return s.stop(ctx, appID, user, taskID, false)
}

func (s *Service) stop(ctx context.Context, appID, user, taskID string, chatOp bool) error {
	if strings.TrimSpace(user) == "" {
		return apperr.InvalidParam("user is required")
	}
	app, err := s.apps.Get(ctx, appID)
	if err != nil {
		return err
	}
	if chatOp {
		if !isChatMode(app.Mode) {
			return apperr.Fail(apperr.CodeNotChatApp, "App mode %s does not hold conversations; this operation is for chat apps.", app.Mode)
		}
	} else if err := checkCompletionApp(app.Mode); err != nil {
		return err
	}
	s.tasks.Stop(appID, user, taskID)
	return nil
}
