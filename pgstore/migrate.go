package pgstore

import (
	"context"
	"embed"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/pgstore/pgmigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrationsTable records which of the store's migrations are applied.
const MigrationsTable = "idem_migrations"

var migrations = pgmigrate.Set{Name: "pgstore", Table: MigrationsTable, FS: migrationFiles, Dir: "migrations"}

// Migrate creates or upgrades the key table in the pool's search_path
// schema. It is safe to run from several replicas at once, and a no-op
// when the schema is current. It returns the versions it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	return migrations.Apply(ctx, pool)
}

// MigrationSQL returns the store's migrations as one plain SQL script, for
// teams that apply schema changes with their own tool.
func MigrationSQL() (string, error) { return migrations.SQL() }
