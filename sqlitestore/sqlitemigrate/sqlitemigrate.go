// Package sqlitemigrate applies numbered, embedded SQL migrations to SQLite, each in
// one transaction, so that replicas starting together apply each once. It is
// what the store's Migrate runs; an application may run its own tables'
// migrations with it too.
package sqlitemigrate

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemshared/migrate"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// tableSQL creates the table that records applied migrations.
func tableSQL(table string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at TEXT    NOT NULL DEFAULT (strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now'))
) STRICT`, quoteSQLite(table))
}

func applyOne(ctx context.Context, db *sql.DB, table string, m migrate.Migration) (bool, error) {
	// One connection for the whole transaction: BEGIN, the migration and
	// COMMIT must not be spread over the pool.
	c, err := db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close()
	if err := beginImmediateSQLite(ctx, c); err != nil {
		return false, err
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		// ROLLBACK must run even when ctx is done: a connection that goes
		// back to the pool inside a transaction keeps the write lock.
		if _, err := c.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			_ = c.Raw(func(any) error { return driver.ErrBadConn }) // discard it instead
		}
	}()
	if _, err := c.ExecContext(ctx, tableSQL(table)); err != nil {
		return false, err
	}
	var exists bool
	q := fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s WHERE version = ?)`, quoteSQLite(table))
	if err := c.QueryRowContext(ctx, q, m.Version).Scan(&exists); err != nil {
		return false, err
	}
	if exists {
		return false, nil
	}
	if _, err := c.ExecContext(ctx, m.SQL); err != nil {
		return false, err
	}
	ins := fmt.Sprintf(`INSERT INTO %s (version, name) VALUES (?, ?)`, quoteSQLite(table))
	if _, err := c.ExecContext(ctx, ins, m.Version, m.Name); err != nil {
		return false, err
	}
	if _, err := c.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
		return false, err
	}
	committed = true
	return true, nil
}

// beginImmediateSQLite starts a transaction that holds the write lock,
// waiting for another writer under the connection's busy_timeout, and again
// after it (a zero or short busy_timeout) until ctx is done: like
// apply's advisory lock, a migration waits for the one running.
func beginImmediateSQLite(ctx context.Context, c *sql.Conn) error {
	for {
		_, err := c.ExecContext(ctx, "BEGIN IMMEDIATE")
		if err == nil || !sqliteBusy(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func sqliteBusy(err error) bool {
	e, ok := errors.AsType[*sqlite.Error](err)
	return ok && (e.Code()&0xff == sqlite3.SQLITE_BUSY || e.Code()&0xff == sqlite3.SQLITE_LOCKED)
}

func quoteSQLite(ident string) string {
	return `"` + strings.ReplaceAll(ident, `"`, `""`) + `"`
}

// Set is one package's embedded migrations: Name (the owning package,
// prefixed to errors), Table (where the applied versions are recorded),
// FS and Dir (the embedded NNN_name.sql files and their folder) and
// Rewrite (when set, rewrites each migration's SQL before it runs or
// prints), as migrate.Set.
type Set migrate.Set

// Apply applies the set's pending migrations and returns the versions it
// applied: each in one BEGIN IMMEDIATE transaction, which holds the
// database's write lock from its first statement, so processes starting
// together on one file apply each migration once (the second waits, then
// finds it recorded).
func (s Set) Apply(ctx context.Context, db *sql.DB) ([]int, error) {
	return migrate.Set(s).Apply(func(m migrate.Migration) (bool, error) { return applyOne(ctx, db, s.Table, m) })
}

// SQL renders the set, with its table of applied versions, as one plain
// script.
func (s Set) SQL() (string, error) { return migrate.Set(s).SQL(tableSQL(s.Table)) }
