package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/idem-dev/idem/store"
)

// Middleware makes unsafe requests take effect once. Wrap each route that
// moves money with Require (or Optional); the handlers themselves never see
// idempotency code.
type Middleware struct {
	store store.Store
	cfg   Config
	cache *replayCache // nil without Config.ReplayCacheBytes
}

// New returns a Middleware backed by s (pgstore.New, sqlitestore.New). It
// fails on an invalid Config, never later on a request.
func New(s store.Store, cfg Config) (*Middleware, error) {
	if s == nil {
		return nil, errors.New("idem: New needs a store")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if c.TraceFunc != nil {
		s = traced(s, c.TraceFunc)
	}
	return &Middleware{store: s, cfg: c, cache: newReplayCache(c.ReplayCacheBytes, cacheMargin(c.TTL))}, nil
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

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler, required bool) {
	values := r.Header.Values(m.cfg.Header)
	if len(values) == 0 && !required {
		next.ServeHTTP(w, r)
		return
	}
	q := &request{ctx: r.Context(), r: r, start: time.Now()}
	q.event = Event{Mode: m.cfg.Mode, Method: r.Method, Path: r.URL.Path, Route: r.Pattern}
	defer m.observe(q)
	if res, ok := m.admit(w, q, values); !ok {
		m.respond(w, q, res)
		return
	}
	q.work = func(ctx context.Context, w http.ResponseWriter) {
		r := r.WithContext(ctx)
		// The handler may run twice (a deferred claim that lost): it reads
		// the body afresh each time.
		r.Body = io.NopCloser(bytes.NewReader(q.body))
		next.ServeHTTP(w, r)
	}
	m.respond(w, q, m.execute(q))
}

func (m *Middleware) observe(q *request) {
	if m.cfg.ObserveFunc == nil {
		return
	}
	q.event.Duration = time.Since(q.start)
	m.cfg.ObserveFunc(q.event)
}
