package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idem-dev/idem/store"
)

// ending is how running the handler ended: final, retriable, panicked,
// client gone or hold ended. It is not an Outcome, which is how the whole
// request ended as the Event reports it.
type ending struct {
	kind     endingKind
	captured *capture
	cause    error // why the hold ended early (endedHoldLost), or the client's leaving
	panicked any   // the panic value (endedPanicked)
}

type endingKind int

const (
	endedFinal      endingKind = iota // 2xx, 3xx, or a 4xx but 408 and 429: the request's last word
	endedRetriable                    // 5xx, 408, 429: the client may retry
	endedPanicked                     // the handler panicked
	endedClientGone                   // atomic mode: the client left before the commit
	endedHoldLost                     // leased mode: the lease was lost, lapsed, or passed its maximum life
)

// run calls the handler with the held key's context, capturing its
// response, and says how it ended. The context carries the held attempt:
// its key, whether a lapsed attempt held the key before, and in leased
// mode on a store with recovery points its recovery-point state (phase.go).
func (m *Middleware) run(hctx context.Context, q *request, h holder) (out ending) {
	q.runs++
	// The first run uses what q holds for it; a later one (a deferred
	// claim that lost) gets new ones, in case the first left work behind
	// that still uses them.
	c, a, rp := &q.first.captured, &q.first.attempt, &q.first.recovery
	if q.runs > 1 {
		c, a, rp = new(capture), new(heldAttempt), nil
	}
	*c = capture{header: make(http.Header), limit: m.cfg.MaxResponseBytes}
	*a = heldAttempt{key: q.claim.Key, lapsed: q.lapsed}
	if m.caps.RecoveryPoints && m.cfg.Mode == ModeLeased {
		if rp == nil {
			rp = new(recovery)
		}
		*rp = recovery{m: m, a: q.claim.Attempt()}
		a.rec = rp
	}
	hctx = context.WithValue(hctx, attemptKey{}, a)
	returned := false
	defer func() {
		if returned {
			return
		}
		p := recover()
		var cause error
		q.event.Renewals, cause = q.lease.stop()
		if p == nil {
			// runtime.Goexit (t.FailNow in a test, say): nothing after
			// this function runs, so it cleans up here.
			m.abandon(q, h, errors.Join(errors.New("handler called runtime.Goexit"), cause))
			return
		}
		out = ending{kind: endedPanicked, captured: c, panicked: p}
	}()
	if q.work != nil {
		q.work(hctx, c)
	} else {
		q.serveNext(hctx, c)
	}
	returned = true

	var cause error
	q.event.Renewals, cause = q.lease.stop()
	status := c.statusCode()
	switch {
	case errors.Is(cause, ErrLeaseMaxLife), cause != nil && !isFinal(status):
		// Past its maximum life the handler's answer is never stored: the
		// key may be another attempt's by now. A lost lease's failure is
		// not the client's answer either: the attempt that took the key
		// over has it.
		return ending{kind: endedHoldLost, captured: c, cause: cause}
	case m.cfg.Mode.atomic() && q.ctx.Err() != nil:
		return ending{kind: endedClientGone, captured: c, cause: q.ctx.Err()}
	case !isFinal(status), a.rec.isPending():
		// Pending (phase.go): the answer is not stored; the key is
		// freed with its recovery point for a retry or a completer.
		return ending{kind: endedRetriable, captured: c}
	}
	return ending{kind: endedFinal, captured: c}
}

