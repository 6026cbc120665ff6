package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"gorm.io/gorm"

	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/llm"
	"appkb/internal/run/workflow"
)

// importApp is `app import`: it stores the DSL file as a new app with a key,
// or, given replaceID, as the new definition of that app.
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

// setupAppImport is `app import`.
func setupAppImport(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
	replace := fs.String("replace", "", "update this app in place instead of creating one")
	return func(ctx context.Context) error {
		return withDB(env, func(gdb *gorm.DB) error { return importApp(ctx, gdb, env.args[0], *replace, env.out, env.log) })
	}
}

// setupAppExport is `app export`: the definition as it was imported.
func setupAppExport(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
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
}

// setupAppList is `app list`: every app as a JSON line.
func setupAppList(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
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
}
