// Command appkb serves the Application and Knowledge Base HTTP API (the API
// Dify calls its Service API) from one binary over an embedded database.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
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
	"appkb/internal/run/workflow"
	"appkb/internal/run/workflowruns"
	"appkb/internal/wiring"
)

// specYAML is the hand-written openapi.yaml, embedded by the root main package
// and handed to Main; /openapi.yaml serves it as written.
var specYAML []byte

// Set by `make build` through -ldflags "-X appkb/internal/cli.version=…" (and .commit, .date).
var (
	version = "dev"
	commit  = "unknown"
	date    = "unknown"
)

// Main runs the appkb command line and exits with its status; spec is the
// text of openapi.yaml.
func Main(spec []byte) {
	specYAML = spec
	log := newLogger(os.Stderr, envOr("APPKB_LOG_LEVEL", "info"), envOr("APPKB_LOG_FORMAT", "text"))
	if log == nil {
		fmt.Fprintln(os.Stderr, "appkb: APPKB_LOG_LEVEL must be debug, info, warn or error and APPKB_LOG_FORMAT text or json")
		os.Exit(2)
	}
	slog.SetDefault(log)
	err := run(context.Background(), os.Args[1:], os.Stdout, log)
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "appkb:", ue.msg)
		ue.printUsage(os.Stderr)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "appkb:", err)
		os.Exit(1)
	}
}

// run executes one command line; tests call it directly. Usage mistakes
// come back as *usageError (exit status 2), --help as flag.ErrHelp.
func run(ctx context.Context, args []string, out io.Writer, log *slog.Logger) error {
	if len(args) == 0 {
		return &usageError{msg: "no command given", printUsage: printUsage}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		if len(args) > 1 && args[0] == "help" {
			return run(ctx, append(args[1:], "--help"), out, log)
		}
		printUsage(out)
		return nil
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = []string{"version"}
	}
	cmd, rest := findCommand(args)
	if cmd == nil {
		// The longest run of leading words some commands start with: "kb",
		// "kb pipeline".
		n := 0
		for n < len(args) && printGroupUsage(io.Discard, strings.Join(args[:n+1], " ")) {
			n++
		}
		if n == 0 {
			return &usageError{msg: fmt.Sprintf("unknown command %q", args[0]), printUsage: printUsage}
		}
		prefix := strings.Join(args[:n], " ")
		group := func(w io.Writer) { printGroupUsage(w, prefix) }
		if len(args) == n {
			return &usageError{msg: fmt.Sprintf("%s needs a command", prefix), printUsage: group}
		}
		if next := strings.TrimLeft(args[n], "-"); next == "help" || next == "h" {
			group(out)
			return flag.ErrHelp
		}
		return &usageError{msg: fmt.Sprintf("unknown command %q", strings.Join(args[:n+1], " ")), printUsage: group}
	}
	env := &cmdEnv{out: out, log: log}
	fs, logLevel, logFormat, runCmd := commandFlags(cmd, env)
	cmdUsage := func(w io.Writer) { printCommandUsage(w, cmd, fs) }
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cmdUsage(out)
			return err
		}
		return &usageError{msg: err.Error(), printUsage: cmdUsage}
	}
	env.args = fs.Args()
	if len(env.args) < cmd.minArgs || (cmd.maxArgs >= 0 && len(env.args) > cmd.maxArgs) {
		return &usageError{msg: fmt.Sprintf("%s: wrong number of arguments (%d)", fs.Name(), len(env.args)), printUsage: cmdUsage}
	}
	setFlags := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { setFlags[f.Name] = true })
	if setFlags["log-level"] || setFlags["log-format"] {
		l := newLogger(os.Stderr, *logLevel, *logFormat)
		if l == nil {
			return &usageError{msg: "--log-level must be debug, info, warn or error and --log-format text or json", printUsage: cmdUsage}
		}
		env.log = l
		slog.SetDefault(l)
	}
	if err := applyEnv(fs, setFlags, os.Getenv); err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			ue.printUsage = cmdUsage
		}
		return err
	}
	if cmd.sqliteOnly && os.Getenv("APPKB_DATABASE_URL") != "" {
		return fmt.Errorf("%s works on a SQLite data directory, but APPKB_DATABASE_URL names a PostgreSQL database; back that up with pg_dump (or unset the variable)", cmd.name)
	}
	if !cmd.noDataDir && env.databaseURL != "" {
		// The database is elsewhere; the directory only holds scratch files.
		if err := db.PrivateDir(env.dataDir); err != nil {
			return err
		}
	} else if !cmd.noDataDir && !cmd.createsDataDir {
		if st, err := os.Stat(env.dataDir); err != nil || !st.IsDir() {
			return fmt.Errorf("data directory %s does not exist (give --data-dir, or start `appkb serve` once to create it)", env.dataDir)
		}
	}
	err := runCmd(ctx)
	var ue *usageError
	if errors.As(err, &ue) && ue.printUsage == nil {
		ue.printUsage = cmdUsage
	}
	return err
}

