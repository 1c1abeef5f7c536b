package sqliteledger

import (
	"context"
	"database/sql"
	"embed"

	"github.com/idem-dev/idem/sqlitestore/sqlitemigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrationsTable records which of the wallet's migrations are applied.
const MigrationsTable = "payments_migrations"

var migrations = sqlitemigrate.Set{Name: "sqliteledger", Table: MigrationsTable, FS: migrationFiles, Dir: "migrations"}

// Migrate creates or upgrades the wallet's tables in db's main database. It
// is safe to run from several processes on one file at once and a no-op
// when the schema is current. It returns the versions it applied.
func Migrate(ctx context.Context, db *sql.DB) ([]int, error) {
	return migrations.Apply(ctx, db)
}

// MigrationSQL returns the migrations as one plain SQL script, for teams
// that apply schema changes with their own tool.
func MigrationSQL() (string, error) { return migrations.SQL() }
