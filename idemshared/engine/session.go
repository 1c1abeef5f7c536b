package engine

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// DefaultMaxWait bounds a wait on a key another transaction holds when
// store.TxOptions.MaxWait is zero, and always for a Store's own
// operations.
const DefaultMaxWait = 5 * time.Second

// deadlockRetries is how many times a statement the database rolled back
// as a deadlock's victim is run again, where nothing else was lost with it.
const deadlockRetries = 5

// txOptions asks for READ COMMITTED whatever the database's default. Under
// REPEATABLE READ (InnoDB's default) a claim that waited for a holder
// would read its transaction's old snapshot after the holder committed,
// and InnoDB's gap locks would make concurrent claims deadlock; PostgreSQL
// would fail the waiter with a serialization error.
var txOptions = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// StoreKeys returns the key operations of the Store itself, each on its
// own: reads and fenced updates as single statements on the pool, claims
// in a READ COMMITTED transaction of their own with the wait bounded by
// DefaultMaxWait.
func StoreKeys(e *Engine) Keys { return Keys{e: e, s: storeSession{e}} }

type storeSession struct{ e *Engine }

func (ss storeSession) Read(ctx context.Context, fn func(q Executor, now time.Time) error) error {
	return ss.e.Translate(fn(ss.e.pool, ss.e.now()))
}

func (ss storeSession) Write(ctx context.Context, fn func(q Executor, now time.Time) error) error {
	return ss.e.Translate(fn(ss.e.pool, ss.e.now()))
}

func (ss storeSession) Claim(ctx context.Context, fn func(q Executor, now time.Time) error) error {
	e := ss.e
	for attempt := 0; ; attempt++ {
		err := e.own(ctx, fn)
		if err != nil && attempt < deadlockRetries && e.Classify(err) == ErrDeadlock {
			continue
		}
		return e.Translate(err)
	}
}

// own runs fn bounded in a transaction of its own.
func (e *Engine) own(ctx context.Context, fn func(q Executor, now time.Time) error) error {
	tx, err := e.db.BeginTx(ctx, txOptions)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := e.runBounded(ctx, tx, DefaultMaxWait, fn); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// runBounded runs fn on tx with the wait for locks bounded by wait, and
// gives the session its own setting back after.
func (e *Engine) runBounded(ctx context.Context, tx *sql.Tx, wait time.Duration, fn func(q Executor, now time.Time) error) error {
	if _, err := tx.ExecContext(ctx, e.dialect.LockWait(wait)); err != nil {
		return err
	}
	err := fn(SQL(tx), e.now())
	// After a failure PostgreSQL's transaction is aborted (and its setting
	// goes with it); MySQL's session setting must still be put back.
	if _, rerr := tx.ExecContext(ctx, e.dialect.RestoreLockWait); err == nil && rerr != nil {
		return rerr
	}
	return err
}