// commandFlags defines the flags of cmd, those every command shares first.
func commandFlags(cmd *command, env *cmdEnv) (fs *flag.FlagSet, logLevel, logFormat *string, runCmd func(context.Context) error) {
	fs = flag.NewFlagSet("appkb "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	common := &commonOptions{}
	define(fs, commonTable(cmd.noDataDir, cmd.sqliteOnly, env, common))
	return fs, &common.logLevel, &common.logFormat, cmd.setup(fs, env)
}

// usageError is a command line that cannot be run as given.
type usageError struct {
	msg        string
	printUsage func(io.Writer)
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// cmdEnv is what a command's runner gets besides its flags.
type cmdEnv struct {
	out     io.Writer
	log     *slog.Logger
	dataDir string
	// databaseURL names a PostgreSQL database; empty means SQLite in dataDir.
	databaseURL string
	args        []string
}

// command is one subcommand: its flags are defined by setup, which returns
// the function that runs it.
type command struct {
	name     string // "serve", "key create"
	synopsis string // arguments after the flags
	summary  string
	minArgs  int
	maxArgs  int // -1: no limit
	// noDataDir: the command has no --data-dir; createsDataDir: a missing
	// data directory is created rather than refused.
	noDataDir, createsDataDir bool
	// sqliteOnly: the command works on the SQLite files themselves and has
	// no --database-url.
	sqliteOnly bool
	setup      func(fs *flag.FlagSet, env *cmdEnv) func(ctx context.Context) error
}

func findCommand(args []string) (*command, []string) {
	for i := range commands {
		c := &commands[i]
		words := strings.Fields(c.name)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return c, args[len(words):]
		}
	}
	return nil, nil
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, "appkb serves the Application and Knowledge Base API (Dify's Service API) from one binary.\n\nUsage:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %s\n        %s\n", strings.TrimSpace("appkb "+c.name+" "+c.synopsis), c.summary)
	}
	fmt.Fprint(w, `
Run "appkb COMMAND --help" for the flags of a command. Every flag of serve
has an environment variable (APPKB_ADDR, APPKB_DATA_DIR, APPKB_LOG_LEVEL…),
listed in its help.
`)
}

// printGroupUsage lists the commands whose names start with the words of
// prefix ("key", "kb pipeline") and have more words, and reports whether
// there are any.
func printGroupUsage(w io.Writer, prefix string) bool {
	found := false
	for _, c := range commands {
		if strings.HasPrefix(c.name, prefix+" ") {
			if !found {
				fmt.Fprintf(w, "Usage:\n")
			}
			found = true
			fmt.Fprintf(w, "  %s\n        %s\n", strings.TrimSpace("appkb "+c.name+" "+c.synopsis), c.summary)
		}
	}
	if found {
		fmt.Fprintf(w, "\nRun \"appkb %s COMMAND --help\" for the flags of a command.\n", prefix)
	}
	return found
}

func printCommandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n\nFlags:\n", strings.TrimSpace("appkb "+c.name+" [flags] "+c.synopsis),
		strings.ReplaceAll(c.summary, "\n        ", "\n"))
	printFlags(w, fs, c.name == "serve")
}

// newLogger returns a slog logger with the given level and format, or nil
// when either is not known.
func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts))
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return nil
}

