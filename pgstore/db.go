package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is what a repository needs of PostgreSQL. *pgxpool.Pool, *pgx.Conn
// and pgx.Tx all satisfy it, and so does what DB returns.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
	// Begin starts a transaction, or a savepoint inside the ambient one, so
	// the same repository code works with and without idempotency.
	Begin(ctx context.Context) (pgx.Tx, error)
}

type txKey struct{}

// DB returns the request's ambient transaction when ctx carries one (an
// idempotent request), else fallback (usually the pool). Repositories call
// it for every unit of work, so their writes commit together with the
// request's idempotency key:
//
//	_, err := pgstore.DB(ctx, r.pool).Exec(ctx, "INSERT INTO payments …")
func DB(ctx context.Context, fallback DBTX) DBTX {
	if l, ok := ctx.Value(txKey{}).(lazy); ok {
		return l
	}
	return fallback
}

// CopyFrom and Begin make lazy, the request's transaction as DB hands it
// to a handler, a DBTX: everything but Commit and Rollback, which belong
// to the middleware.
func (l lazy) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := l.t.flushed(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, columns, src)
}

// Begin starts a savepoint: a business error the handler rolls back to it
// leaves the request's transaction usable.
func (l lazy) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := l.t.flushed(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}
