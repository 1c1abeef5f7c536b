package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/store"
)

// atomic holds a key with a transaction: the claim, the handler's writes
// and the completion commit together or not at all. A duplicate's claim
// waits on the first one's uncommitted row (at most Config.WaitTimeout),
// then sees it COMPLETED and replays, or claims it if the first rolled
// back. A client that leaves before the commit takes everything with it:
// the handler only wrote to the database, so nothing happened anywhere.
//
// model/key.pml (MODE_ATOMIC) models this; keep them in step.
type atomic struct{ m *Middleware }

func (h atomic) hold(ctx context.Context, q *request) (context.Context, result) {
	tx, err := h.m.store.Begin(ctx, store.TxOptions{MaxWait: h.m.cfg.WaitTimeout})
	if err != nil {
		// A store may wait for the key here rather than in the claim: a
		// bounded wait is still 409.
		return nil, notClaimed(fmt.Errorf("begin: %w", err))
	}
	return h.claimIn(ctx, tx, q, nil)
}

// claimIn claims the key in tx, starting from rec when the caller has read
// it (locked.hold), and keeps tx for the handler.
func (h atomic) claimIn(ctx context.Context, tx store.Tx, q *request, rec *store.Record) (context.Context, result) {
	if res, ok := h.m.claim(ctx, tx, q, rec); !ok {
		return h.refuse(ctx, tx, res)
	}
	q.tx, q.claimDeferred = tx, false
	return tx.Context(ctx), result{}
}

// refuse rolls back tx, whose request did not get the key, and returns
// the answer res.
func (h atomic) refuse(ctx context.Context, tx store.Tx, res result) (context.Context, result) {
	dctx, cancel := h.m.detached(ctx)
	defer cancel()
	_ = tx.Rollback(dctx)
	return nil, res
}

func (h atomic) complete(ctx context.Context, q *request, resp store.Response) error {
	completed, err := completeAndCommit(ctx, q.tx, q.claim.Attempt(), resp)
	if completed || !errors.Is(err, store.ErrTxAborted) || resp.StatusCode < 400 {
		return err
	}
	// A business error aborted the transaction, taking the claim with it;
	// the 4xx is final all the same.
	return h.completeAfresh(ctx, q, resp)
}

// completeAfresh stores a final response in a new transaction that takes
// the key again, after the handler's transaction aborted.
func (h atomic) completeAfresh(ctx context.Context, q *request, resp store.Response) error {
	m := h.m
	tx, err := m.store.Begin(ctx, store.TxOptions{MaxWait: m.cfg.WaitTimeout})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if res, ok := m.claim(ctx, tx, q, nil); !ok {
		if res.outcome == OutcomeStoreUnavailable {
			return res.err
		}
		// Another request took the key in between; its answer stands and
		// this attempt's is dropped, which the client sees as a lost lease.
		return store.ErrNotHeld
	}
	if err := tx.Complete(ctx, q.claim.Attempt(), resp); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// free rolls back: the claim goes with the handler's writes.
func (atomic) free(ctx context.Context, q *request) error {
	_ = q.tx.Rollback(ctx)
	return nil
}
