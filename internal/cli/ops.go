package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"gopkg.in/yaml.v3"
	"gorm.io/gorm"

	"appkb/handlers/health"
	"appkb/internal/apps"
	"appkb/internal/llm"
	"appkb/internal/platform/metrics"
	"appkb/models"
)

// readiness tracks what /readyz reports beyond the database: whether the
// background workers run and whether the server is shutting down.
type readiness struct {
	workers, draining atomic.Bool
}

func (r *readiness) workersStarted() { r.workers.Store(true) }
func (r *readiness) stopping()       { r.draining.Store(true) }

func (r *readiness) checks() []health.Check {
	return []health.Check{
		{Name: "workers", Fn: func(context.Context) error {
			if !r.workers.Load() {
				return errors.New("indexing workers are not running")
			}
			return nil
		}},
		{Name: "shutdown", Fn: func(context.Context) error {
			if r.draining.Load() {
				return errors.New("the server is shutting down")
			}
			return nil
		}},
	}
}

// startupChecks records the build in the metrics and warns, once per app,
// about apps whose model providers are not configured.
func startupChecks(ctx context.Context, gdb *gorm.DB, cfg serveConfig, log *slog.Logger) {
	metrics.SetBuild(version, commit)
	list, err := apps.NewStore(gdb).List(ctx)
	if err != nil {
		log.Warn("could not list apps to check their model providers", "err", err)
		return
	}
	consequence := "its requests fail with provider_not_initialize (start with --fallback-builtin to answer with the built-in model)"
	if cfg.fallback {
		consequence = "the built-in offline model answers in its place (--fallback-builtin)"
	}
	for _, a := range list {
		var missing []string
		for _, p := range appProviders(a.Definition) {
			if !cfg.models.Configured(p) {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			log.Warn("app uses a model provider that is not configured; "+consequence,
				"app_id", a.ID, "app", a.Name, "providers", strings.Join(missing, ","))
		}
	}
}

// appProviders lists the model providers an app definition names: the
// `provider` of every `model` block, in the model config and in workflow
// nodes alike. Plugin ids are shortened to the provider name.
func appProviders(definition string) []string {
	var doc any
	if err := yaml.Unmarshal([]byte(definition), &doc); err != nil {
		return nil
	}
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if m, ok := v["model"].(map[string]any); ok {
				if p, ok := m["provider"].(string); ok && strings.TrimSpace(p) != "" {
					seen[apps.ModelSpec{Provider: p}.ProviderName()] = true
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// datasetsExist fails when one of ids names no knowledge base.
func datasetsExist(ctx context.Context, gdb *gorm.DB, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	var found []string
	if err := gdb.WithContext(ctx).Model(&models.Dataset{}).Where("id IN ?", ids).Pluck("id", &found).Error; err != nil {
		return err
	}
	for _, id := range ids {
		if !slices.Contains(found, id) {
			return fmt.Errorf("knowledge base %s does not exist", id)
		}
	}
	return nil
}

func envBool(name string) bool {
	v, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv(name)))
	return v
}

// envInt reads an integer from the environment, or def when it is unset or
// not a number.
func envInt(name string, def int) int {
	v, err := strconv.Atoi(strings.TrimSpace(os.Getenv(name)))
	if err != nil {
		return def
	}
	return v
}

// splitList reads a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// llmRegistry is used by commands other than serve that run models
// (kb ingest embeds with the knowledge base's model).
func llmRegistry(path string, fallback bool) (*llm.Registry, error) {
	return llm.Load(path, os.Getenv, !fallback)
}
