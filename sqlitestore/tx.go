package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/store"
	"modernc.org/sqlite"
)

// writeTx is a transaction that holds the database's write lock. It begins
// at its first statement, not when it is made: then it takes the store's
// gate and runs BEGIN IMMEDIATE on a connection of its own, waiting at most
// wait for both. Until then it holds nothing, so a leased-mode request
// keeps the database free for renewals and duplicates while its handler
// works outside it.
//
// SQLite ends a transaction on its own when a statement in it is
// interrupted (its context is done) or fails with SQLITE_FULL, IOERR or
// NOMEM, and a handler may run COMMIT or ROLLBACK itself. The connection
// then runs every later statement in its own auto-committed transaction:
// the handler's remaining writes, and the completion of the key, would
// commit without the writes before them. Hooks on the connection close that
// hole: the rollback hook marks the transaction aborted, and the commit hook
// vetoes every commit but the store's own.
type writeTx struct {
	s    *Store
	wait time.Duration

	mu    sync.Mutex // guards conn and ended; held while the transaction begins or ends
	conn  *sql.Conn  // the transaction's connection, once it holds the write lock
	ended bool       // committed or rolled back: nothing more may run

	// Set inside statements by the connection's hooks, on whichever
	// goroutine runs the statement.
	aborted atomic.Bool // SQLite rolled the transaction back
	ending  atomic.Bool // the st's own COMMIT or ROLLBACK is running
}

// errWaited is the cause of a wait that ran out of its bound.
var errWaited = errors.New("sqlitestore: lock wait bound reached")

// errAborted is the error of a statement, or a commit, after SQLite ended
// the transaction on its own.
var errAborted = fmt.Errorf("%w (SQLite rolled it back: a statement was interrupted or failed, or the handler ran COMMIT or ROLLBACK itself)", store.ErrTxAborted)

func (s *Store) newTx(wait time.Duration) *writeTx { return &writeTx{s: s, wait: wait} }

// begin returns the transaction's connection, beginning the transaction if
// this is its first statement.
func (t *writeTx) begin(ctx context.Context) (*sql.Conn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.ended:
		return nil, sql.ErrTxDone
	case t.aborted.Load():
		return nil, errAborted
	case t.conn != nil:
		return t.conn, nil
	}
	c, err := t.s.lock(ctx, t.wait, t.hooks())
	if err != nil {
		return nil, err
	}
	t.conn = c
	return c, nil
}

// Conn, Explain and DB make a writeTx the engine.RequestTx of a handler's
// statements (DB): each begins the transaction first.
func (t *writeTx) Conn(ctx context.Context) (engine.DBTX, error) {
	c, err := t.begin(ctx)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (t *writeTx) DB() *sql.DB { return t.s.DB() }

// Explain says why a statement in the transaction failed.
func (t *writeTx) Explain(err error) error {
	if err == nil {
		return nil
	}
	if t.aborted.Load() && !errors.Is(err, store.ErrTxAborted) {
		return errors.Join(errAborted, err)
	}
	return translate(err)
}

func (t *writeTx) hooks() hooks {
	return hooks{
		commit: func() int32 {
			if t.ending.Load() {
				return 0
			}
			return 1 // veto: the commit turns into a rollback
		},
		rollback: func() { t.aborted.Store(true) },
	}
}

// Begin and End make a writeTx the session of a Tx (engine.Session):
// everything runs in it, under its write lock.
func (t *writeTx) Begin(ctx context.Context, _ engine.Op) (engine.Executor, time.Time, error) {
	c, err := t.begin(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	return engine.SQL(c), time.Now(), nil
}

func (t *writeTx) End(_ context.Context, _ engine.Op, _ engine.Executor, err error) (bool, error) {
	return false, t.Explain(err)
}

// commit commits the transaction. One that never ran a statement has
// nothing to commit; one SQLite rolled back is ErrTxAborted.
func (t *writeTx) commit(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return sql.ErrTxDone
	}
	t.ended = true
	if t.conn == nil {
		return nil
	}
	if t.aborted.Load() {
		t.release(ctx, false)
		return errAborted
	}
	t.ending.Store(true)
	// Not cut short by ctx: an interrupted COMMIT leaves the outcome
	// unknown, and a commit in WAL mode waits for no lock.
	if _, err := t.conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
		err = t.Explain(err)
		t.release(ctx, false)
		return err
	}
	t.release(ctx, true)
	return nil
}

// rollback rolls the transaction back; after a commit or a rollback it
// does nothing.
func (t *writeTx) rollback(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return
	}
	t.ended = true
	if t.conn != nil {
		t.release(ctx, false)
	}
}

// release ends the transaction, rolling it back unless it committed, and
// gives back its connection and the gate. A connection that may still be
// inside a transaction never goes back to the pool: it would keep the
// write lock.
func (t *writeTx) release(ctx context.Context, committed bool) {
	c := t.conn
	t.conn = nil
	defer func() { <-t.s.gate }()
	t.ending.Store(true)
	clean := committed
	if !committed {
		_, err := c.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		// The rollback hook fires for every rollback, SQLite's own too, so
		// a failed ROLLBACK with it fired means none was left to roll back.
		clean = err == nil || t.aborted.Load()
	}
	if clean && setHooks(c, hooks{}) == nil {
		_ = c.Close()
		return
	}
	_ = c.Raw(func(any) error { return driver.ErrBadConn }) // closes the driver connection
	_ = c.Close()
}

