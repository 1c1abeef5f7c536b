package idem

import (
	"context"
	"errors"
	"time"

	"github.com/idem-dev/idem/store"
)

// Op names a store operation as a TraceFunc sees it, for a span name or a
// metric label.
type Op string

// The store operations a TraceFunc sees. Inside a transaction the key
// operations keep their names; Begin, Commit and Rollback frame them.
const (
	OpGet       Op = "get"
	OpInsert    Op = "insert"
	OpReacquire Op = "reacquire"
	OpComplete  Op = "complete"
	OpFail      Op = "fail"
	OpRenew     Op = "renew"
	OpBegin     Op = "begin"
	OpCommit    Op = "commit"
	OpRollback  Op = "rollback"
)

// TraceFunc is called as a store operation of the middleware starts, with
// the operation's context and its name (OpGet, …). It returns the context
// the operation runs with, which may carry a tracing span, and a function
// the middleware calls with the operation's error when it ends. It must not
// block.
//
// The error is the store's, unchanged: [store.ErrNotFound],
// [store.ErrNotHeld], [store.ErrWaitTimeout] and [store.ErrKeyExists] are
// answers, not failures. A deferred claim ([ModeAtomicDeferred]) is reported
// as an OpInsert once it has run, with no time of its own; a Rollback after
// a Commit is not reported. Lease renewals run on a context of their own,
// so their spans have no parent. Module idemotel traces with
// OpenTelemetry this way, under the request's span (Config.StartFunc).
type TraceFunc func(ctx context.Context, op Op) (context.Context, func(err error))

// TraceResult names how a store operation ended, for a metric label or a
// span attribute: "ok"; the answers "not_found", "not_held",
// "wait_timeout" and "key_exists" (see TraceFunc); or "error", the only
// failure.
func TraceResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, store.ErrNotFound):
		return "not_found"
	case errors.Is(err, store.ErrNotHeld):
		return "not_held"
	case errors.Is(err, store.ErrWaitTimeout):
		return "wait_timeout"
	case errors.Is(err, store.ErrKeyExists):
		return "key_exists"
	}
	return "error"
}

// TraceAll returns a TraceFunc that calls each of fns in turn, each with the
// context the one before returned, and ends them in reverse order. Nil
// entries are skipped; with none left it returns nil, which costs nothing.
func TraceAll(fns ...TraceFunc) TraceFunc {
	var live []TraceFunc
	for _, f := range fns {
		if f != nil {
			live = append(live, f)
		}
	}
	switch len(live) {
	case 0:
		return nil
	case 1:
		return live[0]
	}
	return func(ctx context.Context, op Op) (context.Context, func(error)) {
		ends := make([]func(error), len(live))
		for i, f := range live {
			ctx, ends[i] = f(ctx, op)
		}
		return ctx, func(err error) {
			for i := len(ends) - 1; i >= 0; i-- {
				ends[i](err)
			}
		}
	}
}

// traced wraps a store so that every operation of the middleware is
// reported to trace. New wraps only when Config.TraceFunc is set: without
// it the middleware calls the store itself, at no cost.
func traced(s store.Store, trace TraceFunc) store.Store {
	return &tracedStore{tracedKeys: tracedKeys{k: s, trace: trace}, untracedStore: untracedStore{s}, oneStep: s.Capabilities().OneStepCommit}
}

type tracedKeys struct {
	k     store.Keys
	trace TraceFunc
}

func (t tracedKeys) Get(ctx context.Context, scope, key string) (*store.Record, error) {
	ctx, end := t.trace(ctx, OpGet)
	rec, err := t.k.Get(ctx, scope, key)
	end(err)
	return rec, err
}

func (t tracedKeys) Insert(ctx context.Context, c store.Claim) (*store.Record, bool, error) {
	ctx, end := t.trace(ctx, OpInsert)
	rec, inserted, err := t.k.Insert(ctx, c)
	end(err)
	return rec, inserted, err
}

func (t tracedKeys) Reacquire(ctx context.Context, c store.Claim, prevToken string) (bool, error) {
	ctx, end := t.trace(ctx, OpReacquire)
	won, err := t.k.Reacquire(ctx, c, prevToken)
	end(err)
	return won, err
}

