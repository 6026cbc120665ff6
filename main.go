// Command appkb serves the Application and Knowledge Base HTTP API (the API
// Dify calls its Service API) from one binary over an embedded database.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"gorm.io/gorm"

	"appkb/apikeys"
	"appkb/apps"
	"appkb/db"
	"appkb/demo"
	"appkb/handlers"
	"appkb/indexing"
	"appkb/llm"
	"appkb/netguard"
	"appkb/sandbox"
	"appkb/tools"
	"appkb/workflowruns"
)

//go:embed openapi.yaml
var specYAML []byte

const usage = `appkb serves the Application and Knowledge Base API (Dify's Service API).

Usage:
  appkb serve [--addr HOST:PORT] [--data-dir DIR] [--demo] [--providers FILE] [--strict-providers]
        Run the HTTP server; the API lives under /v1 and its description at /openapi.yaml.
        --demo installs demo apps (first start only) and prints fresh keys for them.
        --providers maps the model providers that apps name to model servers (see
        llm/providers.example.yaml); names it does not cover use the built-in offline
        model, unless --strict-providers makes such requests fail.
        --fetch-allow lets remote files come from listed private/loopback ranges.
        --tools maps the tool providers that apps name to MCP servers, OpenAPI
        schemas, workflow apps or built-in tools (see tools/tools.example.yaml).
  appkb app import [--data-dir DIR] FILE.yml|FILE.ifpkg
        Import an app definition (Dify DSL export) and print {"app_id","api_key"}.
  appkb app import [--data-dir DIR] --replace APP_ID FILE.yml
        Update an app in place from a new definition; its keys and conversations stay.
  appkb app export [--data-dir DIR] APP_ID
        Print the app's definition (YAML) as it was imported.
  appkb app list [--data-dir DIR]
        List imported apps as JSON lines.
  appkb key create [--data-dir DIR] --app APP_ID [--label TEXT]
        Make an app key; prints {"api_key":"app-…"}.
  appkb key create [--data-dir DIR] --knowledge [--dataset ID]... [--label TEXT]
        Make a knowledge key; without --dataset it opens every knowledge base.
  appkb key list [--data-dir DIR]
        List keys (never their secrets) as JSON lines.
  appkb key revoke [--data-dir DIR] KEY_PREFIX
        Revoke the one active key that starts with KEY_PREFIX.

Environment:
  APPKB_ADDR      default for --addr (127.0.0.1:5001)
  APPKB_DATA_DIR  default for --data-dir (./data); the database and uploads live there
  APPKB_PROVIDERS default for --providers
  APPKB_FETCH_ALLOW default for --fetch-allow
  APPKB_TOOLS     default for --tools
  OPENAI_BASE_URL, OPENAI_API_KEY
                  an OpenAI-compatible server used for the "openai" provider when the
                  providers file does not configure one
`

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(context.Background(), os.Args[1:], os.Stdout, log); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "appkb:", err)
		os.Exit(1)
	}
}

