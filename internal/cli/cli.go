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
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"

	"gorm.io/gorm"

	"appkb/db"
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
		setup:   setupAppImport},
	{name: "app export", synopsis: "APP_ID", minArgs: 1, maxArgs: 1,
		summary: "Print the app's definition (YAML) as it was imported.",
		setup:   setupAppExport},
	{name: "app list", summary: "List imported apps as JSON lines.", maxArgs: 0,
		setup: setupAppList},
	{name: "key create", synopsis: "--app APP_ID | --knowledge [--dataset ID]... [--label TEXT]", maxArgs: 0,
		summary: "Make an app key or a knowledge key and print {\"api_key\":…}; a knowledge key\n        without --dataset opens every knowledge base.",
		setup:   setupKeyCreate},
	{name: "key list", summary: "List keys (never their secrets) as JSON lines.", maxArgs: 0,
		setup: setupKeyList},
	{name: "key revoke", synopsis: "KEY_PREFIX", minArgs: 1, maxArgs: 1,
		summary: "Revoke the one active key that starts with KEY_PREFIX.",
		setup:   setupKeyRevoke},
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
