package db

import (
	"database/sql"
	"database/sql/driver"
	"testing"
)

// nulValuer is a custom column type whose value is text, like the JSON
// columns.
type nulValuer struct{ s string }

func (v nulValuer) Value() (driver.Value, error) { return v.s, nil }

// TestPostgresStoresTextWithoutNUL writes text holding NUL characters
// through every way arguments take (a string, a pointer to one, a custom
// column type, a GORM row) and reads it back without them; bytes keep
// theirs. Without nulFreeConnector PostgreSQL refuses each statement.
func TestPostgresStoresTextWithoutNUL(t *testing.T) {
	gdb, err := OpenPostgres(TempURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer Close(gdb)
	if err := gdb.Exec(`CREATE TABLE nul_probe (id integer PRIMARY KEY, body text, raw bytea)`).Error; err != nil {
		t.Fatal(err)
	}
	type nulProbe struct {
		ID   int
		Body sql.NullString
		Raw  []byte
	}
	ptr := "po\x00inter"
	tests := []struct {
		name string
		run  func(id int) error
		want string
	}{
		{"string", func(id int) error {
			return gdb.Exec(`INSERT INTO nul_probe (id, body) VALUES (?, ?)`, id, "a\x00b\x00c").Error
		}, "abc"},
		{"pointer", func(id int) error { return gdb.Exec(`INSERT INTO nul_probe (id, body) VALUES (?, ?)`, id, &ptr).Error }, "pointer"},
		{"valuer", func(id int) error {
			return gdb.Exec(`INSERT INTO nul_probe (id, body) VALUES (?, ?)`, id, nulValuer{`{"k":"v\u0000"}` + "\x00"}).Error
		}, `{"k":"v\u0000"}`},
		{"row", func(id int) error {
			return gdb.Table("nul_probe").Create(&nulProbe{ID: id, Body: sql.NullString{String: "ro\x00w", Valid: true}, Raw: []byte{1, 0, 2}}).Error
		}, "row"},
		{"nil custom value is NULL", func(id int) error {
			return gdb.Exec(`INSERT INTO nul_probe (id, body) VALUES (?, ?)`, id, (*nulValuer)(nil)).Error
		}, ""},
		{"no NUL at all", func(id int) error {
			return gdb.Exec(`INSERT INTO nul_probe (id, body) VALUES (?, ?)`, id, "plain").Error
		}, "plain"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(i); err != nil {
				t.Fatal(err)
			}
			var got nulProbe
			if err := gdb.Table("nul_probe").Where("id = ?", i).Take(&got).Error; err != nil {
				t.Fatal(err)
			}
			if got.Body.String != tc.want || got.Body.Valid != (tc.want != "") {
				t.Errorf("stored %+v, want %q", got.Body, tc.want)
			}
			if tc.name == "row" && string(got.Raw) != "\x01\x00\x02" {
				t.Errorf("bytes stored as %q", got.Raw)
			}
		})
	}
}
