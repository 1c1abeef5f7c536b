package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/store"
)

// locked holds a key as atomic does, with the key's lock for the claim
// (ModeAtomic on a store with store.Capabilities.KeyLock): a duplicate
// waits for the lock as it would for a claimed row, at most
// Config.WaitTimeout, then replays or gets 409. A fresh key is recorded
// once, born COMPLETED with its response, by the deferred claim's insert
// pipelined with the COMMIT (deferred.complete), where atomic inserts a
// PROCESSING row and then updates it.
//
// The lock goes with the handler's first statement, in its round trip
// (store.TxOptions.LockKey), and a check that the key has no record behind
// it: a request that finds the key recorded, or waits past WaitTimeout,
// fails that statement, rolls back and answers from the record, or 409.
// The handler's code before its first statement may thus run for a
// duplicate that another process serves; it writes nothing outside the
// transaction (the contract of the atomic modes), so nothing of it
// remains. A request that knows of a record to re-acquire (readFirst)
// takes the lock and reads the record before the handler runs, and
// answers from it or re-acquires it as atomic's claim does.
//
// A request that does not take the lock (another mode's, in a rolling
// change of a route's mode) can record the key meanwhile: the insert then
// finds it and aborts the transaction with the handler's writes, and the
// record answers, as for a lost deferred claim.
//
// model/key.pml (MODE_ATOMIC) models this: its rowlock is the key's lock,
// taken before the handler's first write, and a fresh claim's row is
// written at the commit.
type locked struct {
	deferred
	readFirst bool
}

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
	if !h.readFirst {
		if hctx, ok := h.deferIn(ctx, tx, q); ok {
			return hctx, result{}
		}
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
