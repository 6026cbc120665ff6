package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/cli/backup"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/textsplit"
	"appkb/models"
)

// ingestPoll is how often kb ingest looks at the indexing state.
const ingestPoll = 200 * time.Millisecond

func setupIngest(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
	datasetID := fs.String("dataset", "", "knowledge base to add the files to (required)")
	technique := fs.String("indexing-technique", "high_quality", "high_quality or economy; only used when the knowledge base has none yet")
	providers := fs.String("providers", os.Getenv("APPKB_PROVIDERS"), "model providers file, as for serve (env APPKB_PROVIDERS)")
	fallback := fs.Bool("fallback-builtin", envBool("APPKB_FALLBACK_BUILTIN"), "embed with the built-in model when the knowledge base's provider is not configured")
	return func(ctx context.Context) error {
		if *datasetID == "" {
			return usagef("kb ingest: --dataset is required")
		}
		files, err := collectFiles(env.args)
		if err != nil {
			return err
		}
		registry, err := llmRegistry(*providers, *fallback)
		if err != nil {
			return fmt.Errorf("providers: %w", err)
		}
		return withDB(env, func(gdb *gorm.DB) error {
			in := &ingester{db: gdb, svc: documents.NewService(gdb, registry, env.dataDir), dataset: *datasetID,
				progress: newProgress(env.out, len(files))}
			if err := in.settings(ctx, *technique); err != nil {
				return err
			}
			// Index here, so that the command also works without a server; a
			// running server's workers may take some of the jobs as well.
			stop := documents.Start(ctx, documents.Config{DB: gdb, Models: registry, DataDir: env.dataDir, Logger: env.log})
			defer stop()
			return in.run(ctx, files)
		})
	}
}

// collectFiles expands directories (recursively, skipping hidden entries)
// into the regular files under them, in a stable order.
func collectFiles(paths []string) ([]string, error) {
	var out []string
	for _, root := range paths {
		st, err := os.Stat(root)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, root)
			continue
		}
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path != root && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, usagef("kb ingest: no files under %s", strings.Join(paths, " "))
	}
	return out, nil
}

type ingester struct {
	db       *gorm.DB
	svc      *documents.Service
	dataset  string
	st       documents.Settings
	progress *progress
}

// settings takes the process rule and document form of the knowledge base's
// latest document, so that new documents are split like the earlier ones;
// a knowledge base without documents gets the automatic rule.
func (in *ingester) settings(ctx context.Context, technique string) error {
	var ds models.Dataset
	if err := in.db.WithContext(ctx).Where("id = ?", in.dataset).Take(&ds).Error; err != nil {
		return fmt.Errorf("knowledge base %s does not exist", in.dataset)
	}
	if ds.IndexingTechnique == nil {
		in.st.IndexingTechnique = &technique
	}
	var last models.Document
	err := in.db.WithContext(ctx).Where("dataset_id = ?", in.dataset).Order("created_at DESC, position DESC").Limit(1).Find(&last).Error
	if err != nil {
		return err
	}
	if last.ID != "" && last.ProcessRule != "" {
		var rule textsplit.ProcessRule
		if err := json.Unmarshal([]byte(last.ProcessRule), &rule); err == nil {
			in.st.ProcessRule = &rule
			form := last.DocForm
			in.st.DocForm = &form
		}
	}
	return nil
}

func (in *ingester) run(ctx context.Context, files []string) error {
	p := in.progress
	pending := map[string]string{} // document id → path
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		id, err := in.upload(ctx, path)
		if err != nil {
			p.failed(path, err)
			continue
		}
		pending[id] = path
		p.uploaded(path)
	}
	for len(pending) > 0 {
		ids := make([]string, 0, len(pending))
		for id := range pending {
			ids = append(ids, id)
		}
		var docs []models.Document
		if err := in.db.WithContext(ctx).Where("id IN ?", ids).Find(&docs).Error; err != nil {
			return err
		}
		for _, d := range docs {
			switch d.IndexingStatus {
			case documents.StatusCompleted:
				var chunks int64
				in.db.WithContext(ctx).Model(&models.Segment{}).Where("document_id = ?", d.ID).Count(&chunks)
				p.indexed(pending[d.ID], int(chunks))
				delete(pending, d.ID)
			case documents.StatusError:
				msg := "indexing failed"
				if d.Error != nil {
					msg = *d.Error
				}
				p.failed(pending[d.ID], fmt.Errorf("%s", msg))
				delete(pending, d.ID)
			}
		}
		if len(docs) < len(ids) {
			for _, id := range ids {
				if !containsDoc(docs, id) {
					p.failed(pending[id], fmt.Errorf("the document was deleted while it was indexed"))
					delete(pending, id)
				}
			}
		}
		if len(pending) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(ingestPoll):
		}
	}
	return p.summary()
}

