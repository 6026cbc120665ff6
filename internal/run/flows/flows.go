// Package flows is the one place where runs of apps start, stream, stop and
// resume. It sits between the HTTP handlers (or any other caller, such as an
// OpenAI-compatible endpoint) and the runtimes underneath: chat for chat,
// agent and completion apps, workflow for chatflows and workflow apps,
// workflowruns for the stored runs and forms, and resumer for runs that
// paused for human input.
//
// A caller builds a Request and calls Run (any mode, picked from the app),
// or Chat, Completion or Workflow for the operation of one route. Checks
// that refuse the request (wrong app mode, bad inputs, unknown
// conversation) come back as the error of that call. Otherwise the call
// returns a *Run whose producer goroutine is already working:
//
//   - Run.Wait blocks until the run ends and gives its Result (for a
//     blocking answer, Result.Body is the JSON the Service API returns);
//   - Run.Events delivers typed Events as they happen (for a streaming
//     request); once the channel is closed, Run.Err says how it ended and
//     Run.ErrorEvent turns that error into the stream's error frame.
//
// Follow lets any request follow the events of a run by id, Stop* end a
// task, and the text-to-speech of an auto-playing app is ordered here, so
// every stream speaks the same way. The package knows nothing of HTTP.
//
// Several replicas may share one PostgreSQL database (Config.Bus connects
// them): a stop request reaches the replica running the task, runs write
// their events to the database so that Follow works on any replica, and a
// form answered anywhere resumes its run once (the answer and the paused
// run are each claimed by one conditional UPDATE).
package flows

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/conversation/audio"
	"appkb/internal/conversation/endusers"
	"appkb/internal/conversation/files"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/cluster"
	"appkb/internal/platform/groupcommit"
	"appkb/internal/run/chat"
	"appkb/internal/run/resumer"
	"appkb/internal/run/tools"
	"appkb/internal/run/workflow"
	"appkb/internal/run/workflowruns"
	"appkb/models"
)

// Config is what Service needs. DB and Chat are required.
type Config struct {
	DB *gorm.DB
	// Chat is the chat runtime; its task registry is shared, so one task
	// id space covers every kind of run.
	Chat *chat.Service
	// Models serves the model calls of workflow nodes.
	Models workflow.ModelSource
	// Speech is the registry text-to-speech auto-play asks; nil speaks
	// nothing (the builtin model has no voice).
	Speech *llm.Registry
	// Retriever answers knowledge-retrieval nodes.
	Retriever workflow.Retriever
	// Files holds the uploads that file variables point at, and fetches
	// remote files through the SSRF guard.
	Files *files.Store
	// HTTPGuard decides which addresses http-request nodes may reach.
	HTTPGuard *files.Guard
	// Python runs python3 code nodes; nil makes them fail saying so.
	Python workflow.CodeRunner
	// Tools finds the tools of tool and agent nodes; nil knows the
	// built-in set only.
	Tools *tools.Registry
	// FormExpiry is how often overdue human-input forms are timed out
	// once Start ran (default a minute).
	FormExpiry time.Duration
	// Bus connects the replicas that share the database: stop requests
	// and news of run events travel on it. Nil is an in-process bus (one
	// replica). Its owner starts and stops it.
	Bus cluster.Bus
	// Commits batches the rows of runs and node executions with the
	// other writes that share it (chat answers); nil gives the runs a
	// queue of their own.
	Commits *groupcommit.Queue
	Logger  *slog.Logger
	// Replica is the process whose id the runs it starts or resumes
	// carry; nil leaves them without one.
	Replica *cluster.Replica
}

// Service starts, follows, stops and resumes runs.
type Service struct {
	db      *gorm.DB
	apps    *apps.Store
	chat    *chat.Service
	tasks   *chat.Tasks
	runs    *workflowruns.Store
	forms   *workflowruns.Forms
	users   *endusers.Store
	hub     *resumer.Hub
	resumer *resumer.Resumer
	speech  *audio.Service
	bus     cluster.Bus
	// events stores run events for followers on other replicas
	// (PostgreSQL only; nil on SQLite).
	events *workflowruns.EventLog
	waker  waker
	cfg    Config
	log    *slog.Logger
	// transports keeps the connections of http-request nodes open
	// between runs.
	transports *workflow.HTTPTransports

	sharedMu     sync.Mutex
	sharedCancel context.CancelFunc
	sharedWG     sync.WaitGroup
}

// New builds a Service. Its background work (resuming paused runs, timing
// out forms) runs between Start and Stop; before Start, answered forms
// still resume their runs, on a context nobody cancels.
func New(cfg Config) *Service {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	runs := workflowruns.New(cfg.DB)
	if cfg.Commits != nil {
		runs.ShareCommits(cfg.Commits)
	}
	if cfg.Replica != nil {
		runs.SetReplica(cfg.Replica)
	}
	s := &Service{
		db: cfg.DB, apps: apps.NewStore(cfg.DB), chat: cfg.Chat, tasks: cfg.Chat.Tasks(),
		runs: runs, forms: runs.Forms(), users: endusers.NewStore(cfg.DB), hub: resumer.NewHub(),
		speech: audio.NewService(cfg.DB, cfg.Speech), bus: cfg.Bus, cfg: cfg, log: log,
		transports: &workflow.HTTPTransports{},
	}
	if s.bus == nil {
		s.bus = cluster.NewLocalBus(log)
	}
	if db.IsPostgres(cfg.DB) {
		// Replicas may share this database: runs write their events where
		// a follower on any replica reads them.
		s.events = workflowruns.NewEventLog(cfg.DB, s.bus, s.waker.wake, log)
		if cfg.Commits != nil {
			s.events.ShareCommits(cfg.Commits)
		}
		s.hub.Record = func(runID string, first bool) resumer.SegmentRecorder {
			if first {
				return s.events.BeginRun(runID)
			}
			return s.events.Begin(runID)
		}
	}
	s.resumer = &resumer.Resumer{Runs: runs, Forms: s.forms, Engine: s.engine, Hub: s.hub, Log: log,
		ExpireEvery: cfg.FormExpiry,
		Track: func(taskID, appID, user string, cancel context.CancelCauseFunc) func() {
			return s.tasks.Track(taskID, appID, user, cancel)
		}}
	s.resumer.Finished = s.finishChatflow
	return s
}