func (t tracedKeys) Complete(ctx context.Context, a store.Attempt, resp store.Response) error {
	ctx, end := t.trace(ctx, OpComplete)
	err := t.k.Complete(ctx, a, resp)
	end(err)
	return err
}

func (t tracedKeys) Fail(ctx context.Context, a store.Attempt) error {
	ctx, end := t.trace(ctx, OpFail)
	err := t.k.Fail(ctx, a)
	end(err)
	return err
}

func (t tracedKeys) Renew(ctx context.Context, a store.Attempt, d time.Duration) error {
	ctx, end := t.trace(ctx, OpRenew)
	err := t.k.Renew(ctx, a, d)
	end(err)
	return err
}

// untracedStore and untracedTx hold the wrapped store and transaction one
// level deeper than tracedKeys, so that the traced key operations win and
// every other operation (recovery points, take-overs, the deferred claim,
// the operator's) is promoted from the store's own, untraced.
type (
	untracedStore struct{ store.Store }
	untracedTx    struct{ store.Tx }
)

type tracedStore struct {
	tracedKeys
	untracedStore
	oneStep bool // store.Capabilities.OneStepCommit
}

func (t *tracedStore) Begin(ctx context.Context, opts store.TxOptions) (store.Tx, error) {
	tctx, end := t.trace(ctx, OpBegin)
	tx, err := t.Store.Begin(tctx, opts)
	end(err)
	if err != nil {
		return nil, err
	}
	return &tracedTx{tracedKeys: tracedKeys{k: tx, trace: t.trace}, untracedTx: untracedTx{tx}, oneStep: t.oneStep}, nil
}

// tracedTx is a traced transaction.
type tracedTx struct {
	tracedKeys
	untracedTx
	oneStep bool // store.Capabilities.OneStepCommit
	// ended: Commit or Rollback ran, so a later Rollback is the deferred
	// no-op and is not reported. Only the request's goroutine uses a Tx.
	ended bool
	// ctx is the context of the completion a deferred claim travels with,
	// and claimReported whether its result was reported.
	ctx           context.Context
	claimReported bool
}

// DeferredClaimResult passes the deferred claim's result through, and
// reports it once it has run, as an OpInsert with no time of its own: its
// round trip is the completion's it travelled with.
func (t *tracedTx) DeferredClaimResult() (ran bool, err error) {
	ran, err = t.Tx.DeferredClaimResult()
	if ran && !t.claimReported {
		t.claimReported = true
		ctx := t.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		_, end := t.trace(ctx, OpInsert)
		end(err)
	}
	return ran, err
}

func (t *tracedTx) Commit(ctx context.Context) error {
	t.ended = true
	ctx, end := t.trace(ctx, OpCommit)
	err := t.Tx.Commit(ctx)
	end(err)
	return err
}

// CompleteAndCommit reports both operations, as always. Where the store
// completes and commits in one round trip, it is timed under OpComplete,
// and OpCommit follows it with no time of its own, with the commit's
// error; else each is timed on its own.
func (t *tracedTx) CompleteAndCommit(ctx context.Context, a store.Attempt, resp store.Response) (completed bool, err error) {
	if !t.oneStep {
		return store.CompleteThenCommit(ctx, t, a, resp)
	}
	tctx, end := t.trace(ctx, OpComplete)
	completed, err = t.Tx.CompleteAndCommit(tctx, a, resp)
	t.ctx = ctx
	_, _ = t.DeferredClaimResult()
	if !completed {
		end(err)
		return false, err
	}
	t.ended = true
	end(nil)
	_, endCommit := t.trace(ctx, OpCommit)
	endCommit(err)
	return true, err
}

func (t *tracedTx) Rollback(ctx context.Context) error {
	if t.ended {
		return t.Tx.Rollback(ctx)
	}
	t.ended = true
	ctx, end := t.trace(ctx, OpRollback)
	err := t.Tx.Rollback(ctx)
	end(err)
	return err
}
