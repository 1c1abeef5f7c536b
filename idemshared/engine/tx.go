package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/store"
)

// Tx is a transaction of a database/sql store: a *sql.Tx at READ
// COMMITTED, begun on its first statement. The handler reaches it through
// DB.
type Tx struct {
	e    *Engine
	wait time.Duration
	tx   *sql.Tx // nil until the first statement
	// closed: committed, rolled back, or ended by a failed deferred claim.
	closed bool
	// wrote: a statement that may have written or locked ran in tx, so a
	// deadlock's rollback would lose more than the statement that failed.
	wrote bool
	// retriable: the claim running is the transaction's first write.
	retriable bool
	// failed: a statement of the handler failed; in PostgreSQL that
	// aborts the transaction.
	failed bool
	claim  DeferredClaim
	keys
}

// keys embeds Keys unexported.
type keys = Keys

var _ store.Tx = (*Tx)(nil)

// Begin returns a READ COMMITTED transaction that begins on its first
// statement, so a leased-mode handler that never touches the database
// holds no connection. A claim in it waits at most opts.MaxWait (zero:
// DefaultMaxWait) for a transaction holding its key.
func Begin(e *Engine, opts store.TxOptions) *Tx {
	wait := opts.MaxWait
	if wait <= 0 {
		wait = DefaultMaxWait
	}
	t := &Tx{e: e, wait: wait}
	t.keys = Keys{e: e, s: txSession{t}}
	return t
}

// errTxEnded: a statement came after the middleware ended the request's
// transaction (work the handler left running in the background, say).
var errTxEnded = errors.New("the request's transaction has ended")

// begin begins the transaction if it has not begun. The transaction
// outlives the context of the statement that begins it (database/sql
// rolls a transaction back when its context ends); the middleware ends it.
func (t *Tx) begin(ctx context.Context) (*sql.Tx, error) {
	if t.closed {
		return nil, fmt.Errorf("%s: %w", t.e.name, errTxEnded)
	}
	if t.tx != nil {
		return t.tx, nil
	}
	tx, err := t.e.db.BeginTx(context.WithoutCancel(ctx), txOptions)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	t.tx = tx
	return tx, nil
}

// txSession runs key operations inside the transaction.
type txSession struct{ t *Tx }

// Begin begins the transaction if it has not begun. A claim's wait is
// bounded by the transaction's MaxWait.
func (ts txSession) Begin(ctx context.Context, op Op) (Executor, time.Time, error) {
	t := ts.t
	tx, err := t.begin(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	if op != OpRead {
		t.retriable = op == OpClaim && !t.wrote
		t.wrote = true
	}
	if op == OpClaim {
		if err := t.e.bound(ctx, tx, t.wait); err != nil {
			return nil, time.Time{}, t.e.Translate(err)
		}
	}
	return SQL(tx), t.e.now(), nil
}

// End ends a claim's bound. When the database rolls the transaction back
// as a deadlock's victim at its first write (a claim, racing others for
// the same key), the claim may run again in a new one.
func (ts txSession) End(ctx context.Context, op Op, _ Executor, err error) (bool, error) {
	t := ts.t
	if op != OpClaim {
		return false, t.e.Translate(err)
	}
	err = t.e.unbound(ctx, t.tx, err)
	if err != nil && t.retriable && t.e.Classify(err) == ErrDeadlock {
		_ = t.tx.Rollback()
		t.tx, t.wrote = nil, false
		return true, t.e.Translate(err) // the error when the retries run out
	}
	return false, t.e.Translate(err)
}

// Complete stores the response in the transaction, or runs the deferred
// claim; when the transaction never began (the handler wrote nothing), in
// one statement of its own.
func (t *Tx) Complete(ctx context.Context, a store.Attempt, resp store.Response) error {
	if t.claim.Pending() {
		return t.claimAndComplete(ctx, resp)
	}
	if t.tx == nil && !t.closed {
		return StoreKeys(t.e).Complete(ctx, a, resp)
	}
	return t.keys.Complete(ctx, a, resp)
}

// Context returns a copy of ctx carrying the transaction for DB.
func (t *Tx) Context(ctx context.Context) context.Context {
	return WithHandle(ctx, handlerTx{t})
}

// Commit commits the transaction. An error on a transaction a failed
// statement aborted is ErrTxAborted.
func (t *Tx) Commit(context.Context) error {
	if t.closed {
		return fmt.Errorf("commit: %s: %w", t.e.name, errTxEnded)
	}
	t.closed = true
	if t.tx == nil {
		return nil
	}
	if err := t.tx.Commit(); err != nil {
		if t.failed || errors.Is(err, sql.ErrTxDone) {
			return fmt.Errorf("commit: %w", errors.Join(store.ErrTxAborted, err))
		}
		return fmt.Errorf("commit: %w", t.e.Translate(err))
	}
	return nil
}

// Rollback rolls the transaction back; after a Commit it does nothing.
func (t *Tx) Rollback(context.Context) error {
	t.closed = true
	if t.tx == nil {
		return nil
	}
	if err := t.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// CompleteAndCommit is Complete, then Commit.
func (t *Tx) CompleteAndCommit(ctx context.Context, a store.Attempt, resp store.Response) (bool, error) {
	return store.CompleteThenCommit(ctx, t, a, resp)
}

// DeferClaim holds the claim of c back until Complete, which then records
// the key as COMPLETED with its response in one insert.
func (t *Tx) DeferClaim(c store.Claim) bool { return t.claim.Defer(c, t.closed) }

// DeferredClaimResult reports whether the deferred claim has run, and its
// error.
func (t *Tx) DeferredClaimResult() (ran bool, err error) { return t.claim.Result() }

// claimAndComplete runs the deferred claim: a plain insert of the
// completed record, which waits (bounded) for a transaction holding the
// key and fails on a recorded one. Then the transaction is rolled back
// here, with all the handler's writes: PostgreSQL has aborted it already,
// MySQL failed the statement alone.
func (t *Tx) claimAndComplete(ctx context.Context, resp store.Response) error {
	s := t.e.sql.InsertCompleted
	args := InsertCompletedArgs(*t.claim.Claim(), resp)
	err := t.keys.run(ctx, OpClaim, func(q Executor, now time.Time) error {
		_, err := q.Exec(ctx, s.SQL, t.e.args(s, now, args...)...)
		return err
	})
	if err == nil {
		return t.claim.Ran(nil)
	}
	if t.e.Classify(err) == ErrDuplicate {
		err = fmt.Errorf("%w (%w)", store.ErrKeyExists, err)
	}
	if t.tx != nil {
		_ = t.tx.Rollback()
	}
	t.closed = true
	return fmt.Errorf("complete: %w", t.claim.Ran(err))
}