// run executes one command line; tests call it directly.
func run(ctx context.Context, args []string, out io.Writer, log *slog.Logger) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(out, usage)
		return nil
	}
	cmd := args[0]
	if (cmd == "app" || cmd == "key") && len(args) > 1 {
		cmd += " " + args[1]
		args = args[1:]
	}
	fs := flag.NewFlagSet("appkb "+cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fmt.Fprint(out, usage) }
	dataDir := fs.String("data-dir", envOr("APPKB_DATA_DIR", "./data"), "data directory")

	switch cmd {
	case "serve":
		addr := fs.String("addr", envOr("APPKB_ADDR", "127.0.0.1:5001"), "listen address")
		withDemo := fs.Bool("demo", false, "install the demo apps and print fresh keys")
		providers := fs.String("providers", os.Getenv("APPKB_PROVIDERS"), "model providers file (YAML)")
		strict := fs.Bool("strict-providers", false, "fail requests whose model provider is not configured")
		fetchAllow := fs.String("fetch-allow", os.Getenv("APPKB_FETCH_ALLOW"),
			"comma-separated address ranges (CIDR or IP) that remote files may come from although they are private or loopback")
		toolsFile := fs.String("tools", os.Getenv("APPKB_TOOLS"), "tools file (YAML)")
		if err := parse(fs, args[1:], 0); err != nil {
			return err
		}
		registry, err := llm.Load(*providers, os.Getenv, *strict)
		if err != nil {
			return fmt.Errorf("providers: %w", err)
		}
		allow, err := parsePrefixes(*fetchAllow)
		if err != nil {
			return fmt.Errorf("--fetch-allow: %w", err)
		}
		toolsCfg, err := tools.LoadConfig(*toolsFile, os.Getenv)
		if err != nil {
			return fmt.Errorf("tools: %w", err)
		}
		toolReg := tools.NewRegistry(toolsCfg, &netguard.Guard{Allow: allow})
		return serve(ctx, serveConfig{dataDir: *dataDir, addr: *addr, demo: *withDemo, models: registry, fetchAllow: allow, tools: toolReg}, out, log)
	case "app import":
		replace := fs.String("replace", "", "update this app in place instead of creating one")
		if err := parse(fs, args[1:], 1); err != nil {
			return err
		}
		return withDB(*dataDir, func(gdb *gorm.DB) error { return importApp(ctx, gdb, fs.Arg(0), *replace, out) })
	case "app export":
		if err := parse(fs, args[1:], 1); err != nil {
			return err
		}
		return withDB(*dataDir, func(gdb *gorm.DB) error {
			data, err := apps.NewStore(gdb).Export(ctx, fs.Arg(0))
			if err != nil {
				return err
			}
			_, err = out.Write(data)
			return err
		})
	case "app list":
		if err := parse(fs, args[1:], 0); err != nil {
			return err
		}
		return withDB(*dataDir, func(gdb *gorm.DB) error {
			list, err := apps.NewStore(gdb).List(ctx)
			if err != nil {
				return err
			}
			for _, a := range list {
				printJSON(out, map[string]any{"app_id": a.ID, "name": a.Name, "mode": a.Mode, "created_at": a.CreatedAt})
			}
			return nil
		})
	case "key create":
		appID := fs.String("app", "", "app id for an app key")
		knowledge := fs.Bool("knowledge", false, "make a knowledge key")
		label := fs.String("label", "", "a note to tell keys apart")
		var datasets stringList
		fs.Var(&datasets, "dataset", "limit a knowledge key to this knowledge base (repeatable)")
		if err := parse(fs, args[1:], 0); err != nil {
			return err
		}
		if (*appID == "") == !*knowledge {
			return errors.New("key create: give exactly one of --app APP_ID or --knowledge")
		}
		if *appID != "" && len(datasets) > 0 {
			return errors.New("key create: --dataset only applies to --knowledge keys")
		}
		return withDB(*dataDir, func(gdb *gorm.DB) error {
			store := apikeys.NewStore(gdb)
			var key string
			var err error
			if *knowledge {
				key, err = store.CreateKnowledgeKey(ctx, datasets, *label)
			} else {
				key, err = store.CreateAppKey(ctx, *appID, *label)
			}
			if err != nil {
				return err
			}
			printJSON(out, map[string]string{"api_key": key})
			return nil
		})
	case "key list":
		if err := parse(fs, args[1:], 0); err != nil {
			return err
		}
		return withDB(*dataDir, func(gdb *gorm.DB) error {
			list, err := apikeys.NewStore(gdb).List(ctx)
			if err != nil {
				return err
			}
			for _, k := range list {
				printJSON(out, k)
			}
			return nil
		})
	case "key revoke":
		if err := parse(fs, args[1:], 1); err != nil {
			return err
		}
		return withDB(*dataDir, func(gdb *gorm.DB) error {
			id, err := apikeys.NewStore(gdb).Revoke(ctx, fs.Arg(0))
			if err != nil {
				return err
			}
			printJSON(out, map[string]string{"revoked": id})
			return nil
		})
	}
	fmt.Fprint(out, usage)
	return fmt.Errorf("unknown command %q", strings.Join(args[:min(len(args), 1)], " "))
}

