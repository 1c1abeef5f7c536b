package idem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/idem-dev/idem/store"
)

// request is one keyed request on its way through the middleware, from
// whichever door it came in by (Require, Optional, Do).
type request struct {
	ctx context.Context // the caller's: it ends when the client goes
	// work runs Do's work with the held key's context, writing its
	// answer to w; nil for an HTTP request, whose handler is next.
	work func(ctx context.Context, w http.ResponseWriter)
	// r and body are an HTTP request and its bytes; nil from Do. A record
	// fingerprinted by an older algorithm is compared by fingerprinting
	// them again.
	r    *http.Request
	body []byte
	next http.Handler
	// first is what the handler's first run uses, kept here so that it
	// costs no allocation of its own; a later run (a deferred claim that
	// lost) gets new ones, in case the first left work behind that still
	// uses them.
	first struct {
		body     heldBody
		captured capture
		attempt  heldAttempt
		recovery recovery
	}
	// stored is the response the key was completed with (result.stored),
	// kept here for the same reason.
	stored store.Response
	runs   int // the handler's runs begun
	// What the request's hold (holder) keeps: the transaction the handler
	// writes in; in leased mode the lease's renewals; claimDeferred: the
	// transaction defers the claim to the completion (false: the claim
	// was taken first); lapsed: the claim took the key over from an
	// attempt whose lease ran out.
	tx            store.Tx
	lease         *lease
	claimDeferred bool
	lapsed        bool
	claim         store.Claim
	start         time.Time
	event         Event
	// end is Config.StartFunc's, called with the Event at the end.
	end func(Event)
	// resumes is Call.Resumes: the token of the unfinished record this
	// request may only take over.
	resumes string
}

// execute is the request path once the request is admitted, top to
// bottom: answer it from its key's record when one decides, else hold the
// key, run the handler and settle its ending. Each step hands the next the
// holder to run with, or the answer: a deferred claim that finds the key
// recorded at the end hands back a holder that claims first, and the
// handler runs once more. In an atomic mode a duplicate of a request this
// process is executing waits for it first (running.go).
func (m *Middleware) execute(q *request) result {
	// A retry of a finished request is answered before anything is
	// claimed: from the replay cache, which holds only COMPLETED records
	// (a miss is answered by the claim); or, without one or on a store
	// whose claim takes its write lock, with a single read that writes
	// nothing.
	if res, ok := m.cached(q); ok {
		return res
	}
	if !m.cfg.Mode.atomic() {
		return m.proceed(q, false)
	}
	k := scopedKey{q.claim.Scope, q.claim.Key}
	switch m.running.enter(q.ctx, k, m.cfg.WaitTimeout) {
	case entered:
		return m.proceedFirst(q, k)
	case answered:
		// The key is recorded: a response the cache does not keep is
		// read, never found at a deferred claim after the handler ran.
		if res, ok := m.cached(q); ok {
			return res
		}
		return m.proceed(q, true)
	case waitedOut:
		// The first still holds the key after WaitTimeout, or was told
		// another process does: the answer the store's own bounded wait
		// would give, without waiting twice.
		return inFlight()
	}
	// givenUp: the client left while it waited; nothing was claimed.
	return result{outcome: OutcomeAbandoned, err: fmt.Errorf("client gone while a duplicate ran: %w", context.Cause(q.ctx))}
}

// cached answers q from the replay cache when its key is there.
func (m *Middleware) cached(q *request) (result, bool) {
	if m.cache == nil {
		return result{}, false
	}
	rec := m.cache.get(q.claim.Scope, q.claim.Key, time.Now())
	if rec == nil {
		return result{}, false
	}
	return m.answer(q, rec)
}

// proceedFirst is proceed for the request that executes k in this
// process: its duplicates wait until it ends, panics included.
func (m *Middleware) proceedFirst(q *request, k scopedKey) (res result) {
	defer func() { m.running.leave(k, res.forWaiters()) }()
	return m.proceed(q, false)
}

