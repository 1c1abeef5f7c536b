package sqliteledger

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

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

// Migrate creates or upgrades the wallet's tables in db's main database. It
// is safe to run from several processes on one file at once and a no-op
// when the schema is current. It returns the versions it applied.
func Migrate(ctx context.Context, db *sql.DB) ([]int, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	applied, err := migrate.ApplySQLite(ctx, db, MigrationsTable, ms)
	if err != nil {
		return applied, fmt.Errorf("sqliteledger: migrate: %w", err)
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
	return migrate.SQLiteTableSQL(MigrationsTable) + ";\n\n" + migrate.Script(ms, MigrationsTable), nil
}
