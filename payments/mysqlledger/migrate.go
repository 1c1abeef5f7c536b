package mysqlledger

import (
	"context"
	"database/sql"
	"embed"

	"github.com/idem-dev/idem/mysqlstore"
	"github.com/idem-dev/idem/sqlstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrationsTable records which of the wallet's migrations are applied.
const MigrationsTable = "payments_migrations"

var migrations = sqlstore.Set{Name: "mysqlledger", Table: MigrationsTable, FS: migrationFiles, Dir: "migrations",
	Dialect: mysqlstore.Dialect}

// Migrate creates or upgrades the wallet's tables in db's database. It is
// safe to run from several replicas at once (they take a named lock first)
// and a no-op when the schema is current. It returns the versions it
// applied.
func Migrate(ctx context.Context, db *sql.DB) ([]int, error) {
	return migrations.Apply(ctx, db)
}

// MigrationSQL returns the migrations as one plain SQL script, for teams
// that apply schema changes with their own tool.
func MigrationSQL() (string, error) { return migrations.SQL() }
