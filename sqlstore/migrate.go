package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
	"github.com/idem-dev/idem/idemshared/migrate"
)

// mysqlMigrations holds the MySQL dialect's migrations; the PostgreSQL
// dialect's are idemshared/keytable/pgsql's, shared with pgstore.
//
//go:embed migrations/mysql/*.sql
var mysqlMigrations embed.FS

var postgresMigrate = engine.MigrateSQL{
	// The schema's and table's, the key pgstore's migrations take in
	// their transactions: the two stores sharing a schema exclude each
	// other, and schemas migrating at once do not queue behind each other.
	Lock:     `SELECT 1 FROM (SELECT pg_advisory_lock(hashtext(current_schema()), hashtext($1))) AS locked`,
	Unlock:   `SELECT pg_advisory_unlock(hashtext(current_schema()), hashtext($1))`,
	TableSQL: pgsql.MigrationsTable,
}

var mysqlMigrate = engine.MigrateSQL{
	// 0 after 60 s without the lock, NULL on an error.
	Lock:   `SELECT GET_LOCK(CONCAT('idem.migrate.', ?), 60)`,
	Unlock: `DO RELEASE_LOCK(CONCAT('idem.migrate.', ?))`,
	TableSQL: `CREATE TABLE IF NOT EXISTS %s (
    version    INT          PRIMARY KEY,
    name       VARCHAR(255) NOT NULL,
    applied_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE = InnoDB`,
}

// MigrationsTable is the table that records which migrations of the key
// table are applied: idem_migrations for DefaultTable (pgstore's too, so
// both stores can share one schema), else the table's name with
// _migrations.
func MigrationsTable(table string) string { return keytable.Migrations(table) }

// migrations loads opts' dialect's migrations, written for opts' table.
func migrations(opts Config) (engine.Dialect, []migrate.Migration, error) {
	d := opts.Dialect.engine()
	ms, err := migrate.Set{Name: "sqlstore", FS: d.MigrationFS, Dir: d.MigrationDir, KeyTable: opts.Table}.Migrations()
	return d, ms, err
}

// Migrate creates or upgrades the key table opts name, with opts' dialect.
// Processes starting together apply each migration once: they take a lock
// on the database first. It returns the versions it applied. In MySQL a
// migration's DDL commits on its own: each is one statement that creates
// only what is missing, or says how to tell that it ran (a "-- made when:"
// line).
func Migrate(ctx context.Context, db *sql.DB, opts Config) ([]int, error) {
	d, ms, err := migrations(opts)
	if err != nil {
		return nil, err
	}
	return d.Apply(ctx, db, "sqlstore", MigrationsTable(opts.Table), ms)
}

// MigrationSQL returns the migrations of the key table opts name as one
// plain SQL script, for teams that apply schema changes with their own
// tool.
func MigrationSQL(opts Config) (string, error) {
	d, ms, err := migrations(opts)
	if err != nil {
		return "", err
	}
	return d.Script(MigrationsTable(opts.Table), ms), nil
}

// Set is an application's own numbered, embedded migrations, NNN_name.sql
// files, applied as the key table's are: under a lock on the database,
// each in a transaction of its own, recorded in Table. A repository whose
// tables live beside the key table migrates them with it.
type Set struct {
	Name    string  // the owning package, prefixed to errors
	Table   string  // where the applied versions are recorded: an identifier
	FS      fs.FS   // the embedded files
	Dir     string  // the folder of FS holding them
	Dialect Dialect // the database's SQL. Default (zero): Postgres()
}

func (s Set) migrations() (engine.Dialect, []migrate.Migration, error) {
	if s.Table == "" {
		return engine.Dialect{}, nil, fmt.Errorf("%s: migrations: no table to record them in", s.Name)
	}
	if _, err := keytable.Check(s.Table); err != nil {
		return engine.Dialect{}, nil, fmt.Errorf("%s: migrations: %w", s.Name, err)
	}
	ms, err := migrate.Set{Name: s.Name, FS: s.FS, Dir: s.Dir}.Migrations()
	return s.Dialect.engine(), ms, err
}

// Apply applies the set's pending migrations to db and returns the
// versions it applied.
func (s Set) Apply(ctx context.Context, db *sql.DB) ([]int, error) {
	d, ms, err := s.migrations()
	if err != nil {
		return nil, err
	}
	return d.Apply(ctx, db, s.Name, s.Table, ms)
}

// SQL renders the set, with its table of applied versions, as one plain
// script.
func (s Set) SQL() (string, error) {
	d, ms, err := s.migrations()
	if err != nil {
		return "", err
	}
	return d.Script(s.Table, ms), nil
}
