package idem

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/idem-dev/idem/store"
)

// A holder is one way of holding a key while the handler runs: leased
// (leased.go), atomic with the claim first (atomic.go), or atomic with the
// claim deferred to the completion (deferred.go). Each takes the key, then
// either completes it with a final response or frees it. A holder keeps
// nothing of its own: what one request's hold needs (its transaction, its
// lease) lives on the request.
type holder interface {
	// hold takes q's key and returns the context the handler runs with.
	// When q does not get the key, hctx is nil and res is the answer
	// instead (replay, 409, 422, 503).
	hold(ctx context.Context, q *request) (hctx context.Context, res result)
	// complete stores resp as the key's final answer, with the handler's
	// writes, and commits. A deferred claim that finds the key recorded by
	// another request returns store.ErrKeyExists.
	complete(ctx context.Context, q *request, resp store.Response) error
	// free rolls the handler's writes back and frees the key for a retry.
	free(ctx context.Context, q *request) error
}

// holder returns how the middleware's requests hold their keys:
// claimFirst takes the key before the handler runs even with
// ModeAtomicDeferred, and reads the record under the key's lock before it
// with ModeAtomic, because a record of it exists and must be re-acquired
// (a deferred claim would only find it at the end).
func (m *Middleware) holder(claimFirst bool) holder {
	switch {
	case m.cfg.Mode == ModeLeased:
		return leased{m}
	case m.cfg.Mode == ModeAtomicDeferred && !claimFirst:
		return deferred{atomic{m}}
	case m.cfg.Mode == ModeAtomic && m.caps.KeyLock && m.caps.DeferredClaim:
		return locked{deferred{atomic{m}}, claimFirst}
	}
	return atomic{m}
}

// maxClaimRounds bounds the insert/re-acquire loop. Each round loses only to
// another request that changed the record in between, so more rounds than
// this means the key is busy: the request is answered 409.
const maxClaimRounds = 4

// claim takes the key for q through k: the store itself (leased mode) or a
// transaction (atomic mode). The atomic insert is the only arbiter of who
// executes; a record that exists is re-acquired by a conditional update
// that exactly one contender wins. rec, when not nil, is the key's record
// as the caller read it under the key's lock (locked.hold): the first
// round starts from it rather than from an insert. When q does not get
// the key, claim returns the answer and false.
//
// model/key.pml models this loop in every mode; keep them in step.
func (m *Middleware) claim(ctx context.Context, k store.Keys, q *request, rec *store.Record) (result, bool) {
	if q.resumes != "" {
		return m.resumeClaim(ctx, q)
	}
	for range maxClaimRounds {
		q.claim.Token = newToken()
		if rec == nil {
			var inserted bool
			var err error
			rec, inserted, err = k.Insert(ctx, q.claim)
			if err != nil {
				return notClaimed(err), false
			}
			if inserted {
				return result{}, true
			}
			if rec == nil {
				continue // swept between the insert and the read
			}
		}
		if res, answered := m.answerFrom(q, rec); answered {
			return res, false
		}
		won, err := k.Reacquire(ctx, q.claim, rec.Token)
		if err != nil {
			return notClaimed(err), false
		}
		if won {
			q.event.Reacquired = true
			// A re-acquirable PROCESSING record's lease ran out.
			q.lapsed = rec.Status == store.StatusProcessing
			return result{}, true
		}
		rec = nil // another contender won it: read it again
	}
	return inFlight(), false
}

// resumeClaim takes over the unfinished record q resumes, in one statement
// fenced by the token it was listed with: model/payout.pml's Completer
// never holds a record that is not unfinished, so it never leaves one
// without its recovery point, nor binds a key a request has not used since.
func (m *Middleware) resumeClaim(ctx context.Context, q *request) (result, bool) {
	q.claim.Token = newToken()
	won, err := m.store.ResumeUnfinished(ctx, q.claim, q.resumes)
	switch {
	case err != nil:
		return notClaimed(err), false
	case !won:
		return inFlight(), false
	}
	q.event.Reacquired = true
	return result{}, true
}

// notClaimed answers a claim that failed: a bounded wait for the request
// that holds the key is 409, anything else 503.
func notClaimed(err error) result {
	if errors.Is(err, store.ErrWaitTimeout) {
		return inFlight()
	}
	return storeFailed(fmt.Errorf("claim key: %w", err))
}

// completeAndCommit marks the key COMPLETED with resp in tx, fenced by the
// attempt's token, and commits, in one step where the store can. When it
// fails, tx has been rolled back: a completion the fence refused (another
// attempt took the key) leaves its transaction open, and with it a pool
// connection that nothing else would give back.
func completeAndCommit(ctx context.Context, tx store.Tx, a store.Attempt, resp store.Response) (completed bool, err error) {
	defer func() {
		if err != nil {
			_ = tx.Rollback(ctx)
		}
	}()
	return tx.CompleteAndCommit(ctx, a, resp)
}

// newToken returns a fresh fencing token, a random (version 4) UUID, as
// uuid.NewString does but with one allocation, the string's: the bytes
// stay on the stack.
func newToken() string {
	var u uuid.UUID
	_, _ = rand.Read(u[:])  // never fails: it crashes the program instead
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}
