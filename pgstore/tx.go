package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tx is a transaction of the store. It begins on its first statement, so a
// leased-mode handler that calls a bank and never touches the database
// holds no connection while it waits, and its completion is a single
// auto-committed statement. The handler reaches it through DB.
type Tx struct {
	s *Store
	// wait bounds a claim's wait on a row another transaction holds.
	wait time.Duration
	// pc is the transaction's connection, held from its first statement
	// until it ends. The store holds it rather than a pool transaction so
	// that the completion and the COMMIT can share a round trip
	// (CompleteAndCommit) and the connection still goes back to the pool.
	pc     *pgxpool.Conn
	tx     pgx.Tx // nil until the first statement; a transaction on pc
	closed bool   // committed or rolled back: nothing may begin it again
	// queued are writes queued by Queue, sent in front of the
	// transaction's next statement.
	queued []queuedWrite
	// claim is the atomic-mode claim deferred to the completion (claim.go).
	claim engine.DeferredClaim
	keys
}

// errTxEnded: a statement came after the middleware ended the request's
// transaction (work the handler left running in the background, say).
var errTxEnded = errors.New("pgstore: the request's transaction has ended")

var _ store.Tx = (*Tx)(nil)

// txOptions asks for READ COMMITTED whatever the database's default: under
// REPEATABLE READ an atomic-mode duplicate's claim would fail with a
// serialization error instead of waiting and replaying.
var txOptions = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

// conn begins the transaction if it has not begun.
func (t *Tx) conn(ctx context.Context) (pgx.Tx, error) {
	if t.closed {
		return nil, errTxEnded
	}
	if t.tx != nil {
		if t.tx.Conn().PgConn().TxStatus() == 'I' {
			// The handler ran COMMIT or ROLLBACK itself. Whatever came
			// after would commit on its own, apart from the key: refuse.
			return nil, fmt.Errorf("the handler ended the transaction with its own COMMIT or ROLLBACK: %w", store.ErrTxAborted)
		}
		return t.tx, nil
	}
	c, err := t.s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", translate(err))
	}
	tx, err := c.Conn().BeginTx(ctx, txOptions)
	if err != nil {
		c.Release()
		return nil, fmt.Errorf("begin: %w", translate(err))
	}
	t.pc, t.tx = c, tx
	return tx, nil
}

// release gives the connection back to the pool, which discards it if it
// is still in a transaction.
func (t *Tx) release() {
	if t.pc != nil {
		t.pc.Release()
		t.pc = nil
	}
}

// Complete stores the response in the transaction; when the transaction
// never began (the handler wrote nothing), in one auto-committed statement.
func (t *Tx) Complete(ctx context.Context, l store.Attempt, resp store.Response) error {
	if t.claim.Pending() {
		b := &pgx.Batch{}
		t.queueClaimAndComplete(b, resp)
		br := lazy{t}.SendBatch(ctx, b)
		err := t.claimRan(br)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("complete: %w", translate(err))
		}
		return nil
	}
	if t.tx == nil && !t.closed && len(t.queued) == 0 {
		return t.s.keys.Complete(ctx, l, resp)
	}
	return t.keys.Complete(ctx, l, resp)
}

// completeOrAbort is the completion as a statement that fails when the
// token no longer holds the key: a division by zero, SQLSTATE 22012, which
// nothing else in it can raise. The failure aborts the transaction, so a
// COMMIT sent behind it in the same round trip does not run.
const completeOrAbort = `
WITH completed AS (` + pgsql.Complete + `
 RETURNING 1)
SELECT 1 / count(*) FROM completed`

const codeDivisionByZero = "22012"

