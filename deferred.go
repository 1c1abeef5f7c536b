package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/store"
)

// deferred holds a key by claiming it at the completion
// (ModeAtomicDeferred): one insert records the key, already COMPLETED with
// its response, pipelined with the COMMIT; an insert that finds the key
// taken aborts the transaction with the handler's writes. The handler runs
// before it knows whether it holds the key, which is safe only because it
// writes nothing outside the transaction. New refuses the mode on a store
// that cannot defer a claim (store.Capabilities.DeferredClaim); a
// transaction that cannot all the same (Tx.DeferClaim false) claims first.
//
// model/key.pml (MODE_DEFERRED) models this; keep them in step.
type deferred struct{ atomic }

func (h deferred) hold(ctx context.Context, q *request) (context.Context, result) {
	m := h.m
	tx, err := m.store.Begin(ctx, store.TxOptions{MaxWait: m.cfg.WaitTimeout})
	if err != nil {
		return nil, notClaimed(fmt.Errorf("begin: %w", err))
	}
	if hctx, ok := h.deferIn(ctx, tx, q); ok {
		return hctx, result{}
	}
	_ = tx.Rollback(ctx)
	return h.atomic.hold(ctx, q)
}

// deferIn holds q's claim back in tx until the completion and keeps tx for
// the handler; false, holding nothing, when tx cannot defer a claim.
func (h deferred) deferIn(ctx context.Context, tx store.Tx, q *request) (context.Context, bool) {
	q.claim.Token = newToken()
	if !tx.DeferClaim(q.claim) {
		return nil, false
	}
	q.tx, q.claimDeferred = tx, true
	return tx.Context(ctx), true
}

// complete records the key with resp. A claim that found the key taken
// returns store.ErrKeyExists; so does a claim that never ran, because a
// statement of the handler aborted the transaction, when the key has been
// recorded since.
func (h deferred) complete(ctx context.Context, q *request, resp store.Response) error {
	if !q.claimDeferred {
		return h.atomic.complete(ctx, q, resp)
	}
	_, err := completeAndCommit(ctx, q.tx, q.claim.Attempt(), resp)
	ran, claimErr := q.tx.DeferredClaimResult()
	switch {
	case ran && claimErr != nil:
		return claimErr
	case ran || err == nil:
		return err
	}
	switch _, gerr := h.m.store.Get(ctx, q.claim.Scope, q.claim.Key); {
	case gerr == nil:
		return store.ErrKeyExists
	case !errors.Is(gerr, store.ErrNotFound):
		return fmt.Errorf("look up key: %w", gerr)
	case errors.Is(err, store.ErrTxAborted) && resp.StatusCode >= 400:
		// A business error aborted the transaction; the 4xx is final.
		return h.completeAfresh(ctx, q, resp)
	}
	return err
}
