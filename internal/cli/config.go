package cli

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"appkb/internal/run/sandbox"
)

// option is one row of the configuration table: a flag, the environment
// variable that sets it when the command line does not, its default, its
// help, and the typed field it fills (*string, *bool, *int, *float64 or
// *time.Duration). The flag sets of serve (and the shared flags of every
// command) are defined from these rows; help appends "(env NAME)" from
// them, `serve --print-config` walks them, and a test checks them against
// --help and the README.
type option struct {
	flag, env string
	def       any
	help      string
	field     any
	// secret values are masked by --print-config.
	secret bool
}

// serveOptions is the typed configuration serve parses; its rows are
// serveTable.
type serveOptions struct {
	addr, providers, fetchAllow, corsOrigins, metricsToken, tools string
	demo, fallback, codeNetwork                                   bool
	rateLimit                                                     float64
	rateBurst, codeWarm                                           int
	limits                                                        limitOptions
}

// serveTable is every serve option of its own (the shared ones are
// commonTable), filling o.
func serveTable(o *serveOptions) []option {
	l := &o.limits
	return []option{
		{flag: "addr", env: "APPKB_ADDR", def: "127.0.0.1:5001", field: &o.addr, help: "listen address"},
		{flag: "demo", env: "APPKB_DEMO", def: false, field: &o.demo,
			help: "install the demo apps and knowledge base (first start only) and print fresh keys for them"},
		{flag: "providers", env: "APPKB_PROVIDERS", def: "", field: &o.providers,
			help: "model providers file, YAML; see internal/llm/providers.example.yaml"},
		{flag: "fallback-builtin", env: "APPKB_FALLBACK_BUILTIN", def: false, field: &o.fallback,
			help: "answer with the built-in offline model when an app's provider is not configured,\ninstead of failing with provider_not_initialize"},
		{flag: "fetch-allow", env: "APPKB_FETCH_ALLOW", def: "", field: &o.fetchAllow,
			help: "comma-separated address ranges (CIDR or IP) that remote files may come from although they are\nprivate or loopback"},
		{flag: "cors-origins", env: "APPKB_CORS_ORIGINS", def: "", field: &o.corsOrigins,
			help: "comma-separated browser origins allowed to call /v1, or * for any"},
		{flag: "rate-limit", env: "APPKB_RATE_LIMIT", def: 0.0, field: &o.rateLimit,
			help: "requests per second each API key may send; 0 means no limit"},
		{flag: "rate-burst", env: "APPKB_RATE_BURST", def: 0, field: &o.rateBurst,
			help: "requests a key may send at once above --rate-limit; 0 means the rate rounded up"},
		{flag: "metrics-token", env: "APPKB_METRICS_TOKEN", def: "", field: &o.metricsToken, secret: true,
			help: "bearer token GET /metrics requires; empty leaves it open"},
		{flag: "tools", env: "APPKB_TOOLS", def: "", field: &o.tools,
			help: "tools file, YAML: maps the tool providers apps name to MCP servers, OpenAPI schemas, workflow apps or built-in tools; see internal/run/tools/tools.example.yaml"},
		{flag: "code-network", env: "APPKB_CODE_NETWORK", def: false, field: &o.codeNetwork,
			help: "let python3 code nodes make HTTP(S) requests, only through the SSRF guard and --fetch-allow"},
		{flag: "code-warm", env: "APPKB_CODE_WARM", def: sandbox.DefaultWarm, field: &o.codeWarm,
			help: "python3 sandboxes kept started ahead of the code nodes that will use them; 0 starts each when its node runs"},
		{flag: "max-conns", env: "APPKB_MAX_CONNS", def: 0, field: &l.maxConns,
			help: "most client connections open at once; 0 means half the process's open-file limit (at most 10000)"},
		{flag: "max-inflight", env: "APPKB_MAX_INFLIGHT", def: 256, field: &l.maxInflight,
			help: "most requests worked on at once; more wait up to --queue-wait, then get 503 with Retry-After (0: no limit)"},
		{flag: "queue-wait", env: "APPKB_QUEUE_WAIT", def: 5 * time.Second, field: &l.queueWait,
			help: "how long a request over --max-inflight waits for a slot"},
		{flag: "header-timeout", env: "APPKB_HEADER_TIMEOUT", def: 10 * time.Second, field: &l.headerTime,
			help: "time allowed to send the request headers"},
		{flag: "read-timeout", env: "APPKB_READ_TIMEOUT", def: 20 * time.Second, field: &l.bodyTime,
			help: "time allowed to send a request body once admitted, extended by a second per --read-min-rate bytes received; slower uploads get 408"},
		{flag: "read-min-rate", env: "APPKB_READ_MIN_RATE", def: 500, field: &l.bodyRate,
			help: "bytes a second a request body must arrive at to keep extending --read-timeout (0: the timeout is fixed)"},
		{flag: "read-max", env: "APPKB_READ_MAX", def: 5 * time.Minute, field: &l.bodyMax,
			help: "most time a request body may take however fast it arrives (0: no bound beyond --read-timeout and --read-min-rate)"},
		{flag: "auth-fail-limit", env: "APPKB_AUTH_FAIL_LIMIT", def: 5.0, field: &l.authFails,
			help: "requests a second with a missing or invalid API key allowed per client address (bursts of 4x); more get 429 (0: no limit)"},
		{flag: "write-timeout", env: "APPKB_WRITE_TIMEOUT", def: 2 * time.Minute, field: &l.writeTime,
			help: "time allowed to take a response once it starts (event streams use a deadline per event instead)"},
		{flag: "idle-timeout", env: "APPKB_IDLE_TIMEOUT", def: 60 * time.Second, field: &l.idleTime,
			help: "how long an idle keep-alive connection stays open"},
		{flag: "max-text", env: "APPKB_MAX_TEXT", def: 100_000, field: &l.maxText,
			help: "most characters in query and in each input value; longer ones get 400 invalid_param (0: no limit)"},
	}
}

