package pgledger

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/pgstore/pgmigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrationsTable records which of the wallet's migrations are applied.
const MigrationsTable = "payments_migrations"

var migrations = pgmigrate.Set{Name: "pgledger", Table: MigrationsTable, FS: migrationFiles, Dir: "migrations"}

// Migrate creates or upgrades the wallet's tables in the pool's search_path
// schema. It is safe to run from several replicas at once and a no-op when
// the schema is current. It returns the versions it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	return migrations.Apply(ctx, pool)
}

// MigrationSQL returns the migrations as one plain SQL script, for teams
// that apply schema changes with their own tool.
func MigrationSQL() (string, error) { return migrations.SQL() }

// MigrateConfig configures MigrateWithOptions. Its zero value is
// Migrate's.
type MigrateConfig struct {
	// Partitions, when positive, makes migration 005 hash-partition every
	// table of an empty wallet by user (all but api_keys) into that many
	// partitions (at most pgmigrate.MaxPartitions). It is read when 005
	// runs: a schema already past it keeps its layout. Default 0: one
	// table each.
	Partitions int
}

// MigrateWithOptions is Migrate configured by opts.
func MigrateWithOptions(ctx context.Context, pool *pgxpool.Pool, opts MigrateConfig) ([]int, error) {
	set := migrations
	rewrite, err := pgmigrate.Partitions(opts.Partitions, nil)
	if err != nil {
		return nil, fmt.Errorf("pgledger: %w", err)
	}
	set.Rewrite = rewrite
	return set.Apply(ctx, pool)
}
