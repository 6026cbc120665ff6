package sqlitecopy

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// table is one table to copy.
type table struct {
	name string
	// cols are the columns both sides have and the target accepts values
	// for, in the target's order.
	cols []column
	// pk are the target's primary key columns (for the upsert of seeded
	// tables).
	pk []string
	// rowid: the SQLite table has a rowid to read in insertion order.
	rowid bool
	// identityAlways: the target has a GENERATED ALWAYS identity column,
	// which takes explicit values only with OVERRIDING SYSTEM VALUE.
	identityAlways bool
}

// column is one copied column with its PostgreSQL type.
type column struct {
	name string
	// pgType is information_schema's data_type ("boolean", "bigint",
	// "timestamp with time zone", …); for user-defined types the type name.
	pgType string
	// serial: the column draws its default from a sequence, which has to
	// be moved past the copied values.
	serial bool
}

type plan struct {
	tables              []table
	skipped, targetOnly []string
}

// sourceTable is a table as SQLite's catalogue shows it.
type sourceTable struct {
	name, sql string
}

// skipTables filters SQLite's catalogue down to the tables that hold data
// of their own: not SQLite's internal tables, not schema_migrations (each
// engine has its own), not full-text virtual tables nor their shadow
// tables (the index PostgreSQL builds for itself).
func skipTables(all []sourceTable) (keep []string, skipped []string) {
	var virtual []string
	for _, t := range all {
		if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(t.sql)), "CREATE VIRTUAL TABLE") {
			virtual = append(virtual, t.name)
		}
	}
	for _, t := range all {
		switch {
		case strings.HasPrefix(t.name, "sqlite_"), t.name == "schema_migrations":
			continue
		case slices.Contains(virtual, t.name), slices.ContainsFunc(virtual, func(v string) bool { return strings.HasPrefix(t.name, v+"_") }):
			skipped = append(skipped, t.name)
		default:
			keep = append(keep, t.name)
		}
	}
	return keep, skipped
}

