package engine

import (
	"context"
	"database/sql"
)

// Executor is where the key SQL runs, whatever the driver: a pool, a
// connection or a transaction. database/sql's is SQL; pgx's is pgstore's.
type Executor interface {
	// Exec runs a statement and returns the number of rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs a read and calls each with each of its rows, in order.
	Query(ctx context.Context, query string, args []any, each func(r Row) error) error
	// QueryRow runs a read of one row. Its Scan fails with an error that
	// is sql.ErrNoRows (errors.Is) when there is none: pgx's ErrNoRows is.
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// SQLQuerier is what database/sql runs statements on: *sql.DB, *sql.Conn
// and *sql.Tx.
type SQLQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// SQL is q as an Executor. Its value is q alone, so that it is an
// Executor without an allocation of its own.
func SQL[Q SQLQuerier](q Q) Executor { return sqlExec[Q]{q} }

type sqlExec[Q SQLQuerier] struct{ q Q }

func (x sqlExec[Q]) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := x.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (x sqlExec[Q]) Query(ctx context.Context, query string, args []any, each func(r Row) error) error {
	rows, err := x.q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return Each(rows, each)
}

// Rows are the rows of a read, of any driver: *sql.Rows, pgx.Rows.
type Rows interface {
	Row
	Next() bool
	Err() error
}

// Each calls each with each of rows, then returns their error; its
// caller closes them.
func Each(rows Rows, each func(r Row) error) error {
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (x sqlExec[Q]) QueryRow(ctx context.Context, query string, args ...any) Row {
	return x.q.QueryRowContext(ctx, query, args...)
}
