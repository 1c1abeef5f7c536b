package engine

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/idemshared/migrate"
)

// MigrateSQL is how a dialect applies migrations.
type MigrateSQL struct {
	// Lock takes a session lock on the migrations table's name ($1 or ?)
	// and answers 1 when it holds it; Unlock gives it back.
	Lock, Unlock string
	TableSQL     string // creates the migrations table, %s its name
}

// Apply applies the migrations ms not yet recorded in the table mt, under
// a lock on mt's name; name prefixes its errors.
func (d Dialect) Apply(ctx context.Context, db *sql.DB, name, mt string, ms []migrate.Migration) ([]int, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: migrate: %w", name, err)
	}
	defer c.Close()
	// Migrating without the lock would race another process's ALTERs.
	var held sql.NullInt64
	if err := c.QueryRowContext(ctx, d.Migrate.Lock, mt).Scan(&held); err != nil {
		return nil, fmt.Errorf("%s: migrate: lock: %w", name, err)
	}
	if held.Int64 != 1 {
		return nil, fmt.Errorf("%s: migrate: another process held the migration lock on %s for too long; try again", name, mt)
	}
	defer func() { _, _ = c.ExecContext(context.WithoutCancel(ctx), d.Migrate.Unlock, mt) }()
	if _, err := c.ExecContext(ctx, fmt.Sprintf(d.Migrate.TableSQL, mt)); err != nil {
		return nil, fmt.Errorf("%s: migrate: %w", name, err)
	}
	applied, err := migrate.Each(ms, func(m migrate.Migration) (bool, error) { return d.applyOne(ctx, c, mt, m) })
	if err != nil {
		return applied, fmt.Errorf("%s: %w", name, err)
	}
	return applied, nil
}

func (d Dialect) applyOne(ctx context.Context, c *sql.Conn, mt string, m migrate.Migration) (bool, error) {
	var n int
	q := fmt.Sprintf(`SELECT COUNT(*) FROM %s WHERE version = %s`, mt, d.Placeholder(1))
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
	ins := fmt.Sprintf(`INSERT INTO %s (version, name) VALUES (%s, %s)`, mt, d.Placeholder(1), d.Placeholder(2))
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

// Script renders ms, with the table mt of applied versions, as one plain
// SQL script.
func (d Dialect) Script(mt string, ms []migrate.Migration) string {
	return fmt.Sprintf(d.Migrate.TableSQL, mt) + ";\n\n" + migrate.Script(ms, mt)
}
