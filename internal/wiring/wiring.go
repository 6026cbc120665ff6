// Package wiring builds the service graph of one appkb process: every
// store and domain service once, in dependency order, each handed what it
// needs when it is made, and the HTTP server over them. serve builds it
// from its command line; the tests and benchmarks build the same graph
// from a configuration they write by hand. Starting and stopping the
// background workers stays with the caller (internal/cli/app.go).
package wiring

import (
	"log/slog"

	"github.com/labstack/echo/v4"

	"appkb/handlers"
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
	"appkb/internal/platform/blobs"
	"appkb/internal/platform/cachever"
	"appkb/internal/platform/cluster"
	"appkb/internal/platform/groupcommit"
	"appkb/internal/platform/netguard"
	"appkb/internal/run/chat"
	"appkb/internal/run/flows"
	"appkb/internal/run/workflow"
)

// Graph is one process's finished services and the server over them.
type Graph struct {
	Services *handlers.Services
	Server   *echo.Echo
	// Guard is the one SSRF guard every outgoing connection made for a
	// user goes through.
	Guard *netguard.Guard
	// Replica stamps the work this process takes on (nil: none, as in
	// tests that run no workers).
	Replica *cluster.Replica
}

// Build makes the graph described by d. rep, when not nil, is the replica
// whose id the answers, runs and annotation jobs of this process carry;
// d.Bus, when not nil, connects the replicas (the caller starts both).
func Build(d handlers.Deps, rep *cluster.Replica) (*Graph, error) {
	svc, guard, err := services(d, rep)
	if err != nil {
		return nil, err
	}
	d.Services = svc
	if d.Guard == nil {
		d.Guard = guard
	}
	e, err := handlers.NewServer(d)
	if err != nil {
		return nil, err
	}
	return &Graph{Services: svc, Server: e, Guard: guard, Replica: rep}, nil
}

// NewServer is Build for callers that only want the router (tests,
// benchmarks): no replica, no bus between processes, no workers started
// (paused runs still resume when their forms are answered).
func NewServer(d handlers.Deps) (*echo.Echo, error) {
	g, err := Build(d, nil)
	if err != nil {
		return nil, err
	}
	return g.Server, nil
}

// services builds every store and service over d, in the order they
// depend on each other.
func services(d handlers.Deps, rep *cluster.Replica) (*handlers.Services, *netguard.Guard, error) {
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	guard := d.Guard
	if guard == nil {
		guard = &netguard.Guard{Allow: d.FetchAllow}
	}
	// Remote files and http-request nodes check addresses with the
	// guard's allow-list (files.Guard adds fetch timeouts and redirects).
	fileGuard := files.Guard{Allow: guard.Allow}

	// Stores without background work.
	appStore := apps.NewStore(d.DB)
	appStore.Check = workflow.Check
	kb := datasets.NewStore(d.DB, d.Models)
	docs := documents.NewService(d.DB, d.Models, d.DataDir)
	uploads := files.NewStore(d.DB, d.DataDir)
	uploads.Remote = fileGuard

	ann := annotations.NewService(d.DB, d.Models)
	ann.Log, ann.Replica = log, rep
	// One queue batches the rows of every answer and workflow run.
	commits := groupcommit.New(d.DB)
	// One retrieval service serves the retrieve operation, chat apps and
	// the knowledge-retrieval nodes of workflows.
	search := retrieval.New(d.DB, d.Models)
	chatModels := d.ChatModels
	if chatModels == nil && d.Models != nil {
		chatModels = d.Models
	}
	chatSvc := chat.New(chat.Config{
		DB: d.DB, Commits: commits, Models: chatModels, Logger: log, Replica: rep,
		MatchAnnotation: ann.Match, ResolveFiles: flows.AttachedFiles(uploads), Retrieve: search.ForApp,
		Tools: d.Tools, Files: uploads,
	})
	fl := flows.New(flows.Config{
		DB: d.DB, Chat: chatSvc, Models: chatModels, Speech: d.Models,
		Retriever: retrieval.WorkflowRetriever{Service: search}, Files: uploads,
		HTTPGuard: &fileGuard, Python: d.Python, Logger: log, Tools: d.Tools,
		Bus: d.Bus, Commits: commits, Replica: rep,
	})
	if d.Tools != nil {
		// Workflow tools run other imported workflow apps, through the
		// engine of the runs they are part of: the registry is made
		// before the runs, so it learns of them here.
		d.Tools.SetWorkflows(workflow.AppRunner(apps.NewStore(d.DB), fl.ToolEngine))
	}
	links, err := documents.NewLinkSigner()
	if err != nil {
		return nil, nil, err
	}
	previews, err := files.NewPreviewSigner()
	if err != nil {
		return nil, nil, err
	}
	keys := apikeys.NewStore(d.DB)
	return &handlers.Services{
		Apps: appStore, Keys: keys, Snapshots: cachever.NewSnapshots(d.DB),
		Knowledge: kb, Documents: docs,
		Pipelines:     pipeline.NewService(d.DB, d.Models, d.DataDir, guard, fl.ToolEngine()),
		Conversations: conversations.NewStore(d.DB), EndUsers: endusers.NewStore(d.DB),
		Uploads: uploads, Chat: chatSvc, Flows: fl, Annotations: ann, Search: search,
		Speech: audio.NewService(d.DB, d.Models),
		Links:  links, Previews: previews,
		Admin: admin.New(d.DB, appStore, keys, kb, docs, blobs.For(d.DB, d.DataDir)),
	}, guard, nil
}
