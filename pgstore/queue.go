package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// queuedError is the failure of a queued write: its own type, so that
// it is never mistaken for the failure of the statement it travelled with.
type queuedError struct {
	what string
	err  error
}

func (e *queuedError) Error() string { return e.what + ": " + e.err.Error() }
func (e *queuedError) Unwrap() error { return e.err }

func isQueued(err error) bool {
	_, ok := errors.AsType[*queuedError](err)
	return ok
}

// queuedWrite is a statement queued by Queue.
type queuedWrite struct {
	what string // names the write in its error
	sql  string
	args []any
	// keyLock marks the statements of the key's lock (claim.go), whose
	// failure is the deferred claim's.
	keyLock bool
}

// Queue queues a write on the request's ambient transaction, to be sent in
// front of the transaction's next statement, in the same round trip; the
// last such statement is the middleware's completion of the key, pipelined
// with the COMMIT. It is for writes whose result nothing reads (a balance
// update, a ledger entry): a queued write that fails makes the statement
// it travels with fail with its error (prefixed with what), and the request
// then rolls back as a whole, key and all.
//
// Queue reports false, queuing nothing, when ctx carries no ambient
// transaction (or it has ended): the caller runs the write itself.
func Queue(ctx context.Context, what, sql string, args ...any) bool {
	l, ok := ctx.Value(txKey{}).(lazy)
	if !ok || l.t.closed {
		return false
	}
	l.t.queued = append(l.t.queued, queuedWrite{what: what, sql: sql, args: args})
	return true
}

// flush sends the queued writes, if any.
func (t *Tx) flush(ctx context.Context) error {
	if len(t.queued) == 0 {
		return nil
	}
	return lazy{t}.SendBatch(ctx, &pgx.Batch{}).Close()
}

// flushed is conn for a statement that cannot carry the queued writes
// in its own round trip: they are sent first.
func (t *Tx) flushed(ctx context.Context) (pgx.Tx, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.conn(ctx)
}
