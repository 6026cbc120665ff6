package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"

	"appkb/db"
	"appkb/internal/cli/sqlitecopy"
)

// setupMigrate copies a SQLite installation into an empty PostgreSQL
// database (see sqlitecopy), with progress on standard error and the count
// check on standard output.
func setupMigrate(fs *flag.FlagSet, env *cmdEnv) func(context.Context) error {
	from := fs.String("from-sqlite", "", "data directory of the SQLite installation to copy (required; stop its server first)")
	to := fs.String("to", os.Getenv("APPKB_DATABASE_URL"), "postgres:// URL of the empty target database (required; env APPKB_DATABASE_URL)")
	batch := fs.Int("batch", 500, "most rows one insert transaction carries")
	return func(ctx context.Context) error {
		switch {
		case *from == "":
			return usagef("migrate: --from-sqlite is required")
		case *to == "":
			return usagef("migrate: --to is required")
		case !db.IsPostgresURL(*to):
			return usagef("migrate: --to must be a postgres:// or postgresql:// URL")
		case *batch <= 0:
			return usagef("migrate: --batch must be positive")
		}
		if err := sqlitecopy.CheckSource(*from); err != nil {
			return err
		}
		dst, err := db.OpenPostgres(*to)
		if err != nil {
			return err
		}
		defer db.Close(dst)
		rep, err := sqlitecopy.Copy(ctx, *from, dst, sqlitecopy.Options{
			BatchRows: *batch,
			Progress:  newProgressBar(os.Stderr, isatty.IsTerminal(os.Stderr.Fd()) || isatty.IsCygwinTerminal(os.Stderr.Fd())),
		})
		if err != nil {
			return err
		}
		return printCopyReport(env.out, rep)
	}
}

// printCopyReport writes the count check as a table and fails when any
// count differs.
func printCopyReport(out io.Writer, rep *sqlitecopy.Report) error {
	width := len("TABLE")
	for _, c := range rep.Tables {
		width = max(width, len([]rune(c.Name)))
	}
	fmt.Fprintf(out, "%-*s  %10s  %10s\n", width, "TABLE", "SQLITE", "POSTGRESQL")
	for _, c := range rep.Tables {
		mark := ""
		if c.Source != c.Target {
			mark = "  MISMATCH"
		}
		pad := width - len([]rune(c.Name))
		fmt.Fprintf(out, "%s%s  %10d  %10d%s\n", c.Name, strings.Repeat(" ", pad), c.Source, c.Target, mark)
	}
	if rep.CreatedBlobs {
		fmt.Fprintln(out, "created table blobs (the target's migrations had not)")
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintf(out, "not copied (SQLite full-text index, rebuilt by PostgreSQL): %s\n", strings.Join(rep.Skipped, ", "))
	}
	if len(rep.TargetOnly) > 0 {
		fmt.Fprintf(out, "only in PostgreSQL, filled by PostgreSQL itself: %s\n", strings.Join(rep.TargetOnly, ", "))
	}
	if len(rep.MissingFiles) > 0 {
		fmt.Fprintf(out, "warning: %d files the database names were already missing from the data directory: %s\n",
			len(rep.MissingFiles), strings.Join(rep.MissingFiles[:min(len(rep.MissingFiles), 10)], ", "))
	}
	if bad := rep.Mismatches(); len(bad) > 0 {
		names := make([]string, len(bad))
		for i, c := range bad {
			names[i] = c.Name
		}
		return errors.New("count check failed for " + strings.Join(names, ", "))
	}
	fmt.Fprintf(out, "copied %d tables and their files at migration %d; every count matches\n", len(rep.Tables)-1, rep.SourceVersion)
	return nil
}

// progressBar draws one line per step: redrawn in place on a terminal,
// otherwise printed when the step ends and every few seconds in between.
type progressBar struct {
	w          io.Writer
	tty        bool
	name       string
	total      int64
	done       int64
	lastRedraw time.Time
}

func newProgressBar(w io.Writer, tty bool) *progressBar { return &progressBar{w: w, tty: tty} }

func (p *progressBar) Begin(name string, total int64) {
	p.name, p.total, p.done = name, total, 0
	p.lastRedraw = time.Now()
	if p.tty {
		p.draw()
	}
}

func (p *progressBar) Advance(done int64) {
	p.done = done
	every := 5 * time.Second
	if p.tty {
		every = 100 * time.Millisecond
	}
	if time.Since(p.lastRedraw) >= every {
		p.draw()
	}
}

func (p *progressBar) End() {
	p.done = max(p.done, p.total)
	p.draw()
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

func (p *progressBar) draw() {
	p.lastRedraw = time.Now()
	if !p.tty {
		fmt.Fprintf(p.w, "%-26s %d/%d\n", p.name, p.done, p.total)
		return
	}
	const width = 30
	filled := width
	if p.total > 0 {
		filled = int(p.done * width / p.total)
	}
	fmt.Fprintf(p.w, "\r%-26s [%s%s] %d/%d", p.name, strings.Repeat("#", filled), strings.Repeat(".", width-filled), p.done, p.total)
}
