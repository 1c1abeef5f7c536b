package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/idemshared/migrate"
)

// mysqlMigrations holds the MySQL dialect's migrations; the PostgreSQL
// dialect's are idemshared/keytable/pgsql's, shared with pgstore.
//
//go:embed migrations/mysql/*.sql
var mysqlMigrations embed.FS

// migrateSQL is how a dialect applies migrations.
type migrateSQL struct {
	// lock takes a session lock on the migrations table's name ($1 or ?)
	// and answers 1 when it holds it; unlock gives it back.
	lock, unlock string
	tableSQL     string // creates the migrations table, %s its name
}

var postgresMigrate = migrateSQL{
	// The schema's and table's, the key pgstore's migrations take in
	// their transactions: the two stores sharing a schema exclude each
	// other, and schemas migrating at once do not queue behind each other.
	lock:   `SELECT 1 FROM (SELECT pg_advisory_lock(hashtext(current_schema()), hashtext($1))) AS locked`,
	unlock: `SELECT pg_advisory_unlock(hashtext(current_schema()), hashtext($1))`,
	tableSQL: `CREATE TABLE IF NOT EXISTS %s (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`,
}

var mysqlMigrate = migrateSQL{
	// 0 after 60 s without the lock, NULL on an error.
	lock:   `SELECT GET_LOCK(CONCAT('idem.migrate.', ?), 60)`,
	unlock: `DO RELEASE_LOCK(CONCAT('idem.migrate.', ?))`,
	tableSQL: `CREATE TABLE IF NOT EXISTS %s (
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
func migrations(opts Config) (Dialect, string, []migrate.Migration, error) {
	d := opts.Dialect.orDefault()
	table, err := keytable.Check(opts.Table)
	if err != nil {
		return d, "", nil, fmt.Errorf("sqlstore: %w", err)
	}
	ms, err := migrate.Set{Name: "sqlstore", FS: d.migrationFS, Dir: d.migrationDir,
		Rewrite: func(sql string) string { return keytable.Rewrite(sql, table) }}.Migrations()
	if err != nil {
		return d, "", nil, err
	}
	return d, table, ms, nil
}

// Migrate creates or upgrades the key table opts name, with opts' dialect.
// Processes starting together apply each migration once: they take a lock
// on the database first. It returns the versions it applied. In MySQL a
// migration's DDL commits on its own: each is one statement that creates
// only what is missing, or says how to tell that it ran (madeWhen).
func Migrate(ctx context.Context, db *sql.DB, opts Config) ([]int, error) {
	d, table, ms, err := migrations(opts)
	if err != nil {
		return nil, err
	}
	return apply(ctx, db, d, "sqlstore", MigrationsTable(table), ms)
}

// apply applies the migrations ms not yet recorded in the table mt, under
// a lock on mt's name; name prefixes its errors.
func apply(ctx context.Context, db *sql.DB, d Dialect, name, mt string, ms []migrate.Migration) ([]int, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: migrate: %w", name, err)
	}
	defer c.Close()
	// Migrating without the lock would race another process's ALTERs.
	var held sql.NullInt64
	if err := c.QueryRowContext(ctx, d.migrate.lock, mt).Scan(&held); err != nil {
		return nil, fmt.Errorf("%s: migrate: lock: %w", name, err)
	}
	if held.Int64 != 1 {
		return nil, fmt.Errorf("%s: migrate: another process held the migration lock on %s for too long; try again", name, mt)
	}
	defer func() { _, _ = c.ExecContext(context.WithoutCancel(ctx), d.migrate.unlock, mt) }()
	if _, err := c.ExecContext(ctx, fmt.Sprintf(d.migrate.tableSQL, mt)); err != nil {
		return nil, fmt.Errorf("%s: migrate: %w", name, err)
	}
	var applied []int
	for _, m := range ms {
		done, err := applyOne(ctx, c, d, mt, m)
		if err != nil {
			return applied, fmt.Errorf("%s: migration %03d_%s: %w", name, m.Version, m.Name, err)
		}
		if done {
			applied = append(applied, m.Version)
		}
	}
	return applied, nil
}

func applyOne(ctx context.Context, c *sql.Conn, d Dialect, mt string, m migrate.Migration) (bool, error) {
	var n int
	q := fmt.Sprintf(`SELECT COUNT(*) FROM %s WHERE version = %s`, mt, d.placeholder(1))
	if err := c.QueryRowContext(ctx, q, m.Version).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	made, err := alreadyMade(ctx, c, m.SQL)
	if err != nil {
		return false, err
	}
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	// One statement at a time: not every driver runs several in one call.
	for _, s := range splitStatements(m.SQL) {
		if made || strings.TrimSpace(stripComments(s)) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return false, err
		}
	}
	ins := fmt.Sprintf(`INSERT INTO %s (version, name) VALUES (%s, %s)`, mt, d.placeholder(1), d.placeholder(2))
	if _, err := tx.ExecContext(ctx, ins, m.Version, m.Name); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// madeWhen begins a migration's line whose query answers more than 0 when
// the migration's change is already made. MySQL commits each DDL statement
// on its own: a process that dies between a migration's ALTER and the
// record of its version leaves the change made and the version missing,
// and the ALTER would fail when run again (an unknown column, a duplicate
// index). Such a migration is one statement, and says how to tell.
const madeWhen = "-- made when: "

// alreadyMade runs the madeWhen query of the migration sql, if it has one,
// and reports whether its change is already made.
func alreadyMade(ctx context.Context, c *sql.Conn, sql string) (bool, error) {
	for l := range strings.Lines(sql) {
		q, ok := strings.CutPrefix(strings.TrimSpace(l), madeWhen)
		if !ok {
			continue
		}
		var n int
		if err := c.QueryRowContext(ctx, q).Scan(&n); err != nil {
			return false, fmt.Errorf("made when: %w", err)
		}
		return n > 0, nil
	}
	return false, nil
}

// splitStatements splits a migration at the ";" that end its lines, but
// not inside a $$-quoted body (a DO block's statements end lines too).
func splitStatements(sql string) []string {
	var out []string
	var stmt strings.Builder
	for _, part := range strings.SplitAfter(sql, ";\n") {
		stmt.WriteString(part)
		if strings.Count(stmt.String(), "$$")%2 == 0 {
			out = append(out, strings.TrimSuffix(stmt.String(), ";\n"))
			stmt.Reset()
		}
	}
	if stmt.Len() > 0 {
		out = append(out, stmt.String())
	}
	return out
}

// stripComments drops the -- comment lines of s.
func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// MigrationSQL returns the migrations of the key table opts name as one
// plain SQL script, for teams that apply schema changes with their own
// tool.
func MigrationSQL(opts Config) (string, error) {
	d, table, ms, err := migrations(opts)
	if err != nil {
		return "", err
	}
	return script(d, MigrationsTable(table), ms), nil
}

func script(d Dialect, mt string, ms []migrate.Migration) string {
	return fmt.Sprintf(d.migrate.tableSQL, mt) + ";\n\n" + migrate.Script(ms, mt)
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

func (s Set) migrations() (Dialect, []migrate.Migration, error) {
	if s.Table == "" {
		return Dialect{}, nil, fmt.Errorf("%s: migrations: no table to record them in", s.Name)
	}
	if _, err := keytable.Check(s.Table); err != nil {
		return Dialect{}, nil, fmt.Errorf("%s: migrations: %w", s.Name, err)
	}
	ms, err := migrate.Set{Name: s.Name, FS: s.FS, Dir: s.Dir}.Migrations()
	return s.Dialect.orDefault(), ms, err
}

// Apply applies the set's pending migrations to db and returns the
// versions it applied.
func (s Set) Apply(ctx context.Context, db *sql.DB) ([]int, error) {
	d, ms, err := s.migrations()
	if err != nil {
		return nil, err
	}
	return apply(ctx, db, d, s.Name, s.Table, ms)
}

// SQL renders the set, with its table of applied versions, as one plain
// script.
func (s Set) SQL() (string, error) {
	d, ms, err := s.migrations()
	if err != nil {
		return "", err
	}
	return script(d, s.Table, ms), nil
}
