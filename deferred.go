package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/idem-dev/idem/store"
)

// Answers of a deferred claim that did not record the key. The attempt is
// rolled back; the request path then reads the record.
var (
	// errKeyRecorded: the key was recorded by another request; the
	// record answers this one, or is re-acquired claiming first.
	errKeyRecorded = errors.New("idem: the key was recorded by another request")
	// errKeyUnknown: the attempt ended without its claim running, so it
	// never learned whether another request recorded the key meanwhile; a
	// recorded answer beats this attempt's.
	errKeyUnknown = errors.New("idem: the attempt ended before its deferred claim ran")
)

// deferred holds a key by claiming it at the completion
// (ModeAtomicDeferred): one insert records the key, already COMPLETED with
// its response, pipelined with the COMMIT; an insert that finds the key
// taken aborts the transaction with the handler's writes. The handler runs
// before it knows whether it holds the key, which is safe only because it
// writes nothing outside the transaction. A store whose transactions
// cannot defer a claim (store.ClaimDeferrer) claims first.
//
// model/key.pml (MODE_DEFERRED) models this; keep them in step.
type deferred struct {
	atomic
	dc store.ClaimDeferrer // nil: the claim was taken first
}

func (h *deferred) hold(ctx context.Context, q *request) (context.Context, result, bool) {
	m := h.m
	tx, err := m.store.Begin(ctx, store.TxOptions{MaxWait: m.cfg.WaitTimeout})
	if err != nil {
		return nil, notClaimed(fmt.Errorf("begin: %w", err)), false
	}
	q.claim.Token = uuid.NewString()
	dc, ok := tx.(store.ClaimDeferrer)
	if !ok || !dc.DeferClaim(q.claim) {
		_ = tx.Rollback(ctx)
		return h.atomic.hold(ctx, q)
	}
	h.tx, h.dc = tx, dc
	return tx.Context(ctx), result{}, true
}

// complete records the key with resp. A claim that found the key taken is
// errKeyRecorded; so is a claim that never ran, because a statement of the
// handler aborted the transaction, when the key has been recorded since.
func (h *deferred) complete(ctx context.Context, q *request, resp store.Response) error {
	if h.dc == nil {
		return h.atomic.complete(ctx, q, resp)
	}
	_, err := completeAndCommit(ctx, h.tx, q.claim.Attempt(), resp)
	ran, claimErr := h.dc.DeferredClaimResult()
	switch {
	case ran && errors.Is(claimErr, store.ErrKeyExists):
		return errKeyRecorded
	case ran && claimErr != nil:
		return claimErr
	case ran || err == nil:
		return err
	}
	switch _, gerr := h.m.store.Get(ctx, q.claim.Scope, q.claim.Key); {
	case gerr == nil:
		return errKeyRecorded
	case !errors.Is(gerr, store.ErrNotFound):
		return fmt.Errorf("look up key: %w", gerr)
	case errors.Is(err, store.ErrTxAborted) && resp.StatusCode >= 400:
		// A business error aborted the transaction; the 4xx is final.
		return h.completeAfresh(ctx, q, resp)
	}
	return err
}

// free rolls back: the claim never ran (errKeyUnknown).
func (h *deferred) free(ctx context.Context, q *request) error {
	_ = h.tx.Rollback(ctx)
	if h.dc == nil {
		return nil
	}
	return errKeyUnknown
}
