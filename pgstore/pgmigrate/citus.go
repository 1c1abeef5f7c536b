package pgmigrate

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNoCitus is Distribute's error on a database without the citus
// extension.
var ErrNoCitus = errors.New("the citus extension is not installed in this database: " +
	"CREATE EXTENSION citus on the coordinator and on each worker, then citus_add_node for each worker on the coordinator")

// Distribution is how Distribute spreads one migrated table over a Citus
// cluster's workers.
type Distribution struct {
	// Table is the table's name in the search_path schema.
	Table string
	// Column is the distribution column, the user. Empty: a reference
	// table, a copy on every node, for a table read before the user is
	// known or across users.
	Column string
	// ColocateWith is a distributed table whose shards this table's are
	// placed with, row for row by the user: a transaction over one user's
	// rows of both commits on one node. Empty: Citus's default group for
	// the column's type.
	ColocateWith string
}

// Distribute distributes tables, in order, on a Citus coordinator, and
// returns the ones it distributed: a table Citus already distributes is
// left as it is, so running it again does nothing. A table that holds
// rows is copied to its shards under a lock that holds its writers until
// the copy ends. It sets citus.propagate_set_commands to 'local' for the
// database (new sessions), so that the stores' SET LOCAL wait limits
// reach the workers that hold the rows. Distributors of one schema take
// turns.
func Distribute(ctx context.Context, pool *pgxpool.Pool, tables []Distribution) ([]string, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	var citus bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil {
		return nil, err
	}
	if !citus {
		return nil, ErrNoCitus
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext(current_schema()), hashtext('citus distribute'))`); err != nil {
		return nil, err
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext(current_schema()), hashtext('citus distribute'))`)
	}()
	var done []string
	for _, d := range tables {
		ok, err := distribute(ctx, conn.Conn(), d)
		if err != nil {
			return done, fmt.Errorf("distribute %s: %w", d.Table, err)
		}
		if ok {
			done = append(done, d.Table)
		}
	}
	if err := propagateSetLocal(ctx, conn.Conn()); err != nil {
		return done, fmt.Errorf("set citus.propagate_set_commands: %w", err)
	}
	return done, nil
}

// distribute distributes one table unless Citus already does, and reports
// whether it did.
func distribute(ctx context.Context, conn *pgx.Conn, d Distribution) (bool, error) {
	var already bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1::text::regclass)`, d.Table).Scan(&already)
	if err != nil || already {
		return false, err
	}
	if d.Column == "" {
		_, err = conn.Exec(ctx, `SELECT create_reference_table($1::text::regclass)`, d.Table)
		return err == nil, err
	}
	colocate := d.ColocateWith
	if colocate == "" {
		colocate = "default"
	}
	_, err = conn.Exec(ctx, `SELECT create_distributed_table($1::text::regclass, $2, colocate_with => $3)`, d.Table, d.Column, colocate)
	return err == nil, err
}

// propagateSetLocal sets citus.propagate_set_commands to 'local' for the
// current database unless the server or the database already does, one
// setter at a time (concurrent ALTER DATABASE … SET of one setting fail).
func propagateSetLocal(ctx context.Context, conn *pgx.Conn) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('citus.propagate_set_commands'))`); err != nil {
		return err
	}
	var set bool
	var db string
	err = tx.QueryRow(ctx, `
SELECT current_setting('citus.propagate_set_commands') = 'local'
       OR EXISTS (SELECT 1 FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
                   WHERE d.datname = current_database() AND s.setrole = 0
                     AND 'citus.propagate_set_commands=local' = ANY (s.setconfig)),
       current_database()`).Scan(&set, &db)
	if err != nil || set {
		return err
	}
	if _, err := tx.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" SET citus.propagate_set_commands = 'local'"); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
