package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/idem-dev/idem/store"
)

// then is what the request path does after settle.
type then int

const (
	thenAnswer        then = iota // send the result
	thenRecordFirst               // a recorded answer beats the result (a deferred claim never ran)
	thenRecordOrRerun             // answer from the record, or run again claiming the key first
)

// settle turns an ending into the key's new state and the client's
// answer: a final response is completed and committed before anyone sees
// it; anything else is rolled back and the key freed for a retry (or, with
// Config.ExternalEffects, left to its lease: letGo). A panic is re-raised
// after that.
//
// model/key.pml models what each ending does to the key; keep them in step.
func (m *Middleware) settle(ctx context.Context, q *request, h holder, out ending) (result, then) {
	// The finishing writes must not be cut short by a client that leaves.
	ctx, cancel := m.detached(ctx)
	defer cancel()
	switch out.kind {
	case endedPanicked:
		m.abandon(q, h, fmt.Errorf("handler panicked: %v", out.panicked))
		panic(out.panicked)
	case endedClientGone:
		_, err := h.free(ctx, q)
		return result{outcome: OutcomeAbandoned, err: errors.Join(fmt.Errorf("client gone before commit: %w", out.cause), err)}, thenAnswer
	case endedHoldLost:
		return leaseLost(errors.Join(out.cause, m.letGo(ctx, q, h))), thenAnswer
	case endedRetriable:
		found, err := h.free(ctx, q)
		res := result{outcome: OutcomeFailed, captured: out.captured, err: err}
		if found == keyUnchecked {
			return res, thenRecordFirst
		}
		return res, thenAnswer
	}
	q.stored = m.storedResponse(out.captured)
	resp := q.stored
	found, err := h.complete(ctx, q, resp)
	switch {
	case found == keyRecorded:
		return result{}, thenRecordOrRerun
	case err == nil:
		m.remember(q, resp)
		return result{outcome: OutcomeExecuted, captured: out.captured, stored: &q.stored}, thenAnswer
	case errors.Is(err, store.ErrNotHeld):
		return leaseLost(err), thenAnswer
	case errors.Is(err, store.ErrWaitTimeout):
		return inFlight(), thenAnswer
	}
	return storeFailed(errors.Join(fmt.Errorf("complete key: %w", err), m.letGo(ctx, q, h))), thenAnswer
}

// letGo ends an attempt whose handler may have acted but whose answer is
// not stored: it rolls back and frees the key for a retry, or, when the
// handler acts outside the transaction (Config.ExternalEffects), rolls
// back and leaves the key to its lease, so that the attempt that takes it
// over knows it lapsed (PriorAttemptLapsed) and does not act blindly.
func (m *Middleware) letGo(ctx context.Context, q *request, h holder) error {
	if l, ok := h.(*leased); ok && m.cfg.ExternalEffects {
		_ = l.tx.Rollback(ctx)
		return nil
	}
	_, err := h.free(ctx, q)
	return err
}

// abandon rolls back and lets go of the key of a handler that did not
// return (a panic, runtime.Goexit), recording why on the Event: respond
// never runs for it.
func (m *Middleware) abandon(q *request, h holder, cause error) {
	ctx, cancel := m.detached(q.ctx)
	defer cancel()
	q.event.Outcome, q.event.Err = OutcomeAbandoned, errors.Join(cause, m.letGo(ctx, q, h))
}

// remember caches the response of a completion that committed. The
// record's expiry is at least TTL after the request began.
func (m *Middleware) remember(q *request, resp store.Response) {
	if m.cache == nil {
		return
	}
	m.cache.put(&store.Record{
		Scope: q.claim.Scope, Key: q.claim.Key, Fingerprint: q.claim.Fingerprint,
		Status: store.StatusCompleted, Response: &resp, ExpiresAt: q.start.Add(m.cfg.TTL),
	}, time.Now())
}

// storedResponse is what the record keeps of a captured response: its
// status, allow-listed headers and body; or, when the body was over the
// limit, a problem response saying so, which says what the handler's
// status said: a 2xx or 3xx took effect (500: the answer is lost), a 4xx
// refused the request (its status is kept: still final, nothing happened).
func (m *Middleware) storedResponse(c *capture) store.Response {
	if c.overflow {
		status, detail := http.StatusInternalServerError,
			fmt.Sprintf("The request took effect, but its response exceeded %d bytes and was not stored. Look the result up instead of retrying.", m.cfg.MaxResponseBytes)
		if code := c.statusCode(); code >= 400 {
			status, detail = code, fmt.Sprintf("The request was refused with status %d and took no effect, but the refusal exceeded %d bytes and was not stored. Change the request rather than retrying it.",
				code, m.cfg.MaxResponseBytes)
		}
		r := m.problemResponse(ProblemResponseTooLarge, status, detail)
		return store.Response{StatusCode: r.StatusCode, Header: r.Header, Body: r.Body}
	}
	resp := store.Response{StatusCode: c.statusCode(), Header: http.Header{}, Body: c.body.Bytes()}
	// The values kept are copied into one array, each header's slice
	// capped at its own values so that an append never reaches the next.
	var values []string
	keep := func(name string, v []string) {
		if values == nil {
			values = make([]string, 0, m.replayedValues(c.header))
		}
		start := len(values)
		values = append(values, v...)
		resp.Header[name] = values[start:len(values):len(values)]
	}
	for _, h := range m.cfg.ReplayHeaders {
		if h == ReplayAllHeaders {
			for name, v := range c.header {
				if !neverReplayed[name] && !notReplayedByAll[name] {
					keep(name, v)
				}
			}
			break
		}
		if v := c.header.Values(h); len(v) > 0 {
			keep(h, v)
		}
	}
	resp.ResourceType, resp.ResourceID = ResourceOf(c.header.Get("Location"))
	return resp
}

// replayedValues counts the values of h that storedResponse keeps, at
// most: every value when ReplayHeaders replays them all.
func (m *Middleware) replayedValues(h http.Header) int {
	n := 0
	for _, name := range m.cfg.ReplayHeaders {
		if name == ReplayAllHeaders {
			n = 0
			for _, v := range h {
				n += len(v)
			}
			return n
		}
		n += len(h.Values(name))
	}
	return n
}

// ResourceOf names the resource a Location header points at, as a record
// keeps it (store.Response's ResourceType and ResourceID): its last two
// path segments, as in /v1/transactions/{id}.
func ResourceOf(location string) (typ, id string) {
	p := location
	if !plainPath(location) {
		u, err := url.Parse(location)
		if err != nil || u.Path == "" {
			return "", ""
		}
		p = u.Path
	}
	dir, id := path.Split(strings.TrimSuffix(p, "/"))
	return path.Base(dir), id
}

// plainPath reports whether location is a path that url.Parse would
// return as it is: rooted, not a network path (//host), and of visible
// ASCII with nothing to unescape, no query and no fragment.
func plainPath(location string) bool {
	if !strings.HasPrefix(location, "/") || strings.HasPrefix(location, "//") {
		return false
	}
	for i := 0; i < len(location); i++ {
		if c := location[i]; c <= ' ' || c >= 0x7f || c == '%' || c == '?' || c == '#' {
			return false
		}
	}
	return true
}

// detached returns a context that outlives the client, bounded by
// StoreTimeout, for the writes that finish a request.
func (m *Middleware) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StoreTimeout)
}
