package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"gorm.io/gorm"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/pipeline"
)

// setupPipelineImport makes a knowledge pipeline export the pipeline a
// knowledge base's pipeline runs use.
func setupPipelineImport(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
	datasetID := fs.String("dataset", "", "knowledge base whose pipeline the file becomes (required)")
	return func(ctx context.Context) error {
		if *datasetID == "" {
			return usagef("kb pipeline import: --dataset is required")
		}
		data, err := os.ReadFile(env.args[0])
		if err != nil {
			return err
		}
		return withDB(env, func(gdb *gorm.DB) error {
			svc := pipeline.NewService(gdb, nil, env.dataDir, nil, nil)
			imp, err := svc.Import(ctx, datasets.Actor{KeyID: "cli"}, *datasetID, data)
			if err != nil {
				return err
			}
			ids := make([]string, 0, len(imp.Datasources))
			for _, d := range imp.Datasources {
				ids = append(ids, d.NodeID+" ("+d.DatasourceType+")")
			}
			fmt.Fprintf(env.out, "imported pipeline %q into %s; data source nodes: %s\n", imp.Name, *datasetID, strings.Join(ids, ", "))
			if len(imp.Unsupported) > 0 {
				fmt.Fprintf(env.out, "warning: runs that reach these nodes will fail: %s\n", strings.Join(imp.Unsupported, ", "))
			}
			return nil
		})
	}
}
