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

// MigrateConfig configures MigrateWithConfig. Its zero value is
// Migrate's.
type MigrateConfig struct {
	// Partitions, when positive, makes migration 005 hash-partition every
	// table of an empty wallet by user (all but api_keys) into that many
	// partitions (at most pgmigrate.MaxPartitions). It is read when 005
	// runs: a schema already past it keeps its layout. Default 0: one
	// table each.
	Partitions int
}

// MigrateWithConfig is Migrate configured by opts.
func MigrateWithConfig(ctx context.Context, pool *pgxpool.Pool, opts MigrateConfig) ([]int, error) {
	set := migrations
	rewrite, err := pgmigrate.Partitions(opts.Partitions, nil)
	if err != nil {
		return nil, fmt.Errorf("pgledger: %w", err)
	}
	set.Rewrite = rewrite
	return set.Apply(ctx, pool)
}

// Distribute distributes the migrated wallet on a Citus coordinator
// (docs/operations.md, "Running on Citus"): users by id and every other
// table by user_id, co-located with users, so that a request's
// transaction commits on the one node holding its user; api_keys, read by
// key hash before the user is known, a reference table. It returns the
// tables it distributed; those Citus already distributes are left alone.
// paymentsd then distributes its key table co-located with users
// (pgstore.DistributeConfig.ColocateWith). It fails with
// pgmigrate.ErrNoCitus on a database without the citus extension.
func Distribute(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	tables := []pgmigrate.Distribution{{Table: "users", Column: "id"}}
	for _, t := range []string{"balances", "deposits", "transactions", "payouts", "ledger_entries"} {
		tables = append(tables, pgmigrate.Distribution{Table: t, Column: "user_id", ColocateWith: "users"})
	}
	return pgmigrate.Distribute(ctx, pool, append(tables, pgmigrate.Distribution{Table: "api_keys"}))
}
