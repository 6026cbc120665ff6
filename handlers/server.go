// Package handlers is the HTTP side of appkb: it mounts the operations of
// openapi.yaml on Echo, validates and authenticates every request against the
// description, and translates between the wire types in gen/ and the domain
// packages. It holds no business logic and no SQL.
package handlers

import (
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"gorm.io/gorm"

	"appkb/gen"
	"appkb/handlers/adminapi"
	"appkb/handlers/cors"
	"appkb/handlers/faults"
	"appkb/handlers/guard"
	"appkb/handlers/journal"
	"appkb/handlers/openai"
	"appkb/handlers/ratelimit"
	"appkb/handlers/validation"
	"appkb/internal/admin"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/conversation/annotations"
	"appkb/internal/conversation/audio"
	"appkb/internal/conversation/conversations"
	"appkb/internal/conversation/endusers"
	"appkb/internal/conversation/files"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/pipeline"
	"appkb/internal/knowledge/retrieval"
	"appkb/internal/llm"
	"appkb/internal/platform/cachever"
	"appkb/internal/platform/cluster"
	"appkb/internal/platform/netguard"
	"appkb/internal/run/chat"
	"appkb/internal/run/flows"
	"appkb/internal/run/tools"
	"appkb/internal/run/workflow"
)

const basePath = validation.BasePath

// Limits protect the server from overload and from slow or oversized
// requests (see guard.Limits).
type Limits = guard.Limits

// principalFrom returns the key that authenticated the request.
var principalFrom = validation.PrincipalFrom

// MaxBodySize bounds request bodies, uploads included.
const MaxBodySize = "64M"

// Deps is the configuration of one process's service graph: the wiring
// (internal/wiring) builds every service from it, once, and NewServer
// reads the HTTP side (logger, spec, version, pings, Ops, Limits, Admin)
// and the finished Services. serve fills it from the command line, tests
// by hand.
type Deps struct {
	DB     *gorm.DB
	Logger *slog.Logger
	// SpecYAML is openapi.yaml as shipped, served at GET /openapi.yaml.
	SpecYAML []byte
	// Version is the server's version, given as server_version at GET
	// /v1/; empty reads as "dev".
	Version string
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
	// Guard is the one SSRF guard of the process, shared with the tools
	// and the python sandbox; nil makes one from FetchAllow.
	Guard *netguard.Guard
	// ChatModels, when set, replaces Models as the source of chat models
	// for chat and completion apps (tests put slow or failing fakes here).
	ChatModels chat.Models
	// Services are the finished domain services behind the routes, built
	// by internal/wiring; NewServer refuses to run without them.
	Services *Services
	// Python runs the python3 code nodes of workflows; when nil those
	// nodes fail with an error saying the sandbox is missing.
	Python workflow.CodeRunner
	// Ops holds the operator settings: CORS, rate limits, metrics token,
	// readiness checks.
	Ops Ops
	// Limits protect against overload and slow or oversized requests.
	Limits Limits
	// Tools finds the tools of agent apps, tool nodes and agent nodes; nil
	// knows the built-in set only.
	Tools *tools.Registry
	// Admin configures the admin API, the request journal and injected
	// faults (all off in the zero value).
	Admin Admin
	// Bus connects the replicas that share the database (stop requests,
	// news of workflow runs); nil keeps them in this process. The caller
	// starts and stops it.
	Bus cluster.Bus
}

// DefaultPingInterval is the keep-alive period of message streams.
const DefaultPingInterval = 10 * time.Second

// Server implements every operation of the API.
type Server struct {
	dataDir string
	version string
	apps    *apps.Store
	models  *llm.Registry
	log     *slog.Logger
	// chat runs chat, agent and completion apps; pingInterval paces the
	// keep-alives of its streams.
	chat         *chat.Service
	pingInterval time.Duration
	// search runs knowledge retrieval.
	search *retrieval.Service
	// flows starts, follows, stops and resumes the runs of every app mode.
	flows *flows.Service
	// annotations keeps annotations and runs annotation reply jobs.
	annotations *annotations.Service
	// speech is speech to text and text to speech.
	speech *audio.Service
	// Stores and services without background work.
	convs     *conversations.Store
	users     *endusers.Store
	uploads   *files.Store
	kb        *datasets.Store
	docs      *documents.Service
	pipelines *pipeline.Service
	// links signs the download links of document files.
	links *documents.LinkSigner
	// previews signs the preview links of uploaded files that messages
	// list (their url).
	previews *files.PreviewSigner
	// API serves the admin operations.
	*adminapi.API
	// Endpoint serves the OpenAI-compatible operations.
	*openai.Endpoint
}

