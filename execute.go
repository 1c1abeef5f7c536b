package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/google/uuid"
)

// serveLeased commits the claim first, then runs the handler holding a
// renewed, fenced lease; the handler's writes and the completion commit in
// one transaction.
//
// The handler runs detached from the client: it calls a bank or a card
// network, and a client that drops its connection halfway (a phone moving
// from Wi-Fi to 4G) must not abort that call and leave money moved but
// forgotten. Its final response is stored whether or not the client is
// still there, and the client's retry gets it. Only a lost lease cancels
// the handler.
func (m *Middleware) serveLeased(q *request) {
	ctx := q.r.Context()
	claimedAt := time.Now()
	held, rec, err := m.acquire(ctx, m.store, q)
	if !held {
		m.notHeld(q, rec, err)
		return
	}
	lock := q.lock()
	release := func(ctx context.Context) error {
		if err := m.store.Fail(ctx, lock); err != nil && !errors.Is(err, ErrLockLost) {
			return fmt.Errorf("release key: %w", err)
		}
		return nil
	}
	hctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stop := m.keepLease(lock, claimedAt, cancel)
	tx, err := m.store.Begin(ctx, TxOptions{LockWait: m.cfg.WaitTimeout})
	if err != nil {
		stop()
		dctx, dcancel := m.detached(q)
		defer dcancel()
		m.storeFailed(q, errors.Join(fmt.Errorf("begin: %w", err), release(dctx)))
		return
	}
	defer m.cleanUpAfterGoexit(q, tx, func(ctx context.Context) error { stop(); return release(ctx) })
	c, p := m.run(q, tx, hctx)
	q.event.Renewals = stop()
	if cause := context.Cause(hctx); errors.Is(cause, ErrLockLost) || errors.Is(cause, ErrLeaseExpired) {
		q.leaseLost = cause
	}
	m.finish(q, tx, lock, c, p, release, func(ctx context.Context, resp Response) error {
		// The handler's transaction is gone with its writes; the claim was
		// committed on its own, so the fenced completion can run alone.
		return m.store.Complete(ctx, lock, resp)
	})
}

// serveAtomic runs the claim, the handler and the completion in one
// transaction. A duplicate's claim waits on the first one's uncommitted row,
// then sees it COMPLETED and replays, or claims it if the first rolled back.
// A client that leaves before the commit takes everything with it: the
// handler only wrote to the database, so nothing happened anywhere.
//
// With Config.DeferClaim, where the store can (pgstore), there is no claim
// before the handler: the completion records the key and its response in
// one insert, pipelined with the COMMIT, and an insert that finds the key
// taken aborts the transaction with the handler's writes. The handler then
// runs ahead of knowing whether it holds the key, which is safe only
// because it writes nothing outside the transaction; a discarded attempt is
// answered from the record (deferredClaimFailed).
func (m *Middleware) serveAtomic(q *request) {
	ctx := q.r.Context()
	tx, err := m.store.Begin(ctx, TxOptions{LockWait: m.cfg.WaitTimeout})
	if err != nil {
		// A store may wait for its lock here rather than in the claim:
		// a bounded wait still answers 409.
		m.notHeld(q, nil, fmt.Errorf("begin: %w", err))
		return
	}
	q.claim.Token = uuid.NewString()
	if dt, ok := tx.(claimDeferringTx); ok && m.cfg.DeferClaim && !q.claimFirst && dt.DeferClaim(q.claim) {
		q.deferred = dt
	} else {
		held, rec, err := m.acquire(ctx, tx, q)
		if !held {
			dctx, dcancel := m.detached(q)
			defer dcancel()
			_ = tx.Rollback(dctx)
			m.notHeld(q, rec, err)
			return
		}
	}
	// Rolling back the transaction undoes the claim itself: nothing to
	// release.
	release := func(context.Context) error { return nil }
	defer m.cleanUpAfterGoexit(q, tx, release)
	c, p := m.run(q, tx, ctx)
	m.finish(q, tx, q.lock(), c, p, release, func(ctx context.Context, resp Response) error {
		return m.completeAfresh(ctx, q, resp)
	})
}

// deferredClaimFailed reports whether this attempt's deferred claim (see
// serveAtomic) lost the key, and if so rolls back and answers the request
// as a duplicate is answered: from the record, or by claiming it first
// this time when the record may be re-acquired. A claim that has not run,
// because the handler asked for a retry (5xx, 408, 429) or because the
// completion failed before it (afterCompletion: the handler's transaction
// was aborted), is settled by reading the key: a recorded answer beats this
// attempt's, which otherwise stands.
func (m *Middleware) deferredClaimFailed(ctx context.Context, q *request, tx Tx, status int, afterCompletion bool) bool {
	if q.deferred == nil {
		return false
	}
	ran, err := q.deferred.ClaimResult(ctx)
	switch {
	case ran && err == nil:
		return false
	case !ran && !afterCompletion && isFinal(status):
		return false // the completion is the claim
	}
	_ = tx.Rollback(ctx)
	q.finished, q.deferred = true, nil
	if ran && !errors.Is(err, ErrKeyExists) {
		m.notHeld(q, nil, fmt.Errorf("claim key: %w", err))
		return true
	}
	rec, gerr := m.store.Get(ctx, q.claim.Scope, q.claim.Key)
	switch {
	case gerr == nil && m.answer(q, rec):
	case !ran:
		return false
	case gerr != nil && !errors.Is(gerr, ErrNotFound):
		m.storeFailed(q, fmt.Errorf("look up key: %w", gerr))
	default:
		// Re-acquirable, or gone since: claim it first this time.
		q.claimFirst, q.finished = true, false
		m.serveAtomic(q)
		q.finished = true // answered, whichever way the second attempt went
	}
	return true
}

