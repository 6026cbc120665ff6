package db

import "strings"

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// EscapeLike quotes the wildcards of user text for a LIKE pattern; use the
// pattern with ESCAPE '\'.
func EscapeLike(s string) string { return likeEscaper.Replace(s) }
