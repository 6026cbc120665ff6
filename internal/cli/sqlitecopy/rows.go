package sqlitecopy

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

const (
	// maxParams is PostgreSQL's limit on the parameters of one statement.
	maxParams = 65535
	// maxBatchBytes ends a batch early when its values grow large (app
	// definitions, document texts, vectors).
	maxBatchBytes = 16 << 20
)

// copyTable copies every row of t from the snapshot into dst, a batch per
// transaction, and returns the source's row count.
func copyTable(ctx context.Context, src *sql.Tx, dst *sql.DB, t table, opts Options) (int64, error) {
	var total int64
	if err := src.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+quoteIdent(t.name)).Scan(&total); err != nil {
		return 0, fmt.Errorf("count rows: %w", err)
	}
	opts.Progress.Begin(t.name, total)
	defer opts.Progress.End()
	if total == 0 || len(t.cols) == 0 {
		return total, nil
	}

	names := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = quoteIdent(c.name)
	}
	query := `SELECT ` + strings.Join(names, ", ") + ` FROM ` + quoteIdent(t.name)
	if t.rowid {
		query += ` ORDER BY rowid`
	}
	rows, err := src.QueryContext(ctx, query)
	if err != nil {
		return 0, err
	}
	defer rows.Close()

	perBatch := min(opts.BatchRows, maxParams/len(t.cols))
	vals := make([]any, len(t.cols))
	ptrs := make([]any, len(t.cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var (
		batch      []any
		labels     []string // which row each of the batch is, for errors
		batchRows  int
		batchBytes int
		done       int64
	)
	flush := func() error {
		if batchRows == 0 {
			return nil
		}
		if err := insertBatch(ctx, dst, t, names, batchRows, batch); err != nil {
			if batchRows == 1 {
				return fmt.Errorf("%s: %w", labels[0], err)
			}
			// Find the row PostgreSQL refuses, so the message can name it.
			nc := len(t.cols)
			for r := range batchRows {
				if err := insertBatch(ctx, dst, t, names, 1, batch[r*nc:(r+1)*nc]); err != nil {
					return fmt.Errorf("%s: %w", labels[r], err)
				}
			}
		}
		done += int64(batchRows)
		opts.Progress.Advance(done)
		batch, labels, batchRows, batchBytes = batch[:0], labels[:0], 0, 0
		return nil
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return 0, err
		}
		label := rowLabel(t, vals, done+int64(batchRows)+1)
		labels = append(labels, label)
		for i, c := range t.cols {
			v, err := convert(vals[i], c.pgType)
			if err != nil {
				return 0, fmt.Errorf("%s, column %s: %w", label, c.name, err)
			}
			batch = append(batch, v)
			batchBytes += sizeOf(v)
		}
		batchRows++
		if batchRows >= perBatch || batchBytes >= maxBatchBytes {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if err := flush(); err != nil {
		return 0, err
	}
	return total, nil
}

// rowLabel names a row by its primary key ("row id=…"), or by its place
// when the key is not among the copied columns.
func rowLabel(t table, vals []any, n int64) string {
	var parts []string
	for _, k := range t.pk {
		i := slices.IndexFunc(t.cols, func(c column) bool { return c.name == k })
		if i < 0 {
			return fmt.Sprintf("row %d", n)
		}
		v := vals[i]
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("row %d", n)
	}
	return "row " + strings.Join(parts, " ")
}

// insertBatch writes n rows (their values one row after the other in args)
// in one transaction. Rows of a seeded table replace what the migrations
// put there.
func insertBatch(ctx context.Context, dst *sql.DB, t table, names []string, n int, args []any) error {
	var b strings.Builder
	b.WriteString(`INSERT INTO ` + quoteIdent(t.name) + ` (` + strings.Join(names, ", ") + `)`)
	if t.identityAlways {
		b.WriteString(` OVERRIDING SYSTEM VALUE`)
	}
	b.WriteString(` VALUES `)
	p := 1
	for r := range n {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range names {
			if c > 0 {
				b.WriteString(", ")
			}
			b.WriteString("$" + strconv.Itoa(p))
			p++
		}
		b.WriteByte(')')
	}
	if seeded[t.name] && len(t.pk) > 0 {
		pk := make([]string, len(t.pk))
		for i, k := range t.pk {
			pk[i] = quoteIdent(k)
		}
		var set []string
		for _, c := range t.cols {
			if !slices.Contains(t.pk, c.name) {
				set = append(set, quoteIdent(c.name)+" = EXCLUDED."+quoteIdent(c.name))
			}
		}
		b.WriteString(` ON CONFLICT (` + strings.Join(pk, ", ") + `) DO `)
		if len(set) == 0 {
			b.WriteString(`NOTHING`)
		} else {
			b.WriteString(`UPDATE SET ` + strings.Join(set, ", "))
		}
	}
	tx, err := dst.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// resetSequences moves the sequence behind every serial column of t past
// the largest copied value, so that rows added later get fresh numbers.
func resetSequences(ctx context.Context, dst *sql.DB, t table) error {
	for _, c := range t.cols {
		if !c.serial {
			continue
		}
		_, err := dst.ExecContext(ctx,
			`SELECT setval(pg_get_serial_sequence($1, $2), COALESCE((SELECT MAX(`+quoteIdent(c.name)+`) FROM `+quoteIdent(t.name)+`), 0) + 1, false)`,
			quoteIdent(t.name), c.name)
		if err != nil {
			return fmt.Errorf("column %s: %w", c.name, err)
		}
	}
	return nil
}