// settle turns an ending into the key's new state and the client's
// answer: a final response is completed and committed before anyone sees
// it; anything else is rolled back and the key freed for a retry (or, with
// Config.ExternalEffects, left to its lease: letGo). A panic is re-raised
// after that. It returns the holder to run the handler again with when a
// deferred claim found the key recorded by another request whose record
// does not answer this one; else nil.
//
// model/key.pml models what each ending does to the key; keep them in step.
func (m *Middleware) settle(ctx context.Context, q *request, h holder, out ending) (result, holder) {
	// The finishing writes must not be cut short by a client that leaves.
	ctx, cancel := m.detached(ctx)
	defer cancel()
	switch out.kind {
	case endedPanicked:
		m.abandon(q, h, fmt.Errorf("handler panicked: %v", out.panicked))
		panic(out.panicked)
	case endedClientGone:
		err := h.free(ctx, q)
		return result{outcome: OutcomeAbandoned, err: errors.Join(fmt.Errorf("client gone before commit: %w", out.cause), err)}, nil
	case endedHoldLost:
		return leaseLost(errors.Join(out.cause, m.letGo(ctx, q, h))), nil
	case endedRetriable:
		res := result{outcome: OutcomeFailed, captured: out.captured, err: h.free(ctx, q)}
		if q.claimDeferred {
			// The deferred claim did not record the key: another
			// request may have, and a recorded answer beats this one.
			// A claim that waited past WaitTimeout under the key's lock
			// (locked) gets what any such wait gets.
			if _, err := q.tx.DeferredClaimResult(); errors.Is(err, store.ErrWaitTimeout) {
				return inFlight(), nil
			}
			if rec, next := m.fromStore(q.ctx, q, true); next == nil {
				return rec, nil
			}
		}
		return res, nil
	}
	q.stored = m.storedResponse(out.captured)
	resp := q.stored
	err := h.complete(ctx, q, resp)
	switch {
	case errors.Is(err, store.ErrKeyExists):
		// Answer from the record, or run again claiming the key first.
		return m.fromStore(q.ctx, q, true)
	case err == nil:
		m.remember(q.claim, q.start, resp)
		return result{outcome: OutcomeExecuted, captured: out.captured, stored: &q.stored}, nil
	case errors.Is(err, store.ErrNotHeld):
		return leaseLost(err), nil
	case errors.Is(err, store.ErrWaitTimeout):
		return inFlight(), nil
	}
	return storeFailed(errors.Join(fmt.Errorf("complete key: %w", err), m.letGo(ctx, q, h))), nil
}

// remember caches the response of a completion that committed, for the
// claim of a request begun then. The record's expiry is at least TTL
// after that.
func (m *Middleware) remember(c store.Claim, begun time.Time, resp store.Response) {
	if m.cache == nil {
		return
	}
	m.cache.put(&store.Record{
		Scope: c.Scope, Key: c.Key, Fingerprint: c.Fingerprint,
		Status: store.StatusCompleted, Response: &resp, ExpiresAt: begun.Add(m.cfg.TTL),
	}, time.Now())
}

// letGo ends an attempt whose handler may have acted but whose answer is
// not stored: it rolls back and frees the key for a retry, or, when the
// handler acts outside the transaction (Config.ExternalEffects, leased
// mode), rolls back and leaves the key to its lease, so that the attempt
// that takes it over knows it lapsed (PriorAttemptLapsed) and does not act
// blindly.
func (m *Middleware) letGo(ctx context.Context, q *request, h holder) error {
	if m.cfg.ExternalEffects && m.cfg.Mode == ModeLeased {
		_ = q.tx.Rollback(ctx)
		return nil
	}
	return h.free(ctx, q)
}

// abandon rolls back and lets go of the key of a handler that did not
// return (a panic, runtime.Goexit), recording why on the Event: no answer
// is sent for it.
func (m *Middleware) abandon(q *request, h holder, cause error) {
	ctx, cancel := m.detached(q.ctx)
	defer cancel()
	q.event.Outcome, q.event.Err = OutcomeAbandoned, errors.Join(cause, m.letGo(ctx, q, h))
}

// isFinal reports whether a status is the request's last word: 2xx, 3xx and
// 4xx except 408 and 429, which ask for a retry.
func isFinal(status int) bool {
	return status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}

// detached returns a context that outlives the client, bounded by
// StoreTimeout, for the writes that finish a request.
func (m *Middleware) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StoreTimeout)
}
