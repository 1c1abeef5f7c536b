package pgledger

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrationsTable records which of the wallet's migrations are applied.
const MigrationsTable = "payments_migrations"

func migrations() ([]migrate.Migration, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	return migrate.Load(sub)
}

// Migrate creates or upgrades the wallet's tables in the pool's search_path
// schema. It is safe to run from several replicas at once and a no-op when
// the schema is current. It returns the versions it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	applied, err := migrate.ApplyPostgres(ctx, pool, MigrationsTable, ms)
	if err != nil {
		return applied, fmt.Errorf("pgledger: migrate: %w", err)
	}
	return applied, nil
}

// MigrationSQL returns the migrations as one plain SQL script, for teams
// that apply schema changes with their own tool.
func MigrationSQL() (string, error) {
	ms, err := migrations()
	if err != nil {
		return "", err
	}
	return migrate.PostgresTableSQL(MigrationsTable) + ";\n\n" + migrate.Script(ms, MigrationsTable), nil
}
