package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/idem-dev/idem/store"
)

// Middleware makes unsafe requests take effect once. Wrap each route that
// moves money with Require (or Optional); the handlers themselves never see
// idempotency code.
type Middleware struct {
	store store.Store
	caps  store.Capabilities // the store's, read once in New
	cfg   Config
	cache *replayCache // nil with a negative Config.ReplayCacheBytes
	// running is shared by the copies With and WithMode return: a key
	// is one key whichever route it comes by.
	running *running
}

// New returns a Middleware backed by s (pgstore.New, sqlitestore.New). It
// fails on an invalid Config, or a mode the store cannot serve, never
// later on a request.
func New(s store.Store, cfg Config) (*Middleware, error) {
	if s == nil {
		return nil, errors.New("idem: New needs a store")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	caps := s.Capabilities()
	if err := checkMode(c.Mode, caps); err != nil {
		return nil, err
	}
	if c.TraceFunc != nil {
		s = traced(s, c.TraceFunc)
	}
	return &Middleware{store: s, caps: caps, cfg: c, cache: newReplayCache(c.ReplayCacheBytes, cacheMargin(c.TTL), c.ReplayCacheableFunc),
		running: newRunning()}, nil
}

// checkMode refuses a mode the store's capabilities cannot serve, rather
// than serving it as another.
func checkMode(mode Mode, caps store.Capabilities) error {
	if mode == ModeAtomicDeferred && !caps.DeferredClaim {
		return errors.New("idem: mode atomic-deferred needs a store that can defer a claim (store.Capabilities.DeferredClaim), and this one cannot: use atomic")
	}
	return nil
}

// Config returns the configuration in force, defaults filled in.
func (m *Middleware) Config() Config { return m.cfg }

// WithMode returns a copy of m that holds keys in mode: how one route
// chooses a mode other than the middleware's. It fails, as New does, on a
// mode that is none of the Mode constants or that the store cannot serve.
func (m *Middleware) WithMode(mode Mode) (*Middleware, error) {
	if !mode.valid() {
		return nil, fmt.Errorf("idem: WithMode: unknown mode %d", int(mode))
	}
	if err := checkMode(mode, m.caps); err != nil {
		return nil, err
	}
	c := *m
	c.cfg.Mode = mode
	return &c, nil
}

// With returns a copy of m configured otherwise for one route: each field
// route sets replaces the middleware's, and each zero field keeps it. A
// shorter TTL for a route whose retries come within minutes, a larger
// MaxRequestBytes for an upload:
//
//	upload, err := mw.With(idem.Config{MaxRequestBytes: 16 << 20})
//
// The result is checked as New checks a Config: an invalid one fails here,
// never on a request. What the middleware holds for every route cannot be
// set here, and fails: the mode (WithMode), the replay cache
// (ReplayCacheBytes, ReplayCacheableFunc) and the traced store
// (TraceFunc). Whether the route requires a key is the choice of Require
// or Optional.
func (m *Middleware) With(route Config) (*Middleware, error) {
	c := m.cfg
	dst, src := reflect.ValueOf(&c).Elem(), reflect.ValueOf(route)
	for i := range src.NumField() {
		if src.Field(i).IsZero() {
			continue
		}
		name := src.Type().Field(i).Name
		if why, ok := middlewareWide[name]; ok {
			return nil, fmt.Errorf("idem: With: a route cannot set %s: %s", name, why)
		}
		dst.Field(i).Set(src.Field(i))
	}
	c, err := c.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("idem: route config: %w", err)
	}
	r := *m
	r.cfg = c
	return &r, nil
}

// middlewareWide are the Config fields With refuses, each with why.
var middlewareWide = map[string]string{
	"Mode":                "WithMode sets a route's mode",
	"ReplayCacheBytes":    "the replay cache is the middleware's",
	"ReplayCacheableFunc": "the replay cache is the middleware's",
	"TraceFunc":           "New traces the middleware's store",
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

// serve is the HTTP door: it admits a keyed request, executes it, and
// sends the result, recording it on the request's Event. It is the one
// place where the middleware writes an HTTP response.
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler, required bool) {
	values := r.Header.Values(m.cfg.Header)
	if len(values) == 0 && !required {
		next.ServeHTTP(w, r)
		return
	}
	q := m.begin(r.Context())
	q.r, q.next = r, next
	q.event = Event{Mode: m.cfg.Mode, Method: r.Method, Path: r.URL.Path, Route: routeOf(r.Method, r.Pattern)}
	defer m.observe(q)
	res, admitted := m.admit(w, q, values)
	if admitted {
		res = m.execute(q)
	}
	q.event.Outcome, q.event.Err = res.outcome, res.err
	resp, ok, replayed, _ := m.response(res)
	if !ok {
		return // abandoned: the client has gone, or the handler panicked
	}
	q.event.StatusCode = resp.StatusCode
	h := w.Header()
	if c := res.captured; c != nil && !c.overflow {
		// The handler's own headers: storedResponse copied what it keeps.
		maps.Copy(h, resp.Header)
	} else {
		for k, v := range resp.Header {
			h[k] = append([]string(nil), v...) // it may be cached: never share its slices
		}
	}
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(resp.Body)
}

// serveNext runs an HTTP request's handler with ctx, writing to w.
func (q *request) serveNext(ctx context.Context, w http.ResponseWriter) {
	r := q.r.WithContext(ctx)
	// The handler may run twice (a deferred claim that lost): it reads
	// the body afresh each time.
	body := &q.first.body
	if q.runs > 1 {
		body = new(heldBody)
	}
	body.Reset(q.body)
	r.Body = body
	q.next.ServeHTTP(w, r)
	if q.event.Route == "" {
		// A router inside the middleware (a ServeMux, chi) has
		// routed it by now.
		q.event.Route = routeOf(r.Method, r.Pattern)
	}
}

// heldBody is a request body read from the bytes the middleware holds.
type heldBody struct{ bytes.Reader }

func (*heldBody) Close() error { return nil }

// begin starts a keyed request, from any door, with Config.StartFunc's
// context.
func (m *Middleware) begin(ctx context.Context) *request {
	q := &request{ctx: ctx, start: time.Now()}
	if m.cfg.StartFunc != nil {
		q.ctx, q.end = m.cfg.StartFunc(ctx)
	}
	return q
}

func (m *Middleware) observe(q *request) {
	q.event.Duration = time.Since(q.start)
	if m.cfg.ObserveFunc != nil {
		m.cfg.ObserveFunc(q.event)
	}
	if q.end != nil {
		q.end(q.event)
	}
}

// routeOf is the route label of a request whose router matched pattern:
// the pattern, with the method in front when it names none ("POST
// /v1/payments/{id}" from chi's "/v1/payments/{id}"), so that every router
// labels alike.
func routeOf(method, pattern string) string {
	if pattern == "" || strings.IndexAny(pattern, " \t") > 0 {
		return pattern
	}
	return method + " " + pattern
}