var commands = []command{
	{name: "serve", createsDataDir: true, maxArgs: 0,
		summary: "Run the HTTP server: the API under /v1, its description at /openapi.yaml and /docs,\n        probes at /healthz and /readyz, metrics at /metrics.",
		setup:   setupServe},
	{name: "version", synopsis: "", summary: "Print the version, commit and build date.", noDataDir: true, maxArgs: 0,
		setup: func(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
			return func(context.Context) error {
				fmt.Fprintf(env.out, "appkb %s (commit %s, built %s, %s)\n", version, commit, date, runtime.Version())
				return nil
			}
		}},
	{name: "app import", synopsis: "[--replace APP_ID] FILE.yml|FILE.ifpkg", minArgs: 1, maxArgs: 1, createsDataDir: true,
		summary: "Import an app definition (Dify DSL export) and print {\"app_id\",\"api_key\"};\n        with --replace, update that app in place (its keys and conversations stay).",
		setup: func(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
			replace := fs.String("replace", "", "update this app in place instead of creating one")
			return func(ctx context.Context) error {
				return withDB(env, func(gdb *gorm.DB) error { return importApp(ctx, gdb, env.args[0], *replace, env.out, env.log) })
			}
		}},
	{name: "app export", synopsis: "APP_ID", minArgs: 1, maxArgs: 1,
		summary: "Print the app's definition (YAML) as it was imported.",
		setup: func(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
			return func(ctx context.Context) error {
				return withDB(env, func(gdb *gorm.DB) error {
					data, err := apps.NewStore(gdb).Export(ctx, env.args[0])
					if err != nil {
						return err
					}
					_, err = env.out.Write(data)
					return err
				})
			}
		}},
	{name: "app list", summary: "List imported apps as JSON lines.", maxArgs: 0,
		setup: func(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
			return func(ctx context.Context) error {
				return withDB(env, func(gdb *gorm.DB) error {
					list, err := apps.NewStore(gdb).List(ctx)
					if err != nil {
						return err
					}
					for _, a := range list {
						printJSON(env.out, map[string]any{"app_id": a.ID, "name": a.Name, "mode": a.Mode, "created_at": a.CreatedAt})
					}
					return nil
				})
			}
		}},
	{name: "key create", synopsis: "--app APP_ID | --knowledge [--dataset ID]... [--label TEXT]", maxArgs: 0,
		summary: "Make an app key or a knowledge key and print {\"api_key\":…}; a knowledge key\n        without --dataset opens every knowledge base.",
		setup:   setupKeyCreate},
	{name: "key list", summary: "List keys (never their secrets) as JSON lines.", maxArgs: 0,
		setup: func(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
			return func(ctx context.Context) error {
				return withDB(env, func(gdb *gorm.DB) error {
					list, err := apikeys.NewStore(gdb).List(ctx)
					if err != nil {
						return err
					}
					for _, k := range list {
						printJSON(env.out, k)
					}
					return nil
				})
			}
		}},
	{name: "key revoke", synopsis: "KEY_PREFIX", minArgs: 1, maxArgs: 1,
		summary: "Revoke the one active key that starts with KEY_PREFIX.",
		setup: func(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
			return func(ctx context.Context) error {
				return withDB(env, func(gdb *gorm.DB) error {
					id, err := apikeys.NewStore(gdb).Revoke(ctx, env.args[0])
					if err != nil {
						return err
					}
					printJSON(env.out, map[string]string{"revoked": id})
					return nil
				})
			}
		}},
	{name: "kb ingest", synopsis: "--dataset ID PATH...", minArgs: 1, maxArgs: -1,
		summary: "Add files (directories recursively) to a knowledge base, one document each, and\n        wait until they are indexed; exits non-zero when any file failed.",
		setup:   setupIngest},
	{name: "kb pipeline import", synopsis: "--dataset ID FILE.yml", minArgs: 1, maxArgs: 1,
		summary: "Make a knowledge pipeline exported from Dify (kind: rag_pipeline) the pipeline\n        of a knowledge base; runs that reach a node appkb cannot run fail naming it.",
		setup:   setupPipelineImport},
	{name: "backup", synopsis: "FILE.tar.gz", minArgs: 1, maxArgs: 1, sqliteOnly: true,
		summary: "Write a consistent copy of the data directory (database and files) to one\n        archive; safe while the server runs. \"-\" writes to standard output.",
		setup:   setupBackup},
	{name: "restore", synopsis: "FILE.tar.gz", minArgs: 1, maxArgs: 1, createsDataDir: true, sqliteOnly: true,
		summary: "Unpack a backup into --data-dir, which must be missing or empty (stop the server first).",
		setup:   setupRestore},
	{name: "migrate", synopsis: "--from-sqlite DATA_DIR --to URL", noDataDir: true, maxArgs: 0,
		summary: "Copy a whole SQLite installation (rows and files) into an empty PostgreSQL\n        database, then compare the counts of every table; exits non-zero on a difference.",
		setup:   setupMigrate},
}

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

