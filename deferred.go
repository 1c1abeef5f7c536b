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
type deferred struct {
	atomic
	claimDeferred bool // false: the claim was taken first
}

func (h *deferred) hold(ctx context.Context, q *request) (context.Context, result, taking) {
	m := h.m
	tx, err := m.store.Begin(ctx, store.TxOptions{MaxWait: m.cfg.WaitTimeout})
	if err != nil {
		return nil, notClaimed(fmt.Errorf("begin: %w", err)), notTaken
	}
	q.claim.Token = newToken()
	if !tx.DeferClaim(q.claim) {
		_ = tx.Rollback(ctx)
		return h.atomic.hold(ctx, q)
	}
	h.tx, h.claimDeferred = tx, true
	return tx.Context(ctx), result{}, takenAfresh
}

// complete records the key with resp. A claim that found the key taken is
// keyRecorded; so is a claim that never ran, because a statement of the
// handler aborted the transaction, when the key has been recorded since.
func (h *deferred) complete(ctx context.Context, q *request, resp store.Response) (keyFound, error) {
	if !h.claimDeferred {
		return h.atomic.complete(ctx, q, resp)
	}
	_, err := completeAndCommit(ctx, h.tx, q.claim.Attempt(), resp)
	ran, claimErr := h.tx.DeferredClaimResult()
	switch {
	case ran && errors.Is(claimErr, store.ErrKeyExists):
		return keyRecorded, nil
	case ran && claimErr != nil:
		return keyAsHeld, claimErr
	case ran || err == nil:
		return keyAsHeld, err
	}
	switch _, gerr := h.m.store.Get(ctx, q.claim.Scope, q.claim.Key); {
	case gerr == nil:
		return keyRecorded, nil
	case !errors.Is(gerr, store.ErrNotFound):
		return keyAsHeld, fmt.Errorf("look up key: %w", gerr)
	case errors.Is(err, store.ErrTxAborted) && resp.StatusCode >= 400:
		// A business error aborted the transaction; the 4xx is final.
		return keyAsHeld, h.completeAfresh(ctx, q, resp)
	}
	return keyAsHeld, err
}

// free rolls back: the claim never ran (keyUnchecked).
func (h *deferred) free(ctx context.Context, q *request) (keyFound, error) {
	_ = h.tx.Rollback(ctx)
	if !h.claimDeferred {
		return keyAsHeld, nil
	}
	return keyUnchecked, nil
}
