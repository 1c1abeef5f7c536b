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

// Begin begins a claim's transaction, its wait bounded; a read or a write
// runs on the pool.
func (ss storeSession) Begin(ctx context.Context, op Op) (Executor, time.Time, error) {
	e := ss.e
	if op != OpClaim {
		return e.pool, e.now(), nil
	}
	tx, err := e.db.BeginTx(ctx, txOptions)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("begin: %w", e.Translate(err))
	}
	if err := e.bound(ctx, tx, DefaultMaxWait); err != nil {
		_ = tx.Rollback()
		return nil, time.Time{}, e.Translate(err)
	}
	return SQL(tx), e.now(), nil
}

// End commits a claim's transaction, or rolls it back after an error; a
// deadlock's victim may run again.
func (ss storeSession) End(ctx context.Context, op Op, q Executor, err error) (bool, error) {
	e := ss.e
	if op == OpClaim {
		tx := q.(sqlExec[*sql.Tx]).q
		if err = e.unbound(ctx, tx, err); err != nil {
			_ = tx.Rollback()
		} else {
			err = tx.Commit()
		}
	}
	return op == OpClaim && err != nil && e.Classify(err) == ErrDeadlock, e.Translate(err)
}

// bound bounds the waits for locks of the statements that follow on tx.
func (e *Engine) bound(ctx context.Context, tx *sql.Tx, wait time.Duration) error {
	_, err := tx.ExecContext(ctx, e.dialect.LockWait(wait))
	return err
}

// unbound gives the session its own setting back after statements that
// ended with err, and returns err, or the failure of the setting.
func (e *Engine) unbound(ctx context.Context, tx *sql.Tx, err error) error {
	// After a failure PostgreSQL's transaction is aborted (and its setting
	// goes with it); MySQL's session setting must still be put back.
	if _, rerr := tx.ExecContext(ctx, e.dialect.RestoreLockWait); err == nil && rerr != nil {
		return rerr
	}
	return err
}
