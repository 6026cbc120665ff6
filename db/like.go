package db

import (
	"strings"

	"gorm.io/gorm"
)

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// EscapeLike quotes the wildcards of user text for a LIKE pattern; use the
// pattern with ESCAPE '\'.
func EscapeLike(s string) string { return likeEscaper.Replace(s) }

// ContainsCI is a WHERE condition on gdb's engine that holds when column
// contains the pattern argument (made with EscapeLike), ignoring ASCII
// case as SQLite's LIKE does: PostgreSQL needs ILIKE for that.
func ContainsCI(gdb *gorm.DB, column string) string {
	op := "LIKE"
	if IsPostgres(gdb) {
		op = "ILIKE"
	}
	return column + " " + op + ` ? ESCAPE '\'`
}