// lock takes the database's write lock for t: first the store's gate, which
// queues this store's transactions and hands the lock to the next one the
// moment one ends, then BEGIN IMMEDIATE on a connection of its own, which
// waits for writers outside the store (the application's own transactions,
// other processes). The waits together last at most wait. Running out is
// ErrBusy only when SQLite answered SQLITE_BUSY: a writer outside the store
// holds the lock. Running out anywhere else (at the gate, behind a
// transaction of this store; for a connection of the pool; on a machine
// too slow to finish BEGIN IMMEDIATE in time) is store.ErrWaitTimeout.
func (s *Store) lock(ctx context.Context, wait time.Duration, h hooks) (c *sql.Conn, err error) {
	wctx, cancel := context.WithTimeoutCause(ctx, wait, errWaited)
	defer cancel()
	select {
	case s.gate <- struct{}{}:
	case <-wctx.Done():
		if errors.Is(context.Cause(wctx), errWaited) {
			return nil, fmt.Errorf("%w: waited %v for the database's write lock", store.ErrWaitTimeout, wait)
		}
		return nil, context.Cause(wctx) // the caller's context ended the wait
	}
	defer func() {
		if err != nil {
			<-s.gate
		}
	}()
	c, err = s.DB().Conn(wctx)
	if err != nil {
		return nil, waitError(wctx, wait, err)
	}
	if err = setHooks(c, h); err != nil {
		_ = c.Close()
		return nil, err
	}
	for {
		// modernc.org/sqlite ends the busy_timeout wait once wctx is done.
		_, err = c.ExecContext(wctx, "BEGIN IMMEDIATE")
		if err == nil {
			return c, nil
		}
		if !busy(err) || wctx.Err() != nil {
			break
		}
		// The connection's busy_timeout is shorter than wait, or zero (a
		// *sql.DB not from Open): poll until wait runs out.
		select {
		case <-wctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
	if !busy(err) && errors.Is(context.Cause(wctx), errWaited) {
		// The bound cut BEGIN IMMEDIATE short, and the driver then reports
		// the context's error whether SQLite was waiting for a writer or
		// the machine was merely slow: ask SQLite once more, without
		// waiting.
		if err = beginNow(ctx, c, h); err == nil {
			return c, nil
		}
	}
	_ = setHooks(c, hooks{})
	if !busy(err) {
		// A BEGIN IMMEDIATE cut short may have begun the transaction all
		// the same: the connection must not go back to the pool inside it,
		// holding the write lock, where every later BEGIN on it would fail.
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = c.Close()
	return nil, waitError(wctx, wait, err)
}

// beginNow runs BEGIN IMMEDIATE on c with the busy timeout set aside, so
// that SQLite answers SQLITE_BUSY at once while another connection holds
// the write lock. None of its statements waits for anything. The BEGIN
// IMMEDIATE the bound cut short may have begun the transaction all the
// same (it finished as the interrupt came): that one is rolled back first,
// unseen by the hooks h, which the new one then has.
func beginNow(ctx context.Context, c *sql.Conn, h hooks) error {
	ctx = context.WithoutCancel(ctx)
	if err := setHooks(c, hooks{}); err != nil {
		return err
	}
	_, _ = c.ExecContext(ctx, "ROLLBACK") // "no transaction is active", unless it had begun
	if err := setHooks(c, h); err != nil {
		return err
	}
	var timeout int
	if err := c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout); err != nil {
		return err
	}
	if _, err := c.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return err
	}
	_, err := c.ExecContext(ctx, "BEGIN IMMEDIATE")
	if _, rerr := c.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.Itoa(timeout)); rerr != nil {
		// The connection must not go back to the pool without its
		// timeout: close the driver connection.
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		return errors.Join(err, rerr)
	}
	return err
}

// waitError says why a wait past the gate, for a connection or for
// BEGIN IMMEDIATE, ended without the write lock: ErrBusy when SQLite
// answered SQLITE_BUSY, else store.ErrWaitTimeout when the bound ran out.
func waitError(wctx context.Context, wait time.Duration, err error) error {
	switch {
	case busy(err):
		return fmt.Errorf("%w: waited %v for the database's write lock", ErrBusy, wait)
	case errors.Is(context.Cause(wctx), errWaited):
		return fmt.Errorf("%w: waited %v for the database's write lock", store.ErrWaitTimeout, wait)
	case wctx.Err() != nil:
		return context.Cause(wctx) // the caller's context ended the wait
	}
	return translate(err)
}

// hooks are the commit and rollback hooks of a transaction's connection;
// the zero value removes them.
type hooks struct {
	commit   sqlite.CommitHookFn
	rollback sqlite.RollbackHookFn
}

// hookable is the part of modernc.org/sqlite's connection that setHooks
// needs.
type hookable interface {
	RegisterCommitHook(sqlite.CommitHookFn)
	RegisterRollbackHook(sqlite.RollbackHookFn)
}

func setHooks(c *sql.Conn, h hooks) error {
	return c.Raw(func(dc any) error {
		hc, ok := dc.(hookable)
		if !ok {
			return fmt.Errorf("sqlitestore: the database's driver connection is a %T, want modernc.org/sqlite's", dc)
		}
		hc.RegisterCommitHook(h.commit)
		hc.RegisterRollbackHook(h.rollback)
		return nil
	})
}