// Start begins the background work: paused runs resume on ctx, overdue
// forms are timed out periodically, stop requests and news of runs from
// other replicas are received, and old run events are pruned.
func (s *Service) Start(ctx context.Context) {
	s.startShared(ctx)
	s.resumer.Start(ctx)
}

// Stop ends the background work and waits for resumed runs to return.
func (s *Service) Stop() {
	s.resumer.Stop()
	s.stopShared()
	s.transports.CloseIdle()
}

// Runs is the store of workflow runs, versions and logs (for reads).
func (s *Service) Runs() *workflowruns.Store { return s.runs }

// engine is a workflow engine for one run, recording it for meta's end user.
func (s *Service) engine(meta workflowruns.RunMeta) *workflow.Engine {
	return s.engineOn(s.runs.Recorder(meta))
}

// engineOn is the engine for a run that rec stores.
func (s *Service) engineOn(rec *workflowruns.Recorder) *workflow.Engine {
	return &workflow.Engine{
		Models:     s.cfg.Models,
		Retriever:  s.cfg.Retriever,
		Store:      rec,
		HTTPGuard:  s.cfg.HTTPGuard,
		Transports: s.transports,
		Tools:      s.cfg.Tools,
		Forms:      rec.Forms(),
		Python:     s.cfg.Python,
		Files:      s.cfg.Files,
		Logger:     s.log,
	}
}

// ToolEngine is the engine a workflow tool runs another workflow app on.
func (s *Service) ToolEngine() *workflow.Engine { return s.engine(workflowruns.RunMeta{}) }

// FlowApp is the app appID, which must be a workflow or a chatflow.
func (s *Service) FlowApp(ctx context.Context, appID string) (*models.App, error) {
	app, err := s.apps.Cached(ctx, appID)
	if err != nil {
		return nil, err
	}
	if !apps.UsesWorkflow(app.Mode) {
		return nil, NotWorkflowApp()
	}
	return app, nil
}

// NotWorkflowApp is the error of a workflow operation on another kind of app.
func NotWorkflowApp() error {
	return apperr.Fail(apperr.CodeNotWorkflowApp, "Please check if your app mode matches the right API route.")
}

// version is the workflow version a run uses: the app's current
// definition when id is empty, otherwise that recorded version.
func (s *Service) version(ctx context.Context, app *models.App, id string) (*workflowruns.Version, error) {
	if id == "" {
		return s.runs.Current(ctx, app)
	}
	if _, err := uuid.Parse(id); err != nil {
		return nil, apperr.Fail(apperr.CodeBadRequest, "Invalid workflow ID format.")
	}
	return s.runs.ByID(ctx, app.ID, id)
}

// StopChat asks the chat or chatflow task taskID of user to stop, on
// whichever replica runs it.
func (s *Service) StopChat(ctx context.Context, appID, user, taskID string) error {
	if err := s.chat.StopChat(ctx, appID, user, taskID); err != nil {
		return err
	}
	s.publishStop(ctx, stopMessage{App: appID, User: user, Task: taskID})
	return nil
}

// StopCompletion asks the completion task taskID of user to stop, on
// whichever replica runs it.
func (s *Service) StopCompletion(ctx context.Context, appID, user, taskID string) error {
	if err := s.chat.StopCompletion(ctx, appID, user, taskID); err != nil {
		return err
	}
	s.publishStop(ctx, stopMessage{App: appID, User: user, Task: taskID})
	return nil
}

// StopWorkflow stops the workflow task taskID of appID, whoever started
// it. Stopping a task that is unknown or already over quietly succeeds.
func (s *Service) StopWorkflow(ctx context.Context, appID, user, taskID string) error {
	if user == "" {
		return apperr.InvalidParam("user is required")
	}
	app, err := s.apps.Cached(ctx, appID)
	if err != nil {
		return err
	}
	if app.Mode != apps.ModeWorkflow {
		return NotWorkflowApp()
	}
	s.tasks.StopAnyUser(app.ID, taskID)
	s.publishStop(ctx, stopMessage{App: app.ID, Task: taskID, AnyUser: true})
	return nil
}

// Form is the human-input form with token that a paused run of appID
// waits on.
func (s *Service) Form(ctx context.Context, appID, token string) (*workflowruns.Form, error) {
	app, err := s.FlowApp(ctx, appID)
	if err != nil {
		return nil, err
	}
	return s.forms.Open(ctx, app.ID, token)
}

// SubmitForm answers the form with token; the first valid answer wins and
// the run goes on in the background (Follow shows it).
func (s *Service) SubmitForm(ctx context.Context, appID, token, user, action string, inputs map[string]any) error {
	app, err := s.FlowApp(ctx, appID)
	if err != nil {
		return err
	}
	if inputs == nil {
		inputs = map[string]any{}
	}
	return s.resumer.Submit(ctx, app.ID, token, user, action, inputs)
}

// ExpireForms times out the forms that are overdue now and lets their
// runs go on along their timeout branches.
func (s *Service) ExpireForms(ctx context.Context) { s.resumer.ExpireNow(ctx) }