func containsDoc(docs []models.Document, id string) bool {
	for _, d := range docs {
		if d.ID == id {
			return true
		}
	}
	return false
}

func (in *ingester) upload(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	name := filepath.Base(path)
	created, err := in.svc.CreateFromFile(ctx, datasets.Actor{KeyID: "cli"}, in.dataset,
		documents.Upload{Name: name, MimeType: mime.TypeByExtension(filepath.Ext(name)), Body: f}, in.st)
	if err != nil {
		return "", err
	}
	// Only the first document decides the knowledge base's technique.
	in.st.IndexingTechnique = nil
	return created.Document.ID, nil
}

// progress reports kb ingest's advance: a bar redrawn in place on a
// terminal, one plain line per event otherwise.
type progress struct {
	out                          io.Writer
	tty                          bool
	total, uploads, done, errors int
	chunks                       int
	failures                     []string
}

func newProgress(out io.Writer, total int) *progress {
	p := &progress{out: out, total: total}
	if f, ok := out.(*os.File); ok {
		p.tty = isatty.IsTerminal(f.Fd())
	}
	return p
}

func (p *progress) uploaded(path string) {
	p.uploads++
	p.line("uploaded %s", path)
}

func (p *progress) indexed(path string, chunks int) {
	p.done++
	p.chunks += chunks
	p.line("indexed %s (%d chunks)", path, chunks)
}

func (p *progress) failed(path string, err error) {
	p.errors++
	p.failures = append(p.failures, fmt.Sprintf("%s: %v", path, err))
	if p.tty {
		fmt.Fprintf(p.out, "\r\033[K")
		fmt.Fprintf(p.out, "failed %s: %v\n", path, err)
		p.bar()
		return
	}
	fmt.Fprintf(p.out, "failed %s: %v\n", path, err)
}

func (p *progress) line(format string, args ...any) {
	if p.tty {
		p.bar()
		return
	}
	fmt.Fprintf(p.out, format+"\n", args...)
}

func (p *progress) bar() {
	const width = 30
	finished := p.done + p.errors
	filled := width * finished / max(p.total, 1)
	fmt.Fprintf(p.out, "\r\033[K[%s%s] %d/%d files uploaded, %d indexed, %d chunks, %d errors",
		strings.Repeat("#", filled), strings.Repeat("-", width-filled), p.uploads, p.total, p.done, p.chunks, p.errors)
}

func (p *progress) summary() error {
	if p.tty {
		fmt.Fprintln(p.out)
	}
	fmt.Fprintf(p.out, "%d files: %d indexed (%d chunks), %d failed\n", p.total, p.done, p.chunks, p.errors)
	if p.errors > 0 {
		return fmt.Errorf("%d of %d files failed:\n  %s", p.errors, p.total, strings.Join(p.failures, "\n  "))
	}
	return nil
}

func setupBackup(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
	return func(ctx context.Context) error {
		if _, err := os.Stat(filepath.Join(env.dataDir, db.FileName)); err != nil {
			return fmt.Errorf("%s holds no appkb database", env.dataDir)
		}
		var sum *backup.Summary
		var err error
		if env.args[0] == "-" {
			sum, err = backup.Write(ctx, env.dataDir, env.out)
		} else {
			sum, err = backup.WriteFile(ctx, env.dataDir, env.args[0])
		}
		if err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		// The same summary restore prints; on standard error when standard
		// output is the archive itself.
		report := env.out
		if env.args[0] == "-" {
			report = os.Stderr
		}
		printJSON(report, map[string]any{"backup": env.args[0], "files": sum.Files, "bytes": sum.Bytes})
		return nil
	}
}

func setupRestore(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
	return func(ctx context.Context) error {
		f, err := os.Open(env.args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		sum, err := backup.Restore(f, env.dataDir)
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		// Bring the schema up to this binary's version now, not at the next start.
		gdb, err := db.Open(env.dataDir)
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		db.Close(gdb)
		printJSON(env.out, map[string]any{"restored": env.dataDir, "files": sum.Files, "bytes": sum.Bytes})
		return nil
	}
}