// CompleteAndCommit is Complete followed by Commit in one round trip: the
// fenced completion and the COMMIT are pipelined, and the completion fails
// (aborting the transaction, so the COMMIT does not run) when the lock
// token no longer holds the key. completed reports whether the completion
// succeeded, so that an error is known to be the commit's. After an error
// of the completion the transaction is still open: roll it back.
func (t *Tx) CompleteAndCommit(ctx context.Context, l store.Attempt, resp store.Response) (completed bool, err error) {
	if t.closed {
		return false, fmt.Errorf("complete: %w", errTxEnded)
	}
	if t.tx == nil && len(t.queued) == 0 && !t.claim.Pending() {
		// Nothing was written: one auto-committed statement, nothing to commit.
		if err := t.Complete(ctx, l, resp); err != nil {
			return false, err
		}
		return true, t.Commit(ctx)
	}
	if t.tx != nil {
		switch t.tx.Conn().PgConn().TxStatus() {
		case 'I':
			return false, fmt.Errorf("complete: the handler ended the transaction with its own COMMIT or ROLLBACK: %w", store.ErrTxAborted)
		case 'E':
			return false, fmt.Errorf("complete: a statement of the handler failed: %w", store.ErrTxAborted)
		}
	}
	b := &pgx.Batch{}
	claiming := t.claim.Pending()
	if claiming {
		t.queueClaimAndComplete(b, resp)
	} else {
		b.Queue(t.s.sql.completeOrAbort, engine.CompleteArgs(l, resp)...)
	}
	b.Queue("COMMIT")
	// The handler's queued writes go first, in the same round trip.
	br := lazy{t}.SendBatch(ctx, b)
	if claiming {
		if err := t.claimRan(br); err != nil {
			_ = br.Close()
			return false, fmt.Errorf("complete: %w", translate(err))
		}
	} else if _, err := br.Exec(); err != nil {
		_ = br.Close()
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == codeDivisionByZero && !isQueued(err) {
			return false, fmt.Errorf("complete: %w", store.ErrNotHeld)
		}
		return false, fmt.Errorf("complete: %w", translate(err))
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	// The transaction has ended on the server, and pgx's own transaction
	// never saw its COMMIT: the store's bookkeeping ends it here.
	t.closed, t.tx = true, nil
	t.release()
	switch {
	case err != nil:
		return true, fmt.Errorf("commit: %w", translate(err))
	case tag.String() == "ROLLBACK":
		return true, fmt.Errorf("commit: %w", errors.Join(store.ErrTxAborted, pgx.ErrTxCommitRollback))
	}
	return true, nil
}

// Context returns a copy of ctx carrying the transaction for DB.
func (t *Tx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, lazy{t})
}

// Commit commits the transaction. An error on a transaction that a failed
// statement aborted is ErrTxAborted.
func (t *Tx) Commit(ctx context.Context) error {
	if t.closed {
		return fmt.Errorf("commit: %w", errTxEnded)
	}
	if err := t.flush(ctx); err != nil {
		_ = t.Rollback(ctx)
		return fmt.Errorf("commit: %w", err)
	}
	t.closed = true
	if t.tx == nil {
		return nil
	}
	defer t.release()
	if t.tx.Conn().PgConn().TxStatus() == 'I' {
		return fmt.Errorf("commit: the handler ended the transaction itself: %w", store.ErrTxAborted)
	}
	if err := t.tx.Commit(ctx); err != nil {
		if errors.Is(err, pgx.ErrTxCommitRollback) {
			return fmt.Errorf("commit: %w", errors.Join(store.ErrTxAborted, err))
		}
		return fmt.Errorf("commit: %w", translate(err))
	}
	return nil
}

