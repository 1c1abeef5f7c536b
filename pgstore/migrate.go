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

// MigrateConfig configures MigrateWithConfig. Its zero value is
// Migrate's.
type MigrateConfig struct {
	// Table is the key table's name (Config.Table). Default
	// "idempotency_keys".
	Table string

	// Partitions, when positive, makes migration 005 hash-partition the key
	// table by scope into that many partitions (at most
	// pgmigrate.MaxPartitions); the sweeper then sweeps them in parallel.
	// It is read when 005 runs: a schema already past it keeps its layout.
	// Default 0: one table.
	Partitions int
}

// migrationSet is migrations for opts: the files rewritten for its table
// and partitions, recorded in the table's own migrations table (see
// migrate.Set.KeyTable).
func migrationSet(opts MigrateConfig) (pgmigrate.Set, error) {
	set := migrations
	set.KeyTable, set.Table = opts.Table, keytable.Migrations(opts.Table)
	var err error
	if set.Rewrite, err = pgmigrate.Partitions(opts.Partitions, nil); err != nil {
		return pgmigrate.Set{}, fmt.Errorf("pgstore: %w", err)
	}
	return set, nil
}

// MigrateWithConfig is Migrate configured by opts.
func MigrateWithConfig(ctx context.Context, pool *pgxpool.Pool, opts MigrateConfig) ([]int, error) {
	set, err := migrationSet(opts)
	if err != nil {
		return nil, err
	}
	return set.Apply(ctx, pool)
}

// MigrationSQLWithConfig is MigrationSQL configured by opts.
func MigrationSQLWithConfig(opts MigrateConfig) (string, error) {
	set, err := migrationSet(opts)
	if err != nil {
		return "", err
	}
	return set.SQL()
}

// MigrateTable is Migrate for a key table of another name (Config.Table),
// whose applied versions are recorded in table_migrations.
func MigrateTable(ctx context.Context, pool *pgxpool.Pool, table string) ([]int, error) {
	return MigrateWithConfig(ctx, pool, MigrateConfig{Table: table})
}

// MigrationSQLTable is MigrationSQL for a key table of another name.
func MigrationSQLTable(table string) (string, error) {
	return MigrationSQLWithConfig(MigrateConfig{Table: table})
}
