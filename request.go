package idem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/idem-dev/idem/store"
)

// request is one keyed request on its way through the middleware, from
// whichever door it came in by (Require, Optional, Do).
type request struct {
	ctx context.Context // the caller's: it ends when the client goes
	// work runs the handler with the held key's context, writing its
	// answer to w.
	work func(ctx context.Context, w http.ResponseWriter)
	// r and body are an HTTP request and its bytes; nil from Do. A record
	// fingerprinted by an older algorithm is compared by fingerprinting
	// them again.
	r     *http.Request
	body  []byte
	claim store.Claim
	start time.Time
	event Event
	// claimFirst: take the key before the handler runs even with
	// ModeAtomicDeferred, because a record of it exists and must be
	// re-acquired (a deferred claim would only find it at the end).
	claimFirst bool
	// cached: the record being answered from came from the replay cache.
	cached bool
	// end is Config.StartFunc's, called with the Event at the end.
	end func(Event)
	// lapsed: the key was taken over from an attempt whose lease ran out
	// (PriorAttemptLapsed).
	lapsed bool
	// resumes is Call.Resumes: the token of the unfinished record this
	// request may only take over.
	resumes string
}

// handlerContext is the context the handler runs with: hctx, carrying the
// key and whether a lapsed attempt held it before.
func (q *request) handlerContext(hctx context.Context) context.Context {
	ctx := context.WithValue(hctx, keyKey{}, q.claim.Key)
	if q.lapsed {
		ctx = context.WithValue(ctx, lapsedKey{}, true)
	}
	return ctx
}

// execute is the request path once the request is admitted, top to
// bottom: answer it from its key's record when one decides, else hold the
// key, run the handler and settle its outcome. A deferred claim that finds
// the key recorded at the end goes round once more, claiming first.
func (m *Middleware) execute(q *request) result {
	ctx := q.ctx
	if res, answered := m.lookUp(ctx, q); answered {
		return res
	}
	for {
		h := m.holder(q)
		hctx, res, held := h.hold(ctx, q)
		if !held {
			return res
		}
		res, then := m.settle(ctx, q, h, m.run(hctx, q, h))
		switch then {
		case thenAnswer:
			return res
		case thenRecordFirst:
			if rec, answered := m.fromStore(ctx, q); answered {
				return rec
			}
			return res
		case thenRecordOrRerun:
			if rec, answered := m.fromStore(ctx, q); answered {
				return rec
			}
			q.claimFirst = true
		}
	}
}

// admit checks what an HTTP request brings before the store is asked
// anything: its user, its key, its body.
func (m *Middleware) admit(w http.ResponseWriter, q *request, keyValues []string) (result, bool) {
	key, res, ok := m.identify(q, m.cfg.ScopeFunc(q.r), keyValues)
	if !ok {
		return res, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, q.r.Body, m.cfg.MaxRequestBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return rejected(OutcomeInvalidBody, ProblemBodyTooLarge, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("The request body exceeds %d bytes.", m.cfg.MaxRequestBytes)), false
		}
		return rejected(OutcomeInvalidBody, ProblemBodyInvalid, http.StatusBadRequest, "The request body could not be read."), false
	}
	fp, err := m.fingerprint(FingerprintVersion, q.r, body)
	if err != nil {
		return rejected(OutcomeInvalidBody, ProblemBodyInvalid, http.StatusBadRequest, "The request body is not valid JSON: "+err.Error()+"."), false
	}
	q.body = body
	q.r.ContentLength = int64(len(body))
	q.claim = m.newClaim(q.event.Scope, key, fp)
	return result{}, true
}

// identify checks a request's user and key, from any door. Authentication
// comes first: an unauthenticated request learns nothing, not even whether
// its key is well-formed.
func (m *Middleware) identify(q *request, scope string, keyValues []string) (key string, res result, ok bool) {
	if scope == "" {
		return "", rejected(OutcomeNoScope, ProblemScopeMissing, http.StatusUnauthorized, "The request has no authenticated user to scope its key to."), false
	}
	q.event.Scope = scope
	key, err := ParseKey(keyValues)
	switch {
	case errors.Is(err, ErrKeyMissing):
		return "", rejected(OutcomeInvalidKey, ProblemKeyMissing, http.StatusBadRequest, "This request must carry an "+m.cfg.Header+" header."), false
	case err == nil && m.cfg.ValidateKeyFunc != nil:
		err = m.cfg.ValidateKeyFunc(key)
	}
	if err != nil {
		return "", rejected(OutcomeInvalidKey, ProblemKeyInvalid, http.StatusBadRequest, "The "+m.cfg.Header+" header is invalid: "+err.Error()+"."), false
	}
	q.event.Key = key
	return key, result{}, true
}

func (m *Middleware) newClaim(scope, key string, fp store.Fingerprint) store.Claim {
	return store.Claim{Scope: scope, Key: key, Fingerprint: fp, Lease: m.cfg.LeaseDuration, TTL: m.cfg.TTL}
}

// lookUp answers a retry of a finished request before anything is claimed:
// from the replay cache, which holds only COMPLETED records; or, without
// one, with a single read that writes nothing. A record that does not
// decide the answer must be re-acquired, so the key is then claimed first.
func (m *Middleware) lookUp(ctx context.Context, q *request) (result, bool) {
	if m.cache != nil {
		if rec := m.cache.get(q.claim.Scope, q.claim.Key, time.Now()); rec != nil {
			q.cached = true
			return m.answerFrom(q, rec)
		}
		return result{}, false // a miss is answered by the claim
	}
	return m.fromStore(ctx, q)
}

// fromStore reads the key's record and answers from it when it decides
// the answer (replay, 409, 422); a store failure is answered 503.
func (m *Middleware) fromStore(ctx context.Context, q *request) (result, bool) {
	q.cached = false
	rec, err := m.store.Get(ctx, q.claim.Scope, q.claim.Key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return result{}, false
	case err != nil:
		return storeFailed(fmt.Errorf("look up key: %w", err)), true
	}
	res, answered := m.answerFrom(q, rec)
	if !answered {
		q.claimFirst = true
	}
	return res, answered
}
