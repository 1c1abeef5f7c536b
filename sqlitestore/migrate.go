package sqlitestore

import (
	"context"
	"database/sql"
	"embed"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/sqlitestore/sqlitemigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrationsTable records which of the store's migrations are applied.
const MigrationsTable = "idem_migrations"

var migrations = sqlitemigrate.Set{Name: "sqlitestore", Table: MigrationsTable, FS: migrationFiles, Dir: "migrations"}

// Migrate creates or upgrades the key table in db's main database. It is
// safe to run from several processes on one file at once (each migration
// runs in a BEGIN IMMEDIATE transaction, so the second waits and then finds
// it applied), and a no-op when the schema is current. It returns the
// versions it applied.
func Migrate(ctx context.Context, db *sql.DB) ([]int, error) {
	return migrations.Apply(ctx, db)
}

// MigrationSQL returns the store's migrations as one plain SQL script, for
// teams that apply schema changes with their own tool.
func MigrationSQL() (string, error) { return migrations.SQL() }

// tableMigrations is migrations for the key table name: the files
// rewritten for it, recorded in its own migrations table (name_migrations);
// see migrate.Set.KeyTable.
func tableMigrations(name string) sqlitemigrate.Set {
	set := migrations
	set.KeyTable, set.Table = name, keytable.Migrations(name)
	return set
}

// MigrateTable is Migrate for a key table of another name (Config.Table).
func MigrateTable(ctx context.Context, db *sql.DB, table string) ([]int, error) {
	return tableMigrations(table).Apply(ctx, db)
}

// MigrationSQLTable is MigrationSQL for a key table of another name.
func MigrationSQLTable(table string) (string, error) { return tableMigrations(table).SQL() }
