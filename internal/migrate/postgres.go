package migrate

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresTableSQL creates the table that records applied migrations.
func PostgresTableSQL(table string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`, pgx.Identifier{table}.Sanitize())
}

// ApplyPostgres applies the migrations not yet recorded in table, each in
// one transaction under an advisory lock, so replicas starting together
// apply each migration once. It returns the versions it applied.
func ApplyPostgres(ctx context.Context, pool *pgxpool.Pool, table string, ms []Migration) ([]int, error) {
	var applied []int
	for _, m := range ms {
		done, err := applyPostgres(ctx, pool, table, m)
		if err != nil {
			return applied, fmt.Errorf("migration %03d_%s: %w", m.Version, m.Name, err)
		}
		if done {
			applied = append(applied, m.Version)
		}
	}
	return applied, nil
}

func applyPostgres(ctx context.Context, pool *pgxpool.Pool, table string, m Migration) (bool, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, table); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, PostgresTableSQL(table)); err != nil {
		return false, err
	}
	var exists bool
	q := fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s WHERE version = $1)`, pgx.Identifier{table}.Sanitize())
	if err := tx.QueryRow(ctx, q, m.Version).Scan(&exists); err != nil {
		return false, err
	}
	if exists {
		return false, nil
	}
	if _, err := tx.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
		return false, err
	}
	ins := fmt.Sprintf(`INSERT INTO %s (version, name) VALUES ($1, $2)`, pgx.Identifier{table}.Sanitize())
	if _, err := tx.Exec(ctx, ins, m.Version, m.Name); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}