// Services are the finished domain services and stores the routes call,
// built once per process by the wiring (internal/wiring), each with its
// dependencies. The HTTP layer builds none of its own. Flows and
// Annotations have background workers (Start/Stop) that the application
// owns.
type Services struct {
	Apps      *apps.Store
	Keys      *apikeys.Store
	Snapshots *cachever.Snapshots
	// Knowledge holds the knowledge bases, their tags and metadata fields.
	Knowledge *datasets.Store
	// Documents holds documents and chunks and queues their indexing.
	Documents *documents.Service
	Pipelines *pipeline.Service
	// Conversations and EndUsers are read by the conversation operations.
	Conversations *conversations.Store
	EndUsers      *endusers.Store
	// Uploads keeps uploaded files and fetches remote ones.
	Uploads     *files.Store
	Chat        *chat.Service
	Flows       *flows.Service
	Annotations *annotations.Service
	Search      *retrieval.Service
	Speech      *audio.Service
	// Links and Previews sign the download links of document files and
	// the preview links of uploads.
	Links    *documents.LinkSigner
	Previews *files.PreviewSigner
	// Admin does the admin API's operations; served only when
	// Admin.Token is set.
	Admin *admin.Service
}

var _ gen.StrictServerInterface = (*Server)(nil)

// PrepareValidation parses openapi.yaml and builds the validator's
// routers ahead of NewServer (see validation.Prepare).
func PrepareValidation() error { return validation.Prepare() }

// NewServer builds the complete HTTP server over finished services
// (d.Services, see internal/wiring): middleware, validation,
// authentication and all routes. main and the tests use the same function.
func NewServer(d Deps) (*echo.Echo, error) {
	svc := d.Services
	if svc == nil {
		return nil, errors.New("handlers: Deps.Services is nil; build the services with internal/wiring")
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	vcfg := validation.Config{Keys: svc.Keys, Snapshots: svc.Snapshots, MaxText: d.Limits.MaxText, AdminToken: d.Admin.Token}
	if d.Admin.Scenarios != nil {
		vcfg.ScenarioApps = svc.Apps
	}
	validator, err := validation.New(vcfg)
	if err != nil {
		return nil, err
	}

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = errorHandler(log)
	e.Use(middleware.RequestID())
	e.Use(observe(log))
	e.Use(journal.Middleware(d.Admin.Journal))
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{LogErrorFunc: recoverLog(log)}))
	// CORS first, so that every answer (a 401 too) can be read by the
	// browser; then the key, from the headers alone, before a slot is
	// taken or the body read (authFirst), so that clients without a key
	// cannot hold the slots of those with one.
	e.Use(cors.Middleware(d.Ops.CORSOrigins))
	e.Use(validator.AuthFirst(d.Limits.UnknownKeys))
	e.Use(guard.Middleware(d.Limits))
	e.Use(middleware.BodyLimit(MaxBodySize))
	if d.Admin.Faults {
		e.Use(faults.Middleware)
	}
	e.Use(validator.Middleware)
	e.Use(ratelimit.Middleware(ratelimit.New(d.Ops.RateLimit, d.Ops.RateBurst), principalKey))
	mountOps(e, d)

	e.GET("/openapi.yaml", func(c echo.Context) error {
		return c.Blob(http.StatusOK, "application/yaml", d.SpecYAML)
	})

	srv := &Server{dataDir: d.DataDir, version: d.Version, apps: svc.Apps, models: d.Models, log: log,
		pingInterval: d.PingInterval, chat: svc.Chat, search: svc.Search, flows: svc.Flows,
		annotations: svc.Annotations, speech: svc.Speech, uploads: svc.Uploads,
		convs: svc.Conversations, users: svc.EndUsers, kb: svc.Knowledge, docs: svc.Documents, pipelines: svc.Pipelines,
		links: svc.Links, previews: svc.Previews, API: adminapi.New(d.Admin, svc.Admin, svc.Apps)}
	if srv.pingInterval <= 0 {
		srv.pingInterval = DefaultPingInterval
	}
	srv.Endpoint = openai.New(openai.Config{Apps: svc.Apps, Flows: svc.Flows, Log: log,
		Ping: srv.pingInterval, MaxText: d.Limits.MaxText})

	// Signed download links of knowledge documents (outside /v1: the link
	// itself is the credential).
	e.GET(documentFilePath, srv.serveDocumentFile)
	e.GET(files.PreviewPathPrefix+":file_id/file-preview", srv.serveSignedFilePreview)

	handler := api{ServerInterface: gen.NewStrictHandler(srv, nil), srv: srv}
	gen.RegisterHandlers(e.Group(basePath), handler)
	// The generated routes are mounted under both prefixes; the validator
	// lets through only the service operations under /v1 and only the
	// admin operations under /admin/v1.
	gen.RegisterHandlers(e.Group(adminBasePath), handler)
	return e, nil
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
