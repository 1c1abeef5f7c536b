package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// autocommit runs the store's own writes (outside a request's transaction)
// each in a READ COMMITTED transaction of its own, whatever the database's
// default isolation: under REPEATABLE READ a claim that loses a race, or a
// renewal racing a completion, would fail with a serialization error
// instead of seeing the winner. BEGIN, the statements and COMMIT are
// pipelined: still one round trip.
type autocommit struct{ pool *pgxpool.Pool }

func (a autocommit) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return execAlone(ctx, a, sql, args)
}

// Query and QueryRow read, which needs no transaction.
func (a autocommit) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return a.pool.Query(ctx, sql, args...)
}

func (a autocommit) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return a.pool.QueryRow(ctx, sql, args...)
}

// CopyFrom and Begin, which the engine does not use, go to the pool.
func (a autocommit) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return a.pool.CopyFrom(ctx, table, columns, src)
}

func (a autocommit) Begin(ctx context.Context) (pgx.Tx, error) { return a.pool.Begin(ctx) }

// lockWait: a claim outside a request waits at most DefaultMaxWait, in a
// transaction of its own that ends the setting.
func (a autocommit) lockWait() (time.Duration, bool) { return DefaultMaxWait, false }

// SendBatch wraps b in BEGIN … COMMIT. Reading the results reads b's; Close
// reads COMMIT's. When a statement fails, the connection is left in a
// failed transaction, and the pool discards it on release.
func (a autocommit) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	nb := &pgx.Batch{}
	nb.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	nb.Queue("COMMIT")
	br := a.pool.SendBatch(ctx, nb)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return errBatch{translate(err)}
	}
	return br
}
