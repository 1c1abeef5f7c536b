package migrate

import (
	"fmt"
	"io/fs"

	"github.com/idem-dev/idem/idemshared/keytable"
)

// Set is one package's embedded migrations. The stores' migration packages
// (pgstore/pgmigrate, sqlitestore/sqlitemigrate) apply and print it.
type Set struct {
	Name  string // the owning package, prefixed to errors
	Table string // where the applied versions are recorded
	FS    fs.FS  // the embedded files
	Dir   string // the folder of FS holding NNN_name.sql
	// Rewrite, when set, rewrites each migration's SQL: a store writes its
	// configured key table's name in.
	Rewrite func(sql string) string
	// KeyTable, when set, is the key table the files are rewritten for
	// (they are written for keytable.Default); a name that is not an
	// identifier fails Migrations. A store records them in Table
	// keytable.Migrations(KeyTable).
	KeyTable string
}

// Migrations loads the set's files (see Load).
func (s Set) Migrations() ([]Migration, error) {
	sub, err := fs.Sub(s.FS, s.Dir)
	if err != nil {
		return nil, fmt.Errorf("%s: migrations: %w", s.Name, err)
	}
	ms, err := Load(sub)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	table, err := keytable.Check(s.KeyTable)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	for i := range ms {
		if s.Rewrite != nil {
			ms[i].SQL = s.Rewrite(ms[i].SQL)
		}
		if s.KeyTable != "" {
			ms[i].SQL = keytable.Rewrite(ms[i].SQL, table)
		}
	}
	return ms, nil
}

// Apply loads the set and applies its migrations in order with applyOne,
// the store's (see Each), naming the set in the error.
func (s Set) Apply(applyOne func(Migration) (bool, error)) ([]int, error) {
	ms, err := s.Migrations()
	if err != nil {
		return nil, err
	}
	applied, err := Each(ms, applyOne)
	if err != nil {
		return applied, fmt.Errorf("%s: migrate: %w", s.Name, err)
	}
	return applied, nil
}

// SQL renders the set, after tableSQL (the statement creating its table of
// applied versions), as one plain script.
func (s Set) SQL(tableSQL string) (string, error) {
	ms, err := s.Migrations()
	if err != nil {
		return "", err
	}
	return tableSQL + ";\n\n" + Script(ms, s.Table), nil
}
