package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/store"
)

// locked holds a key as atomic does, with the key's lock for the claim
// (ModeAtomic on a store with store.Capabilities.KeyLock): the transaction
// takes the lock before anything else, and a duplicate waits for it as it
// would for a claimed row, at most Config.WaitTimeout, then replays or
// gets 409. Under the lock the record is read: a fresh key is then
// recorded once, born COMPLETED with its response, by the deferred claim's
// insert pipelined with the COMMIT (deferred.complete), where atomic
// inserts a PROCESSING row and then updates it; a recorded key is answered
// from, or re-acquired, as atomic's claim does.
//
// A request that does not take the lock (another mode's, in a rolling
// change of a route's mode) can record the key meanwhile: the insert then
// finds it and aborts the transaction with the handler's writes, and the
// record answers, as for a lost deferred claim.
//
// model/key.pml (MODE_ATOMIC) models this: its rowlock is the key's lock,
// and a fresh claim's row is written at the commit.
type locked struct{ deferred }

func (h locked) hold(ctx context.Context, q *request) (context.Context, result) {
	m := h.m
	if q.resumes != "" {
		return h.atomic.hold(ctx, q)
	}
	tx, err := m.store.Begin(ctx, store.TxOptions{
		MaxWait: m.cfg.WaitTimeout,
		LockKey: store.KeyRef{Scope: q.claim.Scope, Key: q.claim.Key},
	})
	if err != nil {
		return nil, notClaimed(fmt.Errorf("begin: %w", err))
	}
	rec, err := tx.Get(ctx, q.claim.Scope, q.claim.Key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if hctx, ok := h.deferIn(ctx, tx, q); ok {
			return hctx, result{}
		}
	case err != nil:
		return h.refuse(ctx, tx, notClaimed(err))
	}
	return h.claimIn(ctx, tx, q, rec)
}