// commonOptions are the flags every command shares.
type commonOptions struct{ logLevel, logFormat string }

// commonTable is the rows of the shared flags a command has: the data
// directory and the database (unless noDataDir; sqliteOnly commands have no
// database URL), the log settings.
func commonTable(noDataDir, sqliteOnly bool, env *cmdEnv, o *commonOptions) []option {
	var rows []option
	if !noDataDir {
		rows = append(rows, option{flag: "data-dir", env: "APPKB_DATA_DIR", def: "./data", field: &env.dataDir, help: "data directory"})
		if !sqliteOnly {
			rows = append(rows, option{flag: "database-url", env: "APPKB_DATABASE_URL", def: "", field: &env.databaseURL, secret: true,
				help: "postgres:// URL of a shared PostgreSQL database; empty keeps SQLite in --data-dir"})
		}
	}
	return append(rows,
		option{flag: "log-level", env: "APPKB_LOG_LEVEL", def: "info", field: &o.logLevel, help: "log level: debug, info, warn or error"},
		option{flag: "log-format", env: "APPKB_LOG_FORMAT", def: "text", field: &o.logFormat, help: "log format: text or json"})
}

// doubleTable names the variables of the stand-in flags, which double.go
// declares itself (reading its variable as the default); they are listed
// here so that help, --print-config and the checks know them.
var doubleTable = []option{
	{flag: "admin-token", env: "APPKB_ADMIN_TOKEN", secret: true},
	{flag: "faults", env: "APPKB_FAULTS"},
	{flag: "scenario", env: "APPKB_SCENARIO"},
	{flag: "journal", env: "APPKB_JOURNAL"},
	{flag: "ephemeral", env: "APPKB_EPHEMERAL"},
	{flag: "seed", env: "APPKB_SEED"},
	{flag: "keys-out", env: "APPKB_KEYS_OUT"},
}