// Rollback rolls the transaction back; after a Commit it does nothing.
func (t *Tx) Rollback(ctx context.Context) error {
	t.closed, t.queued = true, nil
	if t.tx == nil {
		return nil
	}
	defer t.release()
	if err := t.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// lazy is the Tx as a conn, and as the DBTX that DB returns: each
// statement begins the transaction first.
type lazy struct{ t *Tx }

// lockWait: a claim in the transaction waits at most its MaxWait, and the
// handler's statements after it get the session's setting back.
func (l lazy) lockWait() (time.Duration, bool) { return l.t.wait, true }

func (l lazy) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	// Without arguments pgx sends Exec by the simple protocol, which
	// allows several statements in one string; a batch would not.
	if len(args) > 0 && l.pipelines(args) {
		return execAlone(ctx, l, sql, args)
	}
	tx, err := l.t.flushed(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return tx.Exec(ctx, sql, args...)
}

// pipelines reports whether a statement with args goes to the database in
// a batch behind what must precede it: BEGIN when the transaction has not
// begun, the queued writes; so that it costs one round trip, not two or
// three. A statement with one of pgx's query options, which a batch does
// not take, goes on its own.
func (l lazy) pipelines(args []any) bool {
	if l.t.tx != nil && len(l.t.queued) == 0 {
		return false
	}
	if len(args) > 0 {
		switch args[0].(type) {
		case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID:
			return false
		}
	}
	return true
}

func (l lazy) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	tx, err := l.t.flushed(ctx)
	if err != nil {
		return errRows{err: err}, err
	}
	return tx.Query(ctx, sql, args...)
}

func (l lazy) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if l.pipelines(args) {
		b := &pgx.Batch{}
		b.Queue(sql, args...)
		br := l.SendBatch(ctx, b)
		return batchRow{row: br.QueryRow(), br: br}
	}
	tx, err := l.t.flushed(ctx)
	if err != nil {
		return errRow{err}
	}
	return tx.QueryRow(ctx, sql, args...)
}

// SendBatch sends b in the transaction, behind the queued writes. When
// the transaction has not begun, BEGIN goes in front, in the same round
// trip: an atomic-mode claim costs one round trip, not two.
func (l lazy) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	t := l.t
	if t.tx != nil && len(t.queued) == 0 {
		tx, err := t.conn(ctx)
		if err != nil {
			return errBatch{err}
		}
		return tx.SendBatch(ctx, b)
	}
	if t.closed {
		return errBatch{errTxEnded}
	}
	nb := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 1+len(t.queued)+len(b.QueuedQueries))}
	begin := t.tx == nil
	if begin {
		nb.BeginTx(txOptions)
	}
	queued := t.queued
	for _, d := range queued {
		nb.Queue(d.sql, d.args...)
	}
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	// The queued writes leave the queue only when they are sent: a
	// statement that could not get a connection leaves them for the next
	// one, or the completion.
	var br pgx.BatchResults
	if begin {
		c, err := t.s.pool.Acquire(ctx)
		if err != nil {
			return errBatch{fmt.Errorf("begin: %w", translate(err))}
		}
		t.queued = nil
		br = c.Conn().SendBatch(ctx, nb)
		t.pc, t.tx = c, br.Tx()
		if _, err := br.Exec(); err != nil { // BEGIN's own result
			_ = br.Close()
			return errBatch{fmt.Errorf("begin: %w", translate(err))}
		}
	} else {
		tx, err := t.conn(ctx)
		if err != nil {
			return errBatch{err}
		}
		t.queued = nil
		br = tx.SendBatch(ctx, nb)
	}
	for _, d := range queued {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			err = translate(err)
			if d.keyLock {
				err = keyTaken(err)
				t.lockFailed(err)
			}
			return errBatch{&queuedError{what: d.what, err: err}}
		}
	}
	return br
}

// batchRow is a row read from a batch of its own: Scan closes the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

// errRows are the rows of a query that never ran: never nil, so pgx's
// idiom rows, _ := Query(…); pgx.CollectRows(rows, …) reports the error
// instead of panicking, as a pool's or a transaction's Query does.
type errRows struct{ err error }

func (r errRows) Close()                                       {}
func (r errRows) Err() error                                   { return r.err }
func (r errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r errRows) Next() bool                                   { return false }
func (r errRows) Scan(...any) error                            { return r.err }
func (r errRows) Values() ([]any, error)                       { return nil, r.err }
func (r errRows) RawValues() [][]byte                          { return nil }
func (r errRows) Conn() *pgx.Conn                              { return nil }
func (r errRows) TypeMap() *pgtype.Map                         { return nil }