// cleanUpAfterGoexit rolls back and releases the key when the handler
// ended its goroutine with runtime.Goexit (t.FailNow in a test, say), which
// skips everything after the handler call but deferred functions.
func (m *Middleware) cleanUpAfterGoexit(q *request, tx Tx, release func(context.Context) error) {
	if q.finished {
		return
	}
	ctx, cancel := m.detached(q)
	defer cancel()
	_ = tx.Rollback(ctx)
	q.event.Outcome, q.event.Err = OutcomeAbandoned, errors.Join(errors.New("handler called runtime.Goexit"), release(ctx))
}

// completeAfresh stores a final response in a new transaction after the
// handler's transaction aborted (atomic mode): the claim went with it, so
// it is taken again.
func (m *Middleware) completeAfresh(ctx context.Context, q *request, resp Response) error {
	tx, err := m.store.Begin(ctx, TxOptions{LockWait: m.cfg.WaitTimeout})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	held, _, err := m.acquire(ctx, tx, q)
	if err != nil {
		return err
	}
	if !held {
		// Another request took the key in between; its answer stands and
		// this attempt's is dropped, which the client sees as a lost lock.
		return ErrLockLost
	}
	if err := tx.Complete(ctx, q.lock(), resp); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// notHeld answers a request that did not get its key.
func (m *Middleware) notHeld(q *request, rec *Record, err error) {
	switch {
	case errors.Is(err, ErrWaitTimeout):
		m.inFlight(q)
	case err != nil:
		m.storeFailed(q, fmt.Errorf("claim key: %w", err))
	case rec == nil || !m.answer(q, rec):
		m.inFlight(q)
	}
}

// run calls the handler with the transaction in its context, capturing the
// response. A panic is recovered here, to be re-raised after cleanup.
func (m *Middleware) run(q *request, tx Tx, ctx context.Context) (c *capture, panicked *any) {
	c = newCapture(m.cfg.MaxResponseBytes)
	// The handler may run twice: a discarded attempt (see serveAtomic)
	// has read the body once already.
	q.r.Body = io.NopCloser(bytes.NewReader(q.body))
	defer func() {
		if p := recover(); p != nil {
			panicked = &p
		}
	}()
	q.next.ServeHTTP(c, q.r.WithContext(tx.Context(context.WithValue(ctx, keyKey{}, q.claim.Key))))
	return c, nil
}

// finish ends an executed request. A final response (2xx, other 4xx)
// commits with the completion and only then reaches the client. Anything
// else rolls back and releases the key for a retry.
func (m *Middleware) finish(q *request, tx Tx, lock Lock, c *capture, panicked *any,
	release func(context.Context) error, completeAfterAbort func(context.Context, Response) error) {
	q.finished = true
	// The finishing writes must not be cut short by a client that leaves.
	ctx, cancel := m.detached(q)
	defer cancel()
	abandon := func(outcome Outcome, cause error) {
		_ = tx.Rollback(ctx)
		q.event.Outcome, q.event.Err = outcome, errors.Join(cause, release(ctx))
	}
	if panicked != nil {
		abandon(OutcomeAbandoned, fmt.Errorf("handler panicked: %v", *panicked))
		panic(*panicked)
	}
	if err := q.r.Context().Err(); err != nil && m.cfg.Mode == ModeAtomic {
		abandon(OutcomeAbandoned, fmt.Errorf("client gone before commit: %w", err))
		return
	}
	status := c.statusCode()
	if m.deferredClaimFailed(ctx, q, tx, status, false) {
		return
	}
	q.event.StatusCode = status
	if !isFinal(status) {
		if q.leaseLost != nil {
			// The handler failed because its lease was cancelled: the key
			// may be another attempt's by now, and the client should get
			// that attempt's answer, not this one's error.
			abandon(OutcomeLockLost, q.leaseLost)
			m.reject(q, ProblemLockLost, http.StatusConflict, "This attempt lost its hold on the "+m.cfg.Header+" and was rolled back; retry after a moment.")
			return
		}
		abandon(OutcomeFailed, nil)
		m.sendCaptured(q, c, nil)
		return
	}
	resp := m.storedResponse(c)
	completed, err := completeAndCommit(ctx, tx, lock, resp)
	if err != nil && !completed {
		_ = tx.Rollback(ctx)
		if m.deferredClaimFailed(ctx, q, tx, status, true) {
			return
		}
		if errors.Is(err, ErrTxAborted) && status >= 400 {
			// A business error aborted the transaction (a unique
			// violation, say): its writes are gone, but the 4xx is final.
			err = completeAfterAbort(ctx, resp)
		}
	}
	switch {
	case err == nil:
		q.event.Outcome = OutcomeExecuted
		m.remember(q, resp)
		m.sendCaptured(q, c, &resp)
	case errors.Is(err, ErrLockLost):
		q.event.Outcome, q.event.Err = OutcomeLockLost, err
		m.reject(q, ProblemLockLost, http.StatusConflict, "This attempt lost its hold on the "+m.cfg.Header+" to a retry and was rolled back; retry after a moment.")
	default:
		m.storeFailed(q, errors.Join(fmt.Errorf("complete key: %w", err), release(ctx)))
	}
}

// remember caches the response of a completion that committed. The
// record's expiry is at least TTL after the request began.
func (m *Middleware) remember(q *request, resp Response) {
	if m.cache == nil {
		return
	}
	m.cache.put(&Record{
		Scope: q.claim.Scope, Key: q.claim.Key, Fingerprint: q.claim.Fingerprint,
		Status: StatusCompleted, Response: &resp, ExpiresAt: q.start.Add(m.cfg.TTL),
	}, time.Now())
}

// completingTx is a Tx that stores the final response and commits in one
// step, as Complete then Commit would: pgstore sends both in one round trip.
// completed reports whether the completion succeeded (an error is then the
// commit's); after a failed completion the transaction is still open.
type completingTx interface {
	CompleteAndCommit(ctx context.Context, l Lock, resp Response) (completed bool, err error)
}

// completeAndCommit marks the key COMPLETED with resp in tx, fenced by
// lock, and commits.
func completeAndCommit(ctx context.Context, tx Tx, lock Lock, resp Response) (completed bool, err error) {
	if ct, ok := tx.(completingTx); ok {
		return ct.CompleteAndCommit(ctx, lock, resp)
	}
	if err := tx.Complete(ctx, lock, resp); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// isFinal reports whether a status is the request's last word: 2xx, 3xx and
// 4xx except 408 and 429, which ask for a retry.
func isFinal(status int) bool {
	return status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}

// storedResponse is what the record keeps of a captured response: its
// status, allow-listed headers and body; or, when the body was over the
// limit, a problem response saying so.
func (m *Middleware) storedResponse(c *capture) Response {
	if c.overflow {
		return Response{
			StatusCode: http.StatusInternalServerError,
			Header:     http.Header{"Content-Type": {"application/problem+json"}},
			Body: m.problemBody(ProblemResponseTooLarge, http.StatusInternalServerError,
				fmt.Sprintf("The request took effect, but its response exceeded %d bytes and was not stored. Look the result up instead of retrying.", m.cfg.MaxResponseBytes)),
		}
	}
	resp := Response{StatusCode: c.statusCode(), Header: http.Header{}, Body: c.body.Bytes()}
	for _, h := range m.cfg.ReplayHeaders {
		if v := c.header.Values(h); len(v) > 0 {
			resp.Header[h] = append([]string(nil), v...)
		}
	}
	resp.ResourceType, resp.ResourceID = resourceOf(c.header.Get("Location"))
	return resp
}

// resourceOf names the resource a Location header points at: its last two
// path segments, as in /v1/transactions/{id}.
func resourceOf(location string) (typ, id string) {
	u, err := url.Parse(location)
	if err != nil || u.Path == "" {
		return "", ""
	}
	dir, id := path.Split(strings.TrimSuffix(u.Path, "/"))
	return path.Base(dir), id
}

// sendCaptured sends the handler's response to the client: every header it
// set (the first caller may get a cookie a retry never will), and the body
// as stored. A stored replacement (resp) wins over an oversized body.
func (m *Middleware) sendCaptured(q *request, c *capture, resp *Response) {
	h := q.w.Header()
	switch {
	case resp != nil && c.overflow:
		for k, v := range resp.Header {
			h[k] = append([]string(nil), v...) // resp may be cached: never share its slices
		}
		q.w.WriteHeader(resp.StatusCode)
		_, _ = q.w.Write(resp.Body)
		return
	case c.overflow:
		// Not stored and not complete: never send a truncated body.
		m.writeProblem(q.w, ProblemResponseTooLarge, http.StatusInternalServerError, "The response exceeded the size the idempotency layer can hold.")
		return
	}
	for k, v := range c.header {
		h[k] = v
	}
	q.w.WriteHeader(c.statusCode())
	_, _ = q.w.Write(c.body.Bytes())
}

// detached returns a context that outlives the client, bounded by
// StoreTimeout, for the writes that finish a request.
func (m *Middleware) detached(q *request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(q.r.Context()), m.cfg.StoreTimeout)
}
