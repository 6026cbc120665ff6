package db

import (
	"fmt"

	"gorm.io/gorm"
)

// CheckCurrent fails when the database lacks a migration this binary ships
// (or cannot be read); readiness probes use it.
func CheckCurrent(gdb *gorm.DB) error {
	all, err := migrations(DialectOf(gdb))
	if err != nil {
		return err
	}
	have, err := Version(gdb)
	if err != nil {
		return err
	}
	if want := all[len(all)-1].version; have < want {
		return fmt.Errorf("schema is at migration %d, this binary needs %d", have, want)
	}
	return nil
}
