package pgstore

import (
	"context"
	"time"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// conn is what the engine's statements run on: the pool, each write a
// transaction of its own (autocommit), or the request's transaction
// (lazy).
type conn interface {
	DBTX
	// lockWait bounds a claim's wait on a row another transaction holds;
	// restore: the setting must be put back after the claim's statement
	// (inside a request's transaction, which the handler goes on with).
	lockWait() (wait time.Duration, restore bool)
}

// execAlone runs a statement in a batch of its own on c, whose SendBatch
// puts what must go with it (BEGIN and COMMIT, the queued writes) in the
// same round trip.
func execAlone(ctx context.Context, c conn, sql string, args []any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := c.SendBatch(ctx, b)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// executor is a conn as the engine's Executor. Its value is the conn
// alone, a pointer: handing it to the engine allocates nothing, and rows
// go to the engine as pgx hands them.
type executor[C conn] struct{ c C }

func (x executor[C]) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := x.c.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (x executor[C]) Query(ctx context.Context, sql string, args []any, each func(r engine.Row) error) error {
	rows, err := x.c.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return engine.Each(rows, each)
}

func (x executor[C]) QueryRow(ctx context.Context, sql string, args ...any) engine.Row {
	return x.c.QueryRow(ctx, sql, args...)
}

// bounded is the executor of a claim: its Exec, a statement that may wait
// on a row another transaction holds, runs with lock_timeout set to the
// conn's lockWait for that statement alone. The three statements go in
// one batch (one round trip), and the handler's own statements get the
// session's setting back. Outside a request's transaction the statement's
// own transaction ends the setting: nothing to restore. What follows the
// claim (the read of a key another request recorded) runs as usual.
type bounded[C conn] struct{ executor[C] }

func (b bounded[C]) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	wait, restore := b.c.lockWait()
	batch := &pgx.Batch{}
	batch.Queue(pgsql.LockWait(wait))
	batch.Queue(sql, args...)
	if restore {
		batch.Queue(pgsql.RestoreLockWait)
	}
	br := b.c.SendBatch(ctx, batch)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return 0, err
	}
	tag, err := br.Exec()
	if err != nil {
		return 0, err
	}
	if restore {
		if _, err := br.Exec(); err != nil {
			return 0, err
		}
	}
	return tag.RowsAffected(), br.Close()
}

// session runs the engine's key operations on a conn (engine.Session):
// the Store's on autocommit, a Tx's on lazy. Every time is the
// database's: now is the zero time. A claim's statement runs bounded.
type session[C conn] struct{ c C }

func (s session[C]) Begin(_ context.Context, op engine.Op) (engine.Executor, time.Time, error) {
	if op == engine.OpClaim {
		return bounded[C]{executor[C]{s.c}}, time.Time{}, nil
	}
	return executor[C]{s.c}, time.Time{}, nil
}

func (s session[C]) End(_ context.Context, _ engine.Op, _ engine.Executor, err error) (bool, error) {
	return false, translate(err)
}
