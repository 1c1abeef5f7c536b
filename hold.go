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
// either completes it with a final response or frees it.
type holder interface {
	// hold takes q's key and returns the context the handler runs with,
	// and how the key was taken. When q does not get the key (notTaken),
	// it returns the answer instead (replay, 409, 422, 503).
	hold(ctx context.Context, q *request) (hctx context.Context, res result, t taking)
	// stop ends what hold started beside the handler (a lease's renewals)
	// and returns why the handler's hold ended early, if it did.
	stop(q *request) (cause error)
	// complete stores resp as the key's final answer, with the handler's
	// writes, and commits. Only a deferred claim finds anything but
	// keyAsHeld.
	complete(ctx context.Context, q *request, resp store.Response) (keyFound, error)
	// free rolls the handler's writes back and frees the key for a
	// retry. Only a deferred claim finds anything but keyAsHeld.
	free(ctx context.Context, q *request) (keyFound, error)
}

// taking is how a hold's claim went.
type taking int

const (
	notTaken        taking = iota // another request has the key, or the claim failed: the result answers
	takenAfresh                   // inserted, re-acquired from an attempt that ended, or deferred to the completion
	takenFromLapsed               // re-acquired from an attempt whose lease ran out (PriorAttemptLapsed)
)

// keyFound is what completing or freeing an attempt found out about its
// key, beyond the error.
type keyFound int

const (
	keyAsHeld    keyFound = iota // the attempt held the key: its completion or freeing, or its error, stands
	keyRecorded                  // a deferred claim found the key recorded by another request: the record answers, or is re-acquired claiming first
	keyUnchecked                 // the attempt ended before its deferred claim ran: another request may have recorded the key, and a recorded answer beats this one
)

// holder returns how a request holds its key: claimFirst takes it before
// the handler runs even with ModeAtomicDeferred, because a record of it
// exists and must be re-acquired (a deferred claim would only find it at
// the end).
func (m *Middleware) holder(q *request, claimFirst bool) holder {
	switch {
	case m.cfg.Mode == ModeLeased:
		q.held.leased = leased{m: m}
		return &q.held.leased
	case m.cfg.Mode == ModeAtomicDeferred && !claimFirst:
		q.held.deferred = deferred{atomic: atomic{m: m}}
		return &q.held.deferred
	}
	q.held.atomic = atomic{m: m}
	return &q.held.atomic
}

// maxClaimRounds bounds the insert/re-acquire loop. Each round loses only to
// another request that changed the record in between, so more rounds than
// this means the key is busy: the request is answered 409.
const maxClaimRounds = 4

// claim takes the key for q through k: the store itself (leased mode) or a
// transaction (atomic mode). The atomic insert is the only arbiter of who
// executes; a record that exists is re-acquired by a conditional update
// that exactly one contender wins. When q does not get the key, claim
// returns the answer.
//
// model/key.pml models this loop in every mode; keep them in step.
func (m *Middleware) claim(ctx context.Context, k store.Keys, q *request) (result, taking) {
	if q.resumes != "" {
		return m.resumeClaim(ctx, q)
	}
	for range maxClaimRounds {
		q.claim.Token = newToken()
		rec, inserted, err := k.Insert(ctx, q.claim)
		if err != nil {
			return notClaimed(err), notTaken
		}
		if inserted {
			return result{}, takenAfresh
		}
		if rec == nil {
			continue // swept between the insert and the read
		}
		if res, answered := m.answerFrom(q, rec); answered {
			return res, notTaken
		}
		won, err := k.Reacquire(ctx, q.claim, rec.Token)
		if err != nil {
			return notClaimed(err), notTaken
		}
		if won {
			q.event.Reacquired = true
			if rec.Status == store.StatusProcessing {
				return result{}, takenFromLapsed // re-acquirable PROCESSING: its lease ran out
			}
			return result{}, takenAfresh
		}
	}
	return inFlight(), notTaken
}

// resumeClaim takes over the unfinished record q resumes, in one statement
// fenced by the token it was listed with: model/payout.pml's Completer
// never holds a record that is not unfinished, so it never leaves one
// without its recovery point, nor binds a key a request has not used since.
func (m *Middleware) resumeClaim(ctx context.Context, q *request) (result, taking) {
	q.claim.Token = newToken()
	won, err := m.store.ResumeUnfinished(ctx, q.claim, q.resumes)
	switch {
	case err != nil:
		return notClaimed(err), notTaken
	case !won:
		return inFlight(), notTaken
	}
	q.event.Reacquired = true
	return result{}, takenAfresh
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
