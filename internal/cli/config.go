package cli

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// envFlag ties a serve flag to its environment variable. The table is the
// one list of which variable sets which flag: help appends "(env NAME)"
// from it, `serve --print-config` walks it, and a test checks that every
// serve flag is here and named in the README.
type envFlag struct {
	flag, env string
	// secret values are masked by --print-config.
	secret bool
	// applied: the variable is read by applyEnv after the command line is
	// parsed (a bad value is a usage error); the other flags read theirs
	// as their default when they are defined, as they always have.
	applied bool
}

var serveEnv = []envFlag{
	{flag: "addr", env: "APPKB_ADDR"},
	{flag: "data-dir", env: "APPKB_DATA_DIR"},
	{flag: "database-url", env: "APPKB_DATABASE_URL", secret: true},
	{flag: "log-level", env: "APPKB_LOG_LEVEL"},
	{flag: "log-format", env: "APPKB_LOG_FORMAT"},
	{flag: "demo", env: "APPKB_DEMO", applied: true},
	{flag: "providers", env: "APPKB_PROVIDERS"},
	{flag: "fallback-builtin", env: "APPKB_FALLBACK_BUILTIN"},
	{flag: "fetch-allow", env: "APPKB_FETCH_ALLOW"},
	{flag: "cors-origins", env: "APPKB_CORS_ORIGINS"},
	{flag: "rate-limit", env: "APPKB_RATE_LIMIT"},
	{flag: "rate-burst", env: "APPKB_RATE_BURST"},
	{flag: "metrics-token", env: "APPKB_METRICS_TOKEN", secret: true},
	{flag: "tools", env: "APPKB_TOOLS"},
	{flag: "code-network", env: "APPKB_CODE_NETWORK"},
	{flag: "code-warm", env: "APPKB_CODE_WARM"},
	{flag: "max-conns", env: "APPKB_MAX_CONNS", applied: true},
	{flag: "max-inflight", env: "APPKB_MAX_INFLIGHT", applied: true},
	{flag: "queue-wait", env: "APPKB_QUEUE_WAIT", applied: true},
	{flag: "header-timeout", env: "APPKB_HEADER_TIMEOUT", applied: true},
	{flag: "read-timeout", env: "APPKB_READ_TIMEOUT", applied: true},
	{flag: "read-min-rate", env: "APPKB_READ_MIN_RATE", applied: true},
	{flag: "read-max", env: "APPKB_READ_MAX", applied: true},
	{flag: "auth-fail-limit", env: "APPKB_AUTH_FAIL_LIMIT", applied: true},
	{flag: "write-timeout", env: "APPKB_WRITE_TIMEOUT", applied: true},
	{flag: "idle-timeout", env: "APPKB_IDLE_TIMEOUT", applied: true},
	{flag: "max-text", env: "APPKB_MAX_TEXT", applied: true},
	{flag: "admin-token", env: "APPKB_ADMIN_TOKEN", secret: true},
	{flag: "faults", env: "APPKB_FAULTS"},
	{flag: "scenario", env: "APPKB_SCENARIO"},
	{flag: "journal", env: "APPKB_JOURNAL"},
	{flag: "ephemeral", env: "APPKB_EPHEMERAL"},
	{flag: "seed", env: "APPKB_SEED"},
	{flag: "keys-out", env: "APPKB_KEYS_OUT"},
}

// hiddenFlags are still accepted but no longer shown in help.
var hiddenFlags = map[string]bool{"strict-providers": true}

// noEnvFlags are serve flags that act on one start and so have no variable.
var noEnvFlags = map[string]bool{"print-config": true, "strict-providers": true}

func envOf(name string) (envFlag, bool) {
	for _, e := range serveEnv {
		if e.flag == name {
			return e, true
		}
	}
	return envFlag{}, false
}

// applyEnv sets each flag whose variable it reads late from that variable,
// unless the command line set the flag.
func applyEnv(fs *flag.FlagSet, set map[string]bool, getenv func(string) string) error {
	for _, e := range serveEnv {
		if !e.applied || set[e.flag] || fs.Lookup(e.flag) == nil {
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