// proceed is the store's path: one read when there is no cache to have
// missed (or readFirst says so), then the loop of hold, run, settle.
func (m *Middleware) proceed(q *request, readFirst bool) result {
	ctx := q.ctx
	res, h := result{}, m.holder(false)
	if readFirst || m.cache == nil || m.caps.ClaimLocksStore {
		res, h = m.fromStore(ctx, q, false)
	}
	for h != nil {
		hctx, refused := h.hold(ctx, q)
		if hctx == nil {
			return refused
		}
		res, h = m.settle(ctx, q, h, m.run(hctx, q, h))
	}
	return res
}

// admit checks what an HTTP request brings before the store is asked
// anything: its scope, its key, its body.
func (m *Middleware) admit(w http.ResponseWriter, q *request, keyValues []string) (result, bool) {
	key, res, ok := m.identify(q, m.cfg.ScopeFunc(q.r), keyValues)
	if !ok {
		return res, false
	}
	uri := q.r.URL.RequestURI() // once: the fingerprint covers it too
	if !utf8.ValidString(uri) {
		// The key's record keeps the target as text, which PostgreSQL
		// and MySQL refuse: every retry would fail as the first.
		return rejected(OutcomeInvalidBody, ProblemTargetInvalid, http.StatusBadRequest,
			"The request's path or query holds bytes that are not UTF-8; percent-encode them."), false
	}
	body, err := readBody(http.MaxBytesReader(w, q.r.Body, m.cfg.MaxRequestBytes), q.r.ContentLength, m.cfg.MaxRequestBytes)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return rejected(OutcomeInvalidBody, ProblemBodyTooLarge, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("The request body exceeds %d bytes.", m.cfg.MaxRequestBytes)), false
		}
		return rejected(OutcomeInvalidBody, ProblemBodyInvalid, http.StatusBadRequest, "The request body could not be read."), false
	}
	fp, err := m.fingerprint(FingerprintVersion, q.r, uri, body)
	if err != nil {
		return rejected(OutcomeInvalidBody, ProblemBodyInvalid, http.StatusBadRequest, "The request body is not valid JSON: "+err.Error()+"."), false
	}
	q.body = body
	q.r.ContentLength = int64(len(body))
	q.claim = m.newClaim(q.event.Scope, key, fp)
	return result{}, true
}

// readBody reads a request body as io.ReadAll does, into one allocation of
// the size the request declares (up to max), where ReadAll starts at 512
// bytes and grows: a small JSON body costs a few dozen bytes.
func readBody(r io.Reader, declared, max int64) ([]byte, error) {
	if declared < 0 || declared > max {
		return io.ReadAll(r)
	}
	// One byte more, so that the read that finds the end needs no growth.
	b := make([]byte, 0, declared+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // more than declared: grow as ReadAll does
		}
	}
}

// identify checks a request's scope and key, from any door. Authentication
// comes first: an unauthenticated request learns nothing, not even whether
// its key is well-formed.
func (m *Middleware) identify(q *request, scope string, keyValues []string) (key string, res result, ok bool) {
	if scope == "" {
		return "", rejected(OutcomeScopeMissing, ProblemScopeMissing, http.StatusUnauthorized, "The request has no authenticated user to scope its key to."), false
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

// fromStore reads the key's record and answers from it when it decides
// the answer (replay, 409, 422); a store failure is answered 503. Else it
// returns the holder to claim the key with: first, before the handler
// runs, when a record is to be re-acquired or claimFirst says so.
func (m *Middleware) fromStore(ctx context.Context, q *request, claimFirst bool) (result, holder) {
	rec, err := m.store.Get(ctx, q.claim.Scope, q.claim.Key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return result{}, m.holder(claimFirst)
	case err != nil:
		return storeFailed(fmt.Errorf("look up key: %w", err)), nil
	}
	if res, answered := m.answerFrom(q, rec); answered {
		return res, nil
	}
	return result{}, m.holder(true)
}
