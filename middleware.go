package idem

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Middleware makes unsafe requests take effect once. Wrap each route that
// moves money with Require (or Optional); the handlers themselves never see
// idempotency code.
type Middleware struct {
	store Store
	cfg   Config
	cache *replayCache // nil without Config.ReplayCacheBytes
}

// New returns a Middleware backed by store. It fails on an invalid Config,
// never later on a request.
func New(store Store, cfg Config) (*Middleware, error) {
	if store == nil {
		return nil, errors.New("idem: New needs a Store")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if c.TraceFunc != nil {
		store = traced(store, c.TraceFunc)
	}
	return &Middleware{store: store, cfg: c, cache: newReplayCache(c.ReplayCacheBytes, cacheMargin(c.TTL))}, nil
}

// Config returns the configuration in force, defaults filled in.
func (m *Middleware) Config() Config { return m.cfg }

// WithMode returns a copy of m that holds keys in mode: how one route
// chooses a mode other than the middleware's.
func (m *Middleware) WithMode(mode Mode) *Middleware {
	if mode != ModeLeased && mode != ModeAtomic {
		panic(fmt.Sprintf("idem: WithMode(%d): unknown mode", int(mode)))
	}
	c := *m
	c.cfg.Mode = mode
	return &c
}

// Require wraps a handler whose requests must carry a key: a request
// without one gets 400.
func (m *Middleware) Require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next, true) })
}

// Optional wraps a handler whose requests may carry a key: with one they are
// made idempotent, without one they pass straight through.
func (m *Middleware) Optional(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next, false) })
}

// request is one keyed request on its way through the middleware.
type request struct {
	w     http.ResponseWriter
	r     *http.Request
	next  http.Handler
	body  []byte
	fp    Fingerprint
	claim Claim
	start time.Time
	event Event
	// finished is set once finish has taken over the cleanup of an
	// executed request.
	finished bool
	// deferred is the transaction that holds this attempt's claim back
	// until the completion (Config.DeferClaim, see serveAtomic); nil when
	// the key was claimed before the handler ran.
	deferred claimDeferringTx
	// claimFirst: claim the key before the handler runs even with
	// DeferClaim, because a record of it exists (read first, or found by a
	// deferred claim) and must be re-acquired.
	claimFirst bool
	// cached: the record that answers came from the replay cache.
	cached bool
	// leaseLost is why a leased-mode handler's context was cancelled, when
	// its lease was lost or lapsed.
	leaseLost error
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler, required bool) {
	values := r.Header.Values(m.cfg.Header)
	if len(values) == 0 && !required {
		next.ServeHTTP(w, r)
		return
	}
	q := &request{w: w, r: r, next: next, start: time.Now()}
	q.event = Event{Mode: m.cfg.Mode, Method: r.Method, Path: r.URL.Path, Route: r.Pattern}
	defer m.observe(q)

	// Authentication comes first: an unauthenticated request learns nothing,
	// not even whether its key is well-formed.
	scope := m.cfg.ScopeFunc(r)
	if scope == "" {
		q.event.Outcome = OutcomeNoScope
		m.reject(q, ProblemScopeMissing, http.StatusUnauthorized, "The request has no authenticated user to scope its key to.")
		return
	}
	q.event.Scope = scope
	key, err := ParseKey(values)
	if err != nil {
		q.event.Outcome = OutcomeInvalidKey
		if errors.Is(err, ErrKeyMissing) {
			m.reject(q, ProblemKeyMissing, http.StatusBadRequest, "This request must carry an "+m.cfg.Header+" header.")
		} else {
			m.reject(q, ProblemKeyInvalid, http.StatusBadRequest, "The "+m.cfg.Header+" header is invalid: "+err.Error()+".")
		}
		return
	}
	q.event.Key = key
	if !m.readBody(q) {
		return
	}
	q.claim = Claim{Scope: scope, Key: key, Fingerprint: q.fp, LockFor: m.cfg.LockTimeout, TTL: m.cfg.TTL}

	// The fast path: a retry of a finished request is answered by one read,
	// with no transaction and no write; or, with a replay cache, by none.
	// The claim below stays the only arbiter of who executes.
	if m.cache != nil {
		if rec := m.cache.get(scope, key, time.Now()); rec != nil {
			q.cached = true
			if m.answer(q, rec) { // always: a cached record is COMPLETED and unexpired
				return
			}
		}
	} else {
		rec, err := m.store.Get(r.Context(), scope, key)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			m.storeFailed(q, fmt.Errorf("look up key: %w", err))
			return
		default:
			if m.answer(q, rec) {
				return
			}
			// A record to re-acquire: a claim deferred to the completion
			// would only find it there.
			q.claimFirst = true
		}
	}
	if m.cfg.Mode == ModeAtomic {
		m.serveAtomic(q)
	} else {
		m.serveLeased(q)
	}
}

// readBody reads and fingerprints the body, answering 413 or 400 itself
// when it cannot. The handler then reads the same bytes.
func (m *Middleware) readBody(q *request) bool {
	body, err := io.ReadAll(http.MaxBytesReader(q.w, q.r.Body, m.cfg.MaxRequestBytes))
	if err != nil {
		q.event.Outcome = OutcomeInvalidBody
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			m.reject(q, ProblemBodyTooLarge, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("The request body exceeds %d bytes.", m.cfg.MaxRequestBytes))
		} else {
			m.reject(q, ProblemBodyInvalid, http.StatusBadRequest, "The request body could not be read.")
		}
		return false
	}
	q.fp, err = NewFingerprint(q.r, body)
	if err != nil {
		q.event.Outcome = OutcomeInvalidBody
		m.reject(q, ProblemBodyInvalid, http.StatusBadRequest, "The request body is not valid JSON: "+err.Error()+".")
		return false
	}
	q.body = body
	q.r.ContentLength = int64(len(body))
	return true
}

// reject answers with a problem and stores nothing.
func (m *Middleware) reject(q *request, t ProblemType, status int, detail string) {
	q.event.StatusCode = status
	m.writeProblem(q.w, t, status, detail)
}

// storeFailed answers 503: the store could not be trusted, so the handler
// must not run (or its work was rolled back).
func (m *Middleware) storeFailed(q *request, err error) {
	q.event.Outcome = OutcomeStoreError
	q.event.Err = err
	m.reject(q, ProblemStoreUnavailable, http.StatusServiceUnavailable, "The idempotency store is unavailable; retry with the same key.")
}

func (m *Middleware) observe(q *request) {
	if m.cfg.ObserveFunc == nil {
		return
	}
	q.event.Duration = time.Since(q.start)
	m.cfg.ObserveFunc(q.event)
}
