package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Set is one package's embedded migrations: what its Migrate and
// MigrationSQL are made of.
type Set struct {
	Name  string // the owning package, prefixed to errors
	Table string // where the applied versions are recorded
	FS    fs.FS  // the embedded files
	Dir   string // the folder of FS holding NNN_name.sql
}

func (s Set) load() ([]Migration, error) {
	sub, err := fs.Sub(s.FS, s.Dir)
	if err != nil {
		return nil, fmt.Errorf("%s: migrations: %w", s.Name, err)
	}
	ms, err := Load(sub)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	return ms, nil
}

// ApplyPostgres applies the set's pending migrations (see the package
// function of the same name) and returns the versions it applied.
func (s Set) ApplyPostgres(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	ms, err := s.load()
	if err != nil {
		return nil, err
	}
	applied, err := ApplyPostgres(ctx, pool, s.Table, ms)
	if err != nil {
		return applied, fmt.Errorf("%s: migrate: %w", s.Name, err)
	}
	return applied, nil
}

// ApplySQLite applies the set's pending migrations (see the package
// function of the same name) and returns the versions it applied.
func (s Set) ApplySQLite(ctx context.Context, db *sql.DB) ([]int, error) {
	ms, err := s.load()
	if err != nil {
		return nil, err
	}
	applied, err := ApplySQLite(ctx, db, s.Table, ms)
	if err != nil {
		return applied, fmt.Errorf("%s: migrate: %w", s.Name, err)
	}
	return applied, nil
}

// PostgresSQL renders the set, with its table of applied versions, as one
// plain PostgreSQL script.
func (s Set) PostgresSQL() (string, error) {
	ms, err := s.load()
	if err != nil {
		return "", err
	}
	return PostgresTableSQL(s.Table) + ";\n\n" + Script(ms, s.Table), nil
}

// SQLiteSQL renders the set, with its table of applied versions, as one
// plain SQLite script.
func (s Set) SQLiteSQL() (string, error) {
	ms, err := s.load()
	if err != nil {
		return "", err
	}
	return SQLiteTableSQL(s.Table) + ";\n\n" + Script(ms, s.Table), nil
}