// parse reads flags and checks the number of positional arguments.
func parse(fs *flag.FlagSet, args []string, positional int) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != positional {
		return fmt.Errorf("%s: expected %d argument(s), got %d", fs.Name(), positional, fs.NArg())
	}
	return nil
}

type serveConfig struct {
	dataDir, addr string
	demo          bool
	models        *llm.Registry
	fetchAllow    []netip.Prefix
	tools         *tools.Registry
}

func serve(ctx context.Context, cfg serveConfig, out io.Writer, log *slog.Logger) error {
	dataDir, addr := cfg.dataDir, cfg.addr
	gdb, err := db.Open(dataDir)
	if err != nil {
		return err
	}
	defer db.Close(gdb)

	if cfg.demo {
		keys, err := demo.Ensure(ctx, apps.NewStore(gdb), apikeys.NewStore(gdb))
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		printDemo(out, addr, keys)
	}

	// Workflow runs a previous process left running can never finish now.
	if n, err := workflowruns.New(gdb).CloseInterrupted(ctx); err != nil {
		return err
	} else if n > 0 {
		log.Warn("closed workflow runs interrupted by the last stop", "runs", n)
	}

	// Documents are indexed in the background; jobs a previous run left
	// unfinished are picked up again here.
	stopIndexing := indexing.Start(ctx, indexing.Config{DB: gdb, Models: cfg.models, DataDir: dataDir, Logger: log})
	defer stopIndexing()

	deps := handlers.Deps{DB: gdb, Logger: log, SpecYAML: specYAML, Models: cfg.models, DataDir: dataDir, FetchAllow: cfg.fetchAllow, Background: ctx, Tools: cfg.tools}
	// python3 code nodes run in a bubblewrap sandbox; without one they fail
	// with an error saying so, never unsandboxed.
	if py, err := sandbox.NewPython(sandbox.Config{}); err != nil {
		log.Warn("python3 code nodes are unavailable", "err", err)
	} else {
		deps.Python = py
	}
	e, err := handlers.NewServer(deps)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: e, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("appkb listening", "addr", addr, "data_dir", dataDir, "api", "http://"+addr+"/v1")

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func importApp(ctx context.Context, gdb *gorm.DB, path, replaceID string, out io.Writer) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	store := apps.NewStore(gdb)
	if replaceID != "" {
		app, err := store.Replace(ctx, replaceID, data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		printJSON(out, map[string]any{"app_id": app.ID, "replaced": true})
		return nil
	}
	app, err := store.Import(ctx, data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	key, err := apikeys.NewStore(gdb).CreateAppKey(ctx, app.ID, "")
	if err != nil {
		return err
	}
	printJSON(out, map[string]string{"app_id": app.ID, "api_key": key})
	return nil
}

func printDemo(out io.Writer, addr string, k *demo.Keys) {
	base := "http://" + addr + "/v1"
	fmt.Fprintf(out, `
appkb demo (keys are new at every start; earlier demo keys are revoked)
  API base URL        %[1]s
  chat app key        %[2]s
  completion app key  %[3]s
  knowledge key       %[4]s

Try:
  curl -s %[1]s/info -H 'Authorization: Bearer %[2]s'
  curl -s '%[1]s/parameters' -H 'Authorization: Bearer %[3]s'
  curl -s '%[1]s/datasets' -H 'Authorization: Bearer %[4]s'

`, base, k.AppKey, k.CompletionAppKey, k.KnowledgeKey)
}

func withDB(dataDir string, fn func(*gorm.DB) error) error {
	gdb, err := db.Open(dataDir)
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
