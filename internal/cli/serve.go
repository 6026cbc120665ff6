package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/handlers"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/cli/backup"
	"appkb/internal/cli/demo"
	"appkb/internal/knowledge/documents"
	"appkb/internal/llm"
	"appkb/internal/platform/cluster"
	"appkb/internal/platform/netguard"
	"appkb/internal/run/chat"
	"appkb/internal/run/sandbox"
	"appkb/internal/run/tools"
	"appkb/internal/run/workflowruns"
	"appkb/internal/wiring"
)

// setupServe is `serve`: its flags come from serveTable (config.go).
func setupServe(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
	o := &serveOptions{}
	define(fs, serveTable(o))
	fs.Bool("strict-providers", true, "obsolete and hidden: unconfigured providers fail unless --fallback-builtin")
	printCfg := fs.Bool("print-config", false, "print the value every flag takes (from the command line, the environment or its default), secrets masked, and exit")
	double := addDoubleFlags(fs)
	return func(ctx context.Context) error {
		if *printCfg {
			printConfig(env.out, fs)
			return nil
		}
		registry, err := llm.Load(o.providers, os.Getenv, !o.fallback)
		if err != nil {
			return fmt.Errorf("providers: %w", err)
		}
		allow, err := parsePrefixes(o.fetchAllow)
		if err != nil {
			return usagef("--fetch-allow: %v", err)
		}
		if o.rateLimit < 0 || o.rateBurst < 0 {
			return usagef("--rate-limit and --rate-burst must not be negative")
		}
		if o.codeWarm < 0 {
			return usagef("--code-warm must not be negative")
		}
		if err := double.check(env.databaseURL); err != nil {
			return err
		}
		cfg := serveConfig{dataDir: env.dataDir, databaseURL: env.databaseURL, addr: o.addr, demo: o.demo, models: registry, fetchAllow: allow,
			fallback: o.fallback, ready: &readiness{}, limits: &o.limits, codeNetwork: o.codeNetwork, codeWarm: o.codeWarm, double: double}
		if double.ephemeral {
			dir, err := os.MkdirTemp("", "appkb-ephemeral-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			cfg.dataDir = dir
		}
		toolsCfg, err := tools.LoadConfig(o.tools, os.Getenv)
		if err != nil {
			return fmt.Errorf("--tools: %w", err)
		}
		// The one SSRF guard: tools, python code and the server's own
		// fetches (remote files, http-request nodes, pipelines) share it.
		cfg.guard = &netguard.Guard{Allow: allow}
		cfg.tools = tools.NewRegistry(toolsCfg, cfg.guard)
		cfg.ops = handlers.Ops{CORSOrigins: splitList(o.corsOrigins), RateLimit: o.rateLimit, RateBurst: o.rateBurst,
			MetricsToken: o.metricsToken, Ready: cfg.ready.checks()}
		return serve(ctx, cfg, env.out, env.log)
	}
}

type serveConfig struct {
	dataDir, addr string
	databaseURL   string // PostgreSQL; empty: SQLite under dataDir
	demo          bool
	models        *llm.Registry
	fetchAllow    []netip.Prefix
	guard         *netguard.Guard // made from fetchAllow when nil
	fallback      bool            // unconfigured providers use the builtin model
	ops           handlers.Ops    // probes, metrics, CORS, rate limits
	ready         *readiness
	limits        *limitOptions // connections, timeouts, admission, text sizes
	tools         *tools.Registry
	codeNetwork   bool         // python3 code may use the network through the guard
	codeWarm      int          // python3 sandboxes started ahead (0: none)
	double        *doubleFlags // admin API, faults, scenario, seed, keys file
}

// serveGCPercent is the garbage collector's target for a server started
// without GOGC: the heap may grow to three times what is live (Go's own
// default is twice) before a collection. A server's live heap is small
// (tens of MB), and collecting half as often took about a tenth off the
// CPU of a chat message (bench/README.md).
const serveGCPercent = 200

// startMemoryLimit bounds the heap while the collector is off during the
// start (see startupGC).
const startMemoryLimit = 256 << 20

// startupGC turns the garbage collector off until the server is ready,
// unless GOGC is set, and returns the function that sets it to
// serveGCPercent (once; later calls do nothing). Almost all a start
// allocates (about 20 MB, most of it parsing openapi.yaml) is garbage
// soon, and collecting it on the way cost a good part of the start's CPU.
// Until then a soft memory limit, unless GOMEMLIMIT is set, makes the
// collector run anyway if a start (a large --seed) allocates much more.
func startupGC() func() {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	limit := os.Getenv("GOMEMLIMIT") == ""
	debug.SetGCPercent(-1)
	if limit {
		debug.SetMemoryLimit(startMemoryLimit)
	}
	return sync.OnceFunc(func() {
		debug.SetGCPercent(serveGCPercent)
		if limit {
			debug.SetMemoryLimit(math.MaxInt64)
		}
	})
}

// serve runs the server until ctx ends: database, wiring, workers, listener.
func serve(ctx context.Context, cfg serveConfig, out io.Writer, log *slog.Logger) error {
	gcStarted := startupGC()
	defer gcStarted()
	// Parsing openapi.yaml is most of the start's CPU; it runs while the
	// database opens and migrates.
	prepareValidationInBackground(log)
	dataDir, addr := cfg.dataDir, cfg.addr
	// Bind first: a busy port must fail before demo keys are replaced.
	if cfg.limits == nil {
		cfg.limits = &defaultOptions().limits
	}
	ln, maxConns, err := cfg.limits.listen(addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	gdb, err := db.Connect(cfg.databaseURL, dataDir)
	if err != nil {
		return err
	}
	defer db.Close(gdb)
	startupChecks(ctx, gdb, cfg, log)
	// What a killed `appkb backup` left in the data directory.
	backup.RemoveLeftovers(dataDir)

	demoKeys, err := ensureDemo(ctx, gdb, cfg, out)
	if err != nil {
		return err
	}
	if cfg.double == nil {
		cfg.double = &doubleFlags{}
	}
	adminCfg, err := cfg.double.handlersAdmin(cfg.models)
	if err != nil {
		return err
	}
	if cfg.guard == nil {
		cfg.guard = &netguard.Guard{Allow: cfg.fetchAllow}
	}

	// This process in the registry of replicas sharing the database; it
	// registers when the application starts.
	replica := cluster.NewReplica(gdb)
	replica.Log = log
	if err := closeInterrupted(ctx, gdb, replica, log); err != nil {
		return err
	}

	deps := handlers.Deps{DB: gdb, Logger: log, SpecYAML: specYAML, Version: version, Models: cfg.models, DataDir: dataDir,
		FetchAllow: cfg.fetchAllow, Guard: cfg.guard, Ops: cfg.ops, Tools: cfg.tools,
		Limits: cfg.limits.handlerLimits(), Admin: adminCfg, Bus: cluster.NewBus(gdb, log)}
	if py := pythonRunner(cfg, log); py != nil {
		deps.Python = py
	}
	// Every service, once, each with its dependencies.
	graph, err := wiring.Build(deps, replica)
	if err != nil {
		return err
	}
	var seed *seeded
	if cfg.double.seed != "" {
		if seed, err = seedFrom(ctx, graph.Services.Admin, cfg.double.seed); err != nil {
			return err
		}
	}
	// Documents are indexed in the background; jobs a previous run left
	// unfinished are picked up again when the worker starts.
	app := newApplication(graph, deps, documents.Config{DB: gdb, Models: cfg.models, DataDir: dataDir, Logger: log, Replica: replica})
	cfg.limits.configure(app.http)
	app.started = func() {
		writeKeysOut(cfg, ln.Addr().String(), demoKeys, seed, log)
		gcStarted()
		cfg.ready.workersStarted()
		loadTokenizerInBackground(log)
		log.Info("appkb listening", "addr", ln.Addr().String(), "data_dir", dataDir, "api", "http://"+ln.Addr().String()+"/v1", "version", version, "max_conns", maxConns, "database", string(db.DialectOf(gdb)))
	}
	app.stopping = cfg.ready.stopping
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// run returns once HTTP has drained and the workers have stopped; the
	// database closes after that (deferred above).
	return app.run(ctx, ln)
}

// ensureDemo creates the demo app, its keys and its knowledge base when
// --demo is on and prints how to reach them; without --demo it returns nil.
func ensureDemo(ctx context.Context, gdb *gorm.DB, cfg serveConfig, out io.Writer) (*demo.Keys, error) {
	if !cfg.demo {
		return nil, nil
	}
	keys, err := demo.Ensure(ctx, apps.NewStore(gdb), apikeys.NewStore(gdb))
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	// The handbook is indexed by the workers once the server starts.
	datasetID, err := demo.EnsureKnowledge(ctx, gdb, cfg.models, cfg.dataDir, apps.NewStore(gdb), keys.AppID)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	printDemo(out, cfg.addr, keys, datasetID)
	return keys, nil
}

// closeInterrupted ends the workflow runs and the streamed answers a
// previous process left running: they can never finish now (with
// PostgreSQL: only those of replicas that are gone; the live ones go on).
func closeInterrupted(ctx context.Context, gdb *gorm.DB, replica *cluster.Replica, log *slog.Logger) error {
	if n, err := workflowruns.New(gdb).CloseInterrupted(ctx, replica); err != nil {
		return err
	} else if n > 0 {
		log.Warn("closed workflow runs interrupted by the last stop", "runs", n)
	}
	if n, err := chat.CloseInterrupted(ctx, gdb, replica); err != nil {
		return err
	} else if n > 0 {
		log.Warn("closed messages interrupted by the last stop", "messages", n)
	}
	return nil
}

// pythonRunner returns the bubblewrap sandbox python3 code nodes run in, or
// nil (logged) when there is none: the nodes then fail saying so, and never
// run unsandboxed.
func pythonRunner(cfg serveConfig, log *slog.Logger) *sandbox.Python {
	pyCfg := sandbox.Config{Warm: cfg.codeWarm}
	if cfg.codeWarm <= 0 {
		pyCfg.Warm = -1 // the sandbox's zero means its default
	}
	if cfg.codeNetwork {
		pyCfg.Network = cfg.guard
	}
	py, err := sandbox.NewPython(pyCfg)
	if err != nil {
		log.Warn("python3 code nodes are unavailable", "err", err)
		return nil
	}
	return py
}

// writeKeysOut writes the --keys-out file (addresses, demo keys, seeded
// apps) once the server listens on addr; without --keys-out it does nothing.
func writeKeysOut(cfg serveConfig, addr string, demoKeys *demo.Keys, seed *seeded, log *slog.Logger) {
	if cfg.double.keysOut == "" {
		return
	}
	base := "http://" + addr
	keys := map[string]any{"base_url": base, "api_url": base + "/v1", "data_dir": cfg.dataDir}
	if cfg.double.adminToken != "" {
		keys["admin_url"] = base + "/admin/v1"
	}
	if demoKeys != nil {
		keys["demo"] = demoKeys
	}
	if seed != nil {
		keys["apps"], keys["knowledge"] = seed.Apps, seed.Knowledge
	}
	if err := writeKeys(cfg.double.keysOut, keys); err != nil {
		log.Error("--keys-out: writing the keys file failed", "path", cfg.double.keysOut, "err", err)
	}
}

// prepareValidationInBackground parses openapi.yaml and builds the
// request validator's routers while the rest of serve starts; NewServer
// waits for the result, and reports a failure itself.
func prepareValidationInBackground(log *slog.Logger) {
	go func() {
		defer func() {
			if v := recover(); v != nil {
				log.Error("parsing openapi.yaml panicked", "panic", v)
			}
		}()
		_ = handlers.PrepareValidation()
	}()
}

// loadTokenizerInBackground loads the token vocabulary (a few hundred
// milliseconds of CPU) once the server answers, so that it neither slows
// the start, where it would compete with parsing openapi.yaml, nor makes
// the first request that counts tokens wait.
func loadTokenizerInBackground(log *slog.Logger) {
	go func() {
		defer func() {
			if v := recover(); v != nil {
				log.Error("loading the token vocabulary panicked", "panic", v)
			}
		}()
		llm.LoadTokenizer()
	}()
}

func printDemo(out io.Writer, addr string, k *demo.Keys, datasetID string) {
	base := "http://" + addr + "/v1"
	fmt.Fprintf(out, `
appkb demo (keys are new at every start; earlier demo keys are revoked)
  API base URL        %[1]s
  chat app key        %[2]s
  completion app key  %[3]s
  knowledge key       %[4]s
  knowledge base      %[5]s (%[6]s; the chat app answers from it)

Try:
  curl -s %[1]s/info -H 'Authorization: Bearer %[2]s'
  curl -s %[1]s/chat-messages -H 'Authorization: Bearer %[2]s' -H 'Content-Type: application/json' \
    -d '{"query":"%[7]s","inputs":{},"user":"demo","response_mode":"blocking"}'
  curl -s '%[1]s/datasets/%[5]s/documents' -H 'Authorization: Bearer %[4]s'
  curl -s '%[1]s/parameters' -H 'Authorization: Bearer %[3]s'

`, base, k.AppKey, k.CompletionAppKey, k.KnowledgeKey, datasetID, demo.KnowledgeName, demo.BicycleQuestion)
}