func setupKeyCreate(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
	appID := fs.String("app", "", "app id for an app key")
	knowledge := fs.Bool("knowledge", false, "make a knowledge key")
	label := fs.String("label", "", "a note to tell keys apart")
	var datasets stringList
	fs.Var(&datasets, "dataset", "limit a knowledge key to this knowledge base (repeatable)")
	return func(ctx context.Context) error {
		if (*appID == "") == !*knowledge {
			return usagef("key create: give exactly one of --app APP_ID or --knowledge")
		}
		if *appID != "" && len(datasets) > 0 {
			return usagef("key create: --dataset only applies to --knowledge keys")
		}
		return withDB(env, func(gdb *gorm.DB) error {
			store := apikeys.NewStore(gdb)
			var key string
			var err error
			if *knowledge {
				if err := datasetsExist(ctx, gdb, datasets); err != nil {
					return err
				}
				key, err = store.CreateKnowledgeKey(ctx, datasets, *label)
			} else {
				key, err = store.CreateAppKey(ctx, *appID, *label)
			}
			if err != nil {
				return err
			}
			printJSON(env.out, map[string]string{"api_key": key})
			return nil
		})
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

func importApp(ctx context.Context, gdb *gorm.DB, path, replaceID string, out io.Writer, log *slog.Logger) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	store := apps.NewStore(gdb)
	store.Check = workflow.Check
	if replaceID != "" {
		app, err := store.Replace(ctx, replaceID, data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		printJSON(out, map[string]any{"app_id": app.ID, "replaced": true})
		warnUnconfigured(log, app.ID, app.Name, app.Definition)
		return nil
	}
	app, err := store.Import(ctx, data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer warnUnconfigured(log, app.ID, app.Name, app.Definition)
	key, err := apikeys.NewStore(gdb).CreateAppKey(ctx, app.ID, "")
	if err != nil {
		return err
	}
	printJSON(out, map[string]string{"app_id": app.ID, "api_key": key})
	return nil
}

// warnUnconfigured says at import time, not at the first request, that the
// app names a model provider the server's providers file (APPKB_PROVIDERS)
// does not configure.
func warnUnconfigured(log *slog.Logger, appID, name, definition string) {
	registry, err := llm.Load(os.Getenv("APPKB_PROVIDERS"), os.Getenv, !envBool("APPKB_FALLBACK_BUILTIN"))
	if err != nil {
		log.Warn("could not read the providers file to check the app's model providers", "err", err)
		return
	}
	var missing []string
	for _, p := range appProviders(definition) {
		if !registry.Configured(p) {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return
	}
	consequence := "serve answers its requests with provider_not_initialize unless it starts with --providers FILE naming it, or --fallback-builtin"
	if envBool("APPKB_FALLBACK_BUILTIN") {
		consequence = "the built-in offline model will answer in its place (APPKB_FALLBACK_BUILTIN)"
	}
	log.Warn("app uses a model provider that is not configured; "+consequence,
		"app_id", appID, "app", name, "providers", strings.Join(missing, ","))
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

func withDB(env *cmdEnv, fn func(*gorm.DB) error) error {
	gdb, err := db.Connect(env.databaseURL, env.dataDir)
	if err != nil {
		return err
	}
	defer db.Close(gdb)
	return fn(gdb)
}

func printJSON(out io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintln(out, string(b))
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// parsePrefixes reads a comma-separated list of CIDR ranges or single IPs.
func parsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			out = append(out, p.Masked())
			continue
		}
		addr, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR range", item)
		}
		out = append(out, netip.PrefixFrom(addr, addr.BitLen()))
	}
	return out, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
