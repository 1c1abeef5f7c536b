// Package pgmigrate applies numbered, embedded SQL migrations to PostgreSQL, each in
// one transaction, so that replicas starting together apply each once. It is
// what the store's Migrate runs; an application may run its own tables'
// migrations with it too.
package pgmigrate

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
	"github.com/idem-dev/idem/idemshared/migrate"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// tableSQL creates the table that records applied migrations.
func tableSQL(table string) string {
	return fmt.Sprintf(pgsql.MigrationsTable, pgx.Identifier{table}.Sanitize())
}

func applyOne(ctx context.Context, pool *pgxpool.Pool, table string, m migrate.Migration) (bool, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// The lock is the schema's: tenants (or tests) migrating their own
	// schemas at once do not queue behind each other.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext(current_schema()), hashtext($1))`, table); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, tableSQL(table)); err != nil {
		return false, err
	}
	var exists bool
	q := fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s WHERE version = $1)`, pgx.Identifier{table}.Sanitize())
	if err := tx.QueryRow(ctx, q, m.Version).Scan(&exists); err != nil {
		return false, err
	}
	if exists {
		return false, nil
	}
	if _, err := tx.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
		return false, err
	}
	ins := fmt.Sprintf(`INSERT INTO %s (version, name) VALUES ($1, $2)`, pgx.Identifier{table}.Sanitize())
	if _, err := tx.Exec(ctx, ins, m.Version, m.Name); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// Set is one package's embedded migrations: Name (the owning package,
// prefixed to errors), Table (where the applied versions are recorded),
// FS and Dir (the embedded NNN_name.sql files and their folder) and
// Rewrite (when set, rewrites each migration's SQL before it runs or
// prints), as migrate.Set.
type Set migrate.Set

// Apply applies the set's pending migrations and returns the versions it
// applied: each in one transaction under an advisory lock of the schema
// and table, so replicas starting together apply each migration once.
func (s Set) Apply(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	return migrate.Set(s).Apply(func(m migrate.Migration) (bool, error) { return applyOne(ctx, pool, s.Table, m) })
}

// SQL renders the set, with its table of applied versions, as one plain
// script.
func (s Set) SQL() (string, error) { return migrate.Set(s).SQL(tableSQL(s.Table)) }
