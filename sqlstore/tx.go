package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/store"
)

// Tx is a transaction of the store: a *sql.Tx at READ COMMITTED, begun on
// its first statement. The handler reaches it through DB.
type Tx struct {
	st   *Store
	wait time.Duration
	tx   *sql.Tx // nil until the first statement
	// closed: committed, rolled back, or ended by a failed deferred claim.
	closed bool
	// wrote: a statement that may have written or locked ran in tx, so a
	// deadlock's rollback would lose more than the statement that failed.
	wrote bool
	// failed: a statement of the handler failed; in PostgreSQL that
	// aborts the transaction.
	failed bool
	claim  deferredClaim
	keys
}

var _ store.ClaimDeferrer = (*Tx)(nil)

// errTxEnded: a statement came after the middleware ended the request's
// transaction (work the handler left running in the background, say).
var errTxEnded = errors.New("sqlstore: the request's transaction has ended")

// begin begins the transaction if it has not begun. The transaction
// outlives the context of the statement that begins it (database/sql
// rolls a transaction back when its context ends); the middleware ends it.
func (t *Tx) begin(ctx context.Context) (*sql.Tx, error) {
	if t.closed {
		return nil, errTxEnded
	}
	if t.tx != nil {
		return t.tx, nil
	}
	tx, err := t.st.db.BeginTx(context.WithoutCancel(ctx), txOptions)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	t.tx = tx
	return tx, nil
}

// txSession runs key operations inside the transaction.
type txSession struct{ t *Tx }

func (ts txSession) read(ctx context.Context) (querier, error) { return ts.t.begin(ctx) }

func (ts txSession) write(ctx context.Context) (querier, error) {
	tx, err := ts.t.begin(ctx)
	ts.t.wrote = true
	return tx, err
}

// bounded runs fn with the transaction's MaxWait. When the database rolls
// the transaction back as a deadlock's victim at its first write (a claim,
// racing others for the same key), the claim runs again in a new one.
func (ts txSession) bounded(ctx context.Context, fn func(q querier) (sql.Result, error)) (sql.Result, error) {
	t := ts.t
	for attempt := 0; ; attempt++ {
		tx, err := t.begin(ctx)
		if err != nil {
			return nil, err
		}
		retriable := !t.wrote
		t.wrote = true
		res, err := t.st.runBounded(ctx, tx, t.wait, fn)
		if err != nil && retriable && attempt < deadlockRetries && t.st.dialect.classify(err) == errDeadlock {
			_ = tx.Rollback()
			t.tx, t.wrote = nil, false
			continue
		}
		return res, t.st.translate(err)
	}
}

// Complete stores the response in the transaction, or runs the deferred
// claim; when the transaction never began (the handler wrote nothing), in
// one statement of its own.
func (t *Tx) Complete(ctx context.Context, a store.Attempt, resp store.Response) error {
	if t.pendingClaim() {
		return t.claimAndComplete(ctx, resp)
	}
	if t.tx == nil && !t.closed {
		return t.st.Complete(ctx, a, resp)
	}
	return t.keys.Complete(ctx, a, resp)
}

// Context returns a copy of ctx carrying the transaction for DB.
func (t *Tx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, ambient{t})
}

// Commit commits the transaction. An error on a transaction a failed
// statement aborted is ErrTxAborted.
func (t *Tx) Commit(context.Context) error {
	if t.closed {
		return fmt.Errorf("commit: %w", errTxEnded)
	}
	t.closed = true
	if t.tx == nil {
		return nil
	}
	if err := t.tx.Commit(); err != nil {
		if t.failed || errors.Is(err, sql.ErrTxDone) {
			return fmt.Errorf("commit: %w", errors.Join(store.ErrTxAborted, err))
		}
		return fmt.Errorf("commit: %w", t.st.translate(err))
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
