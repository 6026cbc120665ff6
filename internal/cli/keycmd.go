package cli

import (
	"context"
	"flag"

	"gorm.io/gorm"

	"appkb/internal/apps/apikeys"
)

// setupKeyCreate is `key create`: a new app key or knowledge key, printed once.
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

// setupKeyList is `key list`: every key as a JSON line, never its secret.
func setupKeyList(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
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
}

// setupKeyRevoke is `key revoke`: the one active key with the given prefix stops working.
func setupKeyRevoke(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
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
}