// serveEnv is every row of serve: shared, its own and the stand-in's.
var serveEnv = slices.Concat(commonTable(false, false, &cmdEnv{}, &commonOptions{}), serveTable(&serveOptions{}), doubleTable)

// defaultOptions is serve's configuration when nothing is set.
func defaultOptions() *serveOptions {
	o := &serveOptions{}
	define(flag.NewFlagSet("", flag.ContinueOnError), serveTable(o))
	return o
}

// define adds the rows' flags to fs, each filling its field and starting
// at its default (the variables are read after parsing, by applyEnv).
func define(fs *flag.FlagSet, rows []option) {
	for _, r := range rows {
		switch p := r.field.(type) {
		case *string:
			fs.StringVar(p, r.flag, r.def.(string), r.help)
		case *bool:
			fs.BoolVar(p, r.flag, r.def.(bool), r.help)
		case *int:
			fs.IntVar(p, r.flag, r.def.(int), r.help)
		case *float64:
			fs.Float64Var(p, r.flag, r.def.(float64), r.help)
		case *time.Duration:
			fs.DurationVar(p, r.flag, r.def.(time.Duration), r.help)
		default:
			panic(fmt.Sprintf("option --%s: field of type %T", r.flag, r.field))
		}
	}
}

// hiddenFlags are still accepted but no longer shown in help.
var hiddenFlags = map[string]bool{"strict-providers": true}

// noEnvFlags are serve flags that act on one start and so have no variable.
var noEnvFlags = map[string]bool{"print-config": true, "strict-providers": true}

func envOf(name string) (option, bool) {
	for _, e := range serveEnv {
		if e.flag == name {
			return e, true
		}
	}
	return option{}, false
}

// applyEnv sets each flag of a table row from the row's variable, unless
// the command line set the flag; a bad value is a usage error. (The
// stand-in flags, which have no field here, read theirs when defined.)
func applyEnv(fs *flag.FlagSet, set map[string]bool, getenv func(string) string) error {
	for _, e := range serveEnv {
		if e.field == nil || set[e.flag] || fs.Lookup(e.flag) == nil {
			continue
		}
		v := strings.TrimSpace(getenv(e.env))
		if v == "" {
			continue
		}
		if err := fs.Set(e.flag, v); err != nil {
			return usagef("%s=%q: %v", e.env, v, err)
		}
	}
	return nil
}

// printFlags is flag.PrintDefaults without the hidden flags and with each
// flag's environment variable added to its help when the text lacks it.
func printFlags(w io.Writer, fs *flag.FlagSet, withEnv bool) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		if hiddenFlags[f.Name] {
			return
		}
		usage := f.Usage
		if e, ok := envOf(f.Name); ok && withEnv && !strings.Contains(usage, e.env) {
			usage += " (env " + e.env + ")"
		}
		shown.Var(f.Value, f.Name, usage)
		shown.Lookup(f.Name).DefValue = f.DefValue
	})
	shown.SetOutput(w)
	shown.PrintDefaults()
}

// printConfig writes the effective value of every serve flag, one
// "flag=value (env NAME)" a line, secrets masked.
func printConfig(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if hiddenFlags[f.Name] || f.Name == "print-config" {
			return
		}
		v := f.Value.String()
		e, ok := envOf(f.Name)
		if ok && e.secret {
			v = maskSecret(v)
		}
		src := ""
		if ok {
			src = "  (env " + e.env + ")"
		}
		fmt.Fprintf(w, "%-16s %s%s\n", f.Name, v, src)
	})
}

// maskSecret hides a token, or the password of a URL.
func maskSecret(v string) string {
	if v == "" {
		return ""
	}
	if u, err := url.Parse(v); err == nil && u.Scheme != "" && u.Host != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return strings.Replace(u.String(), "xxxxx", "****", 1)
	}
	return "****"
}
