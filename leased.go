package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/store"
)

// leased holds a key with a lease: the claim commits before the handler
// runs, and the lease is renewed while it runs (lease.go) and fences every
// later write. The handler's writes and the completion commit in one
// transaction.
//
// The handler runs detached from the client: it calls a bank or a card
// network, and a client that drops its connection halfway (a phone moving
// from Wi-Fi to 4G) must not abort that call and leave money moved but
// forgotten. Its final response is stored whether or not the client is
// still there, and the client's retry gets it. Only a lost lease, or one
// past its maximum life, cancels the handler.
//
// model/key.pml (MODE_LEASED) models this; keep them in step.
type leased struct{ m *Middleware }

func (h leased) hold(ctx context.Context, q *request) (context.Context, result) {
	m := h.m
	claimedAt := time.Now()
	if res, ok := m.claim(ctx, m.store, q, nil); !ok {
		return nil, res
	}
	hctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	q.lease = m.keepLease(q.claim.Attempt(), claimedAt, cancel)
	tx, err := m.store.Begin(ctx, store.TxOptions{MaxWait: m.cfg.WaitTimeout})
	if err != nil {
		q.lease.stop()
		cancel(nil)
		dctx, dcancel := m.detached(ctx)
		defer dcancel()
		return nil, storeFailed(errors.Join(fmt.Errorf("begin: %w", err), h.freeKey(dctx, q)))
	}
	q.tx = tx
	return tx.Context(hctx), result{}
}

func (h leased) complete(ctx context.Context, q *request, resp store.Response) error {
	completed, err := completeAndCommit(ctx, q.tx, q.claim.Attempt(), resp)
	if completed || !errors.Is(err, store.ErrTxAborted) || resp.StatusCode < 400 {
		return err
	}
	// A business error aborted the transaction (a unique violation, say):
	// its writes are gone, but the 4xx is final. The claim committed on its
	// own, so the fenced completion can run alone.
	return h.m.store.Complete(ctx, q.claim.Attempt(), resp)
}

func (h leased) free(ctx context.Context, q *request) error {
	_ = q.tx.Rollback(ctx)
	return h.freeKey(ctx, q)
}

// freeKey marks the record FAILED so a retry may take the key at once. An
// attempt that no longer holds the key has nothing to free.
func (h leased) freeKey(ctx context.Context, q *request) error {
	if err := h.m.store.Fail(ctx, q.claim.Attempt()); err != nil && !errors.Is(err, store.ErrNotHeld) {
		return fmt.Errorf("free key: %w", err)
	}
	return nil
}
