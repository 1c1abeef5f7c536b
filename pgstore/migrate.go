package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
	"github.com/idem-dev/idem/pgstore/pgmigrate"
)

// MigrationsTable records which of the store's migrations are applied.
const MigrationsTable = "idem_migrations"

var migrations = pgmigrate.Set{Name: "pgstore", Table: MigrationsTable, FS: pgsql.Migrations, Dir: "migrations"}

// Migrate creates or upgrades the key table in the pool's search_path
// schema. It is safe to run from several replicas at once, and a no-op
// when the schema is current. It returns the versions it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	return migrations.Apply(ctx, pool)
}

// MigrationSQL returns the store's migrations as one plain SQL script, for
// teams that apply schema changes with their own tool.
func MigrationSQL() (string, error) { return migrations.SQL() }

// tableMigrations is migrations for the key table name: the files
// rewritten for it, recorded in its own migrations table (see
// keytable.Migrations).
func tableMigrations(name string) (pgmigrate.Set, error) {
	table, err := keytable.Check(name)
	if err != nil {
		return pgmigrate.Set{}, fmt.Errorf("pgstore: %w", err)
	}
	set := migrations
	set.Table = keytable.Migrations(table)
	set.Rewrite = func(sql string) string { return keytable.Rewrite(sql, table) }
	return set, nil
}

// MigrateTable is Migrate for a key table of another name (Config.Table),
// whose applied versions are recorded in table_migrations.
func MigrateTable(ctx context.Context, pool *pgxpool.Pool, table string) ([]int, error) {
	set, err := tableMigrations(table)
	if err != nil {
		return nil, err
	}
	return set.Apply(ctx, pool)
}

// MigrationSQLTable is MigrationSQL for a key table of another name.
func MigrationSQLTable(table string) (string, error) {
	set, err := tableMigrations(table)
	if err != nil {
		return "", err
	}
	return set.SQL()
}
