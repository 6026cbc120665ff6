// Package handlers is the HTTP side of appkb: it mounts the operations of
// openapi.yaml on Echo, validates and authenticates every request against the
// description, and translates between the wire types in gen/ and the domain
// packages. It holds no business logic and no SQL.
package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"gorm.io/gorm"

	"appkb/apikeys"
	"appkb/apps"
	"appkb/chat"
	"appkb/files"
	"appkb/gen"
	"appkb/llm"
	"appkb/retrieval"
	"appkb/workflow"
)

// basePath is where every operation of the API is mounted.
const basePath = "/v1"

// MaxBodySize bounds request bodies, uploads included.
const MaxBodySize = "64M"

// Deps is what the HTTP layer needs from the rest of the program.
type Deps struct {
	DB     *gorm.DB
	Logger *slog.Logger
	// SpecYAML is openapi.yaml as shipped, served at GET /openapi.yaml.
	SpecYAML []byte
	// Models resolves the model providers that apps name.
	Models *llm.Registry
	// DataDir is where uploaded files are kept (under files/).
	DataDir string
	// PingInterval is how long a message stream may stay silent before a
	// ping keep-alive is sent; 0 means DefaultPingInterval. Tests shorten it.
	PingInterval time.Duration
	// FetchAllow lists address ranges that remote files may be fetched from
	// although the SSRF guard refuses them otherwise (loopback, private…).
	FetchAllow []netip.Prefix
	// ChatModels, when set, replaces Models as the source of chat models
	// for chat and completion apps (tests put slow or failing fakes here).
	ChatModels chat.Models
	// Background, when set, bounds the server's background work: timing
	// out the overdue forms of paused workflow runs, once a minute.
	Background context.Context
	// Python runs the python3 code nodes of workflows; when nil those
	// nodes fail with an error saying the sandbox is missing.
	Python workflow.CodeRunner
}

// DefaultPingInterval is the keep-alive period of message streams.
const DefaultPingInterval = 10 * time.Second

// Server implements every operation of the API.
type Server struct {
	db      *gorm.DB
	dataDir string
	apps    *apps.Store
	models  *llm.Registry
	log     *slog.Logger
	// chat runs chat, agent and completion apps; pingInterval paces the
	// keep-alives of its streams.
	chat         *chat.Service
	pingInterval time.Duration
	// search runs knowledge retrieval.
	search *retrieval.Service
	// flows runs workflow apps and keeps their run history.
	flows *flows
	// fetchAllow lists address ranges that the network guard lets
	// knowledge pipelines fetch web pages from (Deps.FetchAllow).
	fetchAllow []netip.Prefix
}

var _ gen.StrictServerInterface = (*Server)(nil)

// NewServer builds the complete HTTP server: middleware, validation,
// authentication and all routes. main and the tests use the same function.
func NewServer(d Deps) (*echo.Echo, error) {
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	spec, err := gen.GetSpec()
	if err != nil {
		return nil, err
	}
	validator, err := newRequestValidator(spec, apikeys.NewStore(d.DB))
	if err != nil {
		return nil, err
	}

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = errorHandler(log)
	e.Use(middleware.RequestID())
	e.Use(requestLogger(log))
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{LogErrorFunc: recoverLog(log)}))
	e.Use(middleware.BodyLimit(MaxBodySize))
	e.Use(validator.middleware)

	e.GET("/openapi.yaml", func(c echo.Context) error {
		return c.Blob(http.StatusOK, "application/yaml", d.SpecYAML)
	})

	srv := &Server{db: d.DB, dataDir: d.DataDir, apps: apps.NewStore(d.DB), models: d.Models, log: log,
		pingInterval: d.PingInterval, fetchAllow: d.FetchAllow}
	if srv.pingInterval <= 0 {
		srv.pingInterval = DefaultPingInterval
	}
	chatCfg := chat.Config{
		DB:              d.DB,
		Models:          d.ChatModels,
		Logger:          log,
		MatchAnnotation: srv.annotationService().Match,
		ResolveFiles:    attachedFiles(remoteFiles(d)),
	}
	if chatCfg.Models == nil && d.Models != nil {
		chatCfg.Models = d.Models
	}
	// One retrieval service serves the retrieve operation, chat apps and the
	// knowledge-retrieval nodes of workflows.
	search := retrieval.New(d.DB, d.Models)
	srv.search = search
	chatCfg.Retrieve = search.ForApp
	srv.chat = chat.New(chatCfg)
	srv.flows = newFlows(d, chatCfg.Models, retrieval.WorkflowRetriever{Service: search}, srv.chat, log)

	// Signed download links of knowledge documents (outside /v1: the link
	// itself is the credential).
	e.GET(documentFilePath, srv.serveDocumentFile)

	gen.RegisterHandlers(e.Group(basePath), api{ServerInterface: gen.NewStrictHandler(srv, nil), srv: srv})
	return e, nil
}

// remoteFiles is the upload store used for files that messages attach, with
// the remote-fetch allowlist applied.
func remoteFiles(d Deps) *files.Store {
	store := files.NewStore(d.DB, d.DataDir)
	store.Remote.Allow = d.FetchAllow
	return store
}

// api serves every operation through the strict handlers except those
// that may answer with an event stream: those need the raw Echo context to
// write and flush Server-Sent Events themselves (STYLE §3).
type api struct {
	gen.ServerInterface
	srv *Server
}

// SendChatMessage serves POST /chat-messages, blocking or streaming.
func (a api) SendChatMessage(c echo.Context) error { return a.srv.sendChatMessage(c) }

// CreateCompletionMessage serves POST /completion-messages, blocking or
// streaming.
func (a api) CreateCompletionMessage(c echo.Context) error { return a.srv.createCompletionMessage(c) }

// ExecuteWorkflow serves POST /workflows/run, blocking or streaming.
func (a api) ExecuteWorkflow(c echo.Context) error { return a.srv.runWorkflow(c, "") }

// RunWorkflowById serves POST /workflows/{workflow_id}/run, blocking or
// streaming.
func (a api) RunWorkflowById(c echo.Context, workflowID string) error {
	return a.srv.runWorkflow(c, workflowID)
}

// StreamWorkflowEvents serves GET /workflow/{workflow_run_id}/events.
func (a api) StreamWorkflowEvents(c echo.Context, runID string, params gen.StreamWorkflowEventsParams) error {
	return a.srv.streamRunEvents(c, runID, params)
}

// requestLogger logs one line per request with log/slog.
func requestLogger(log *slog.Logger) echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus:    true,
		LogMethod:    true,
		LogURIPath:   true,
		LogLatency:   true,
		LogRequestID: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			log.Info("request",
				"id", v.RequestID, "method", v.Method, "path", v.URIPath,
				"status", v.Status, "latency_ms", v.Latency.Milliseconds())
			return nil
		},
	})
}