// makePlan decides which tables to copy, in which order, with which
// columns. It fails when the source has a table or a column the target
// lacks: copying would lose it.
func makePlan(ctx context.Context, src *sql.Tx, dst *sql.DB) (*plan, error) {
	var all []sourceTable
	rows, err := src.QueryContext(ctx, `SELECT name, COALESCE(sql, '') FROM sqlite_master WHERE type = 'table' ORDER BY rowid`)
	if err != nil {
		return nil, fmt.Errorf("list the SQLite tables: %w", err)
	}
	for rows.Next() {
		var t sourceTable
		if err := rows.Scan(&t.name, &t.sql); err != nil {
			rows.Close()
			return nil, err
		}
		all = append(all, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	names, skipped := skipTables(all)
	withoutRowid := map[string]bool{}
	for _, t := range all {
		withoutRowid[t.name] = strings.Contains(strings.ToUpper(t.sql), "WITHOUT ROWID")
	}

	tcols, err := targetColumns(ctx, dst)
	if err != nil {
		return nil, err
	}
	pks, err := targetKeys(ctx, dst)
	if err != nil {
		return nil, err
	}
	parents, err := targetParents(ctx, dst)
	if err != nil {
		return nil, err
	}

	p := &plan{skipped: skipped}
	for _, name := range names {
		cols, ok := tcols[name]
		if !ok {
			return nil, fmt.Errorf("table %s exists in the SQLite database but not in PostgreSQL; both are at the same migration version, so this appkb build is inconsistent", name)
		}
		scols, err := sourceColumns(ctx, src, name)
		if err != nil {
			return nil, err
		}
		t := table{name: name, pk: pks[name], rowid: !withoutRowid[name]}
		byName := map[string]targetColumn{}
		for _, c := range cols {
			byName[c.name] = c
		}
		for _, sc := range scols {
			if _, ok := byName[sc]; !ok {
				return nil, fmt.Errorf("column %s.%s exists in the SQLite database but not in PostgreSQL", name, sc)
			}
		}
		for _, c := range cols {
			// Generated columns are computed by PostgreSQL from the others.
			if c.generated || !slices.Contains(scols, c.name) {
				continue
			}
			t.cols = append(t.cols, column{name: c.name, pgType: c.pgType, serial: c.serial})
			if c.identityAlways {
				t.identityAlways = true
			}
		}
		p.tables = append(p.tables, t)
	}
	for name := range tcols {
		if name != "schema_migrations" && !slices.Contains(names, name) {
			p.targetOnly = append(p.targetOnly, name)
		}
	}
	sort.Strings(p.targetOnly)
	ordered, err := parentsFirst(names, parents)
	if err != nil {
		return nil, err
	}
	// Seeded tables go last, unless something points at them: their rows
	// then replace whatever the triggers of other tables did to them during
	// the copy (cache_versions counters).
	referenced := map[string]bool{}
	for _, ps := range parents {
		for _, p := range ps {
			referenced[p] = true
		}
	}
	last := slices.DeleteFunc(slices.Clone(ordered), func(n string) bool { return !seeded[n] || referenced[n] })
	ordered = append(slices.DeleteFunc(ordered, func(n string) bool { return slices.Contains(last, n) }), last...)
	byName := map[string]table{}
	for _, t := range p.tables {
		byName[t.name] = t
	}
	p.tables = p.tables[:0]
	for _, name := range ordered {
		p.tables = append(p.tables, byName[name])
	}
	return p, nil
}

// parentsFirst orders names so that every table comes after the tables
// its foreign keys point at, keeping the given order where the keys allow.
// A table pointing at itself is fine; a cycle between tables is not.
func parentsFirst(names []string, parents map[string][]string) ([]string, error) {
	placed := map[string]bool{}
	in := map[string]bool{}
	for _, n := range names {
		in[n] = true
	}
	out := make([]string, 0, len(names))
	for len(out) < len(names) {
		progress := false
		for _, n := range names {
			if placed[n] {
				continue
			}
			ready := true
			for _, p := range parents[n] {
				if p != n && in[p] && !placed[p] {
					ready = false
					break
				}
			}
			if ready {
				placed[n] = true
				out = append(out, n)
				progress = true
				break
			}
		}
		if !progress {
			var left []string
			for _, n := range names {
				if !placed[n] {
					left = append(left, n)
				}
			}
			return nil, fmt.Errorf("the foreign keys of %s form a cycle; no copy order exists", strings.Join(left, ", "))
		}
	}
	return out, nil
}

func sourceColumns(ctx context.Context, src *sql.Tx, tableName string) ([]string, error) {
	rows, err := src.QueryContext(ctx, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, tableName)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", tableName, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

type targetColumn struct {
	name, pgType      string
	generated, serial bool
	identityAlways    bool
}

// targetColumns reads the columns of every table in the target's schema.
func targetColumns(ctx context.Context, dst *sql.DB) (map[string][]targetColumn, error) {
	rows, err := dst.QueryContext(ctx, `
		SELECT c.table_name, c.column_name, c.data_type, c.udt_name, c.is_generated,
		       COALESCE(c.column_default, ''), c.is_identity, COALESCE(c.identity_generation, '')
		FROM information_schema.columns c
		JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
		WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
		ORDER BY c.table_name, c.ordinal_position`)
	if err != nil {
		return nil, fmt.Errorf("read the PostgreSQL columns: %w", err)
	}
	defer rows.Close()
	out := map[string][]targetColumn{}
	for rows.Next() {
		var tbl, name, dataType, udt, generated, def, identity, identityGen string
		if err := rows.Scan(&tbl, &name, &dataType, &udt, &generated, &def, &identity, &identityGen); err != nil {
			return nil, err
		}
		if dataType == "USER-DEFINED" {
			dataType = udt
		}
		out[tbl] = append(out[tbl], targetColumn{
			name:           name,
			pgType:         dataType,
			generated:      generated == "ALWAYS",
			serial:         strings.HasPrefix(def, "nextval(") || identity == "YES",
			identityAlways: identity == "YES" && identityGen == "ALWAYS",
		})
	}
	return out, rows.Err()
}

// targetKeys reads the primary key columns of every table.
func targetKeys(ctx context.Context, dst *sql.DB) (map[string][]string, error) {
	rows, err := dst.QueryContext(ctx, `
		SELECT tc.table_name, kcu.column_name
		FROM information_schema.table_constraints tc
		JOIN information_schema.key_column_usage kcu
		  ON kcu.constraint_name = tc.constraint_name AND kcu.table_schema = tc.table_schema AND kcu.table_name = tc.table_name
		WHERE tc.constraint_type = 'PRIMARY KEY' AND tc.table_schema = current_schema()
		ORDER BY tc.table_name, kcu.ordinal_position`)
	if err != nil {
		return nil, fmt.Errorf("read the PostgreSQL primary keys: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var tbl, col string
		if err := rows.Scan(&tbl, &col); err != nil {
			return nil, err
		}
		out[tbl] = append(out[tbl], col)
	}
	return out, rows.Err()
}

// targetParents maps every table to the tables its foreign keys point at.
func targetParents(ctx context.Context, dst *sql.DB) (map[string][]string, error) {
	rows, err := dst.QueryContext(ctx, `
		SELECT ch.relname, pa.relname
		FROM pg_constraint c
		JOIN pg_class ch ON ch.oid = c.conrelid
		JOIN pg_class pa ON pa.oid = c.confrelid
		JOIN pg_namespace n ON n.oid = ch.relnamespace
		WHERE c.contype = 'f' AND n.nspname = current_schema()`)
	if err != nil {
		return nil, fmt.Errorf("read the PostgreSQL foreign keys: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var child, parent string
		if err := rows.Scan(&child, &parent); err != nil {
			return nil, err
		}
		out[child] = append(out[child], parent)
	}
	return out, rows.Err()
}

// quoteIdent quotes a table or column name for PostgreSQL and SQLite.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
