// Package adaptertest is the conformance suite of the web framework
// adapters (idemgin, idemecho): the flows every adapter must get right,
// with the real framework over real HTTP against a real store, the
// framework's own error handling and panic recovery included. What the
// client receives is what must be stored and replayed.
package adaptertest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// Answer is how the handler under test answers one request. The adapter's
// handler applies it in its framework's idiom.
type Answer struct {
	Status   int
	Body     string // JSON
	Location string // a Location header, when not empty
	// Error: answer through the framework's error path instead of
	// writing: echo's returned error, gin's c.AbortWithStatusJSON. With
	// Status 500 the error is a plain one, and the framework's error
	// handler chooses the 500 itself.
	Error bool
	// Panic: the handler panics; the framework's recovery answers.
	Panic bool
}

// Mount builds the application under test with the real framework: POST
// /v1/payments/{id} in the framework's route syntax, answered by calling
// answer with the request the handler sees; in front of it, in this order,
// the framework's panic recovery, an authentication middleware that puts
// the X-User header's value in the framework's context as the user (none
// without it), and the adapter's middleware over mw, taking the scope from
// that context.
type Mount func(t *testing.T, mw *idem.Middleware, answer func(*http.Request) Answer) http.Handler

// Adapter is an adapter under test.
type Adapter struct {
	Mount Mount
	// Route is the route label its events must carry, such as
	// "POST /v1/payments/:id".
	Route string
}

// Run runs the suite in both modes on stores from newStore.
func Run(t *testing.T, newStore func(t *testing.T) store.Store, a Adapter) {
	for _, mode := range []idem.Mode{idem.ModeLeased, idem.ModeAtomic} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			run(t, newStore, a, idem.Config{Mode: mode})
		})
	}
}

func run(t *testing.T, newStore func(t *testing.T) store.Store, a Adapter, cfg idem.Config) {
	t.Run("ReplaysByteForByte", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), a, cfg)
		key := uuid.NewString()
		first := s.do(t, key, "alice", "created", `{"amount":100}`)
		require.Equal(t, http.StatusCreated, first.status)
		require.Empty(t, first.header.Get("Idempotent-Replayed"))
		again := s.do(t, key, "alice", "created", `{ "amount": 100 }`)
		require.Equal(t, http.StatusCreated, again.status)
		require.Equal(t, string(first.body), string(again.body))
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		require.Equal(t, first.header.Get("Content-Type"), again.header.Get("Content-Type"))
		require.Equal(t, "/v1/payments/p1", again.header.Get("Location"))
		require.Equal(t, int32(1), s.runs.Load())
		e := s.event(t, key, idem.OutcomeExecuted)
		require.Equal(t, a.Route, e.Route, "the route label is the framework's pattern")
		require.Equal(t, "alice", e.Scope)
	})

	t.Run("ErrorPath4xxIsStoredAndReplayed", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), a, cfg)
		key := uuid.NewString()
		first := s.do(t, key, "alice", "declined", `{"amount":100}`)
		require.Equal(t, http.StatusPaymentRequired, first.status)
		require.Contains(t, string(first.body), "card declined", "the framework's error handler wrote the body")
		again := s.do(t, key, "alice", "created", `{"amount":100}`)
		require.Equal(t, http.StatusPaymentRequired, again.status, "the stored answer is the 402 the client got, not a 200")
		require.Equal(t, string(first.body), string(again.body))
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		require.Equal(t, int32(1), s.runs.Load())
	})

	t.Run("ErrorHandler5xxFreesTheKey", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), a, cfg)
		for _, answer := range []string{"unavailable", "internal"} {
			key := uuid.NewString()
			before := s.runs.Load()
			first := s.do(t, key, "alice", answer, `{"amount":100}`)
			require.GreaterOrEqual(t, first.status, 500, answer)
			require.Equal(t, idem.OutcomeFailed, s.event(t, key, idem.OutcomeFailed).Outcome)
			again := s.do(t, key, "alice", "created", `{"amount":100}`)
			require.Equal(t, http.StatusCreated, again.status, "a 5xx frees the key: the retry runs")
			require.Empty(t, again.header.Get("Idempotent-Replayed"))
			require.Equal(t, before+2, s.runs.Load())
		}
	})

	t.Run("PanicFreesTheKey", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), a, cfg)
		key := uuid.NewString()
		first := s.do(t, key, "alice", "panic", `{"amount":100}`)
		require.Equal(t, http.StatusInternalServerError, first.status, "the framework's recovery answers")
		s.event(t, key, idem.OutcomeAbandoned)
		again := s.do(t, key, "alice", "created", `{"amount":100}`)
		require.Equal(t, http.StatusCreated, again.status)
		require.Equal(t, int32(2), s.runs.Load())
	})

	t.Run("KeyReusedIs422", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), a, cfg)
		key := uuid.NewString()
		require.Equal(t, http.StatusCreated, s.do(t, key, "alice", "created", `{"amount":100}`).status)
		r := s.do(t, key, "alice", "created", `{"amount":101}`)
		require.Equal(t, http.StatusUnprocessableEntity, r.status)
		require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
		require.Equal(t, int32(1), s.runs.Load())
	})

	t.Run("ScopeComesFromTheFrameworkContext", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), a, cfg)
		key := uuid.NewString()
		require.Equal(t, http.StatusCreated, s.do(t, key, "alice", "created", `{"amount":100}`).status)
		bob := s.do(t, key, "bob", "created", `{"amount":100}`)
		require.Equal(t, http.StatusCreated, bob.status)
		require.Empty(t, bob.header.Get("Idempotent-Replayed"), "keys are scoped by user")
		require.Equal(t, http.StatusUnauthorized, s.do(t, key, "", "created", `{"amount":100}`).status)
		require.Equal(t, http.StatusBadRequest, s.do(t, "", "alice", "created", `{"amount":100}`).status)
		require.Equal(t, int32(2), s.runs.Load())
	})

	if cfg.Mode == idem.ModeLeased {
		t.Run("InFlightIs409", func(t *testing.T) {
			t.Parallel()
			s := newServer(t, newStore(t), a, cfg)
			key := uuid.NewString()
			done := make(chan reply, 1)
			go func() { done <- s.do(t, key, "alice", "slow", `{"amount":100}`) }()
			<-s.entered
			dup := s.do(t, key, "alice", "created", `{"amount":100}`)
			require.Equal(t, http.StatusConflict, dup.status)
			require.NotEmpty(t, dup.header.Get("Retry-After"))
			close(s.release)
			require.Equal(t, http.StatusCreated, (<-done).status)
			require.Equal(t, int32(1), s.runs.Load())
		})
	}
}

type server struct {
	url     string
	runs    atomic.Int32
	entered chan struct{} // a "slow" answer has begun
	release chan struct{} // closed: a "slow" answer may end

	mu     sync.Mutex // guards events
	events []idem.Event
}

func newServer(t *testing.T, st store.Store, a Adapter, cfg idem.Config) *server {
	t.Helper()
	s := &server{entered: make(chan struct{}, 1), release: make(chan struct{})}
	cfg.ObserveFunc = func(e idem.Event) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.events = append(s.events, e)
	}
	mw, err := idem.New(st, cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(a.Mount(t, mw, s.answer))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// answer says how to answer by the X-Answer header, which the fingerprint
// does not cover: a retry may be answered otherwise than its first attempt.
func (s *server) answer(r *http.Request) Answer {
	n := s.runs.Add(1)
	switch r.Header.Get("X-Answer") {
	case "declined":
		return Answer{Status: http.StatusPaymentRequired, Body: "card declined", Error: true}
	case "unavailable":
		return Answer{Status: http.StatusServiceUnavailable, Body: "bank unavailable", Error: true}
	case "internal":
		return Answer{Status: http.StatusInternalServerError, Body: "ledger broken", Error: true}
	case "panic":
		return Answer{Panic: true}
	case "slow":
		s.entered <- struct{}{}
		<-s.release
	}
	id := fmt.Sprintf("p%d", n)
	return Answer{Status: http.StatusCreated, Body: `{"id":"` + id + `"}`, Location: "/v1/payments/" + id}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends POST /v1/payments/42 with key (none when empty) as user (none
// when empty), asking for answer.
func (s *server) do(t *testing.T, key, user, answer, body string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/v1/payments/42", bytes.NewBufferString(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Answer", answer)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if user != "" {
		req.Header.Set("X-User", user)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// event waits for the Event of key with outcome: the middleware reports
// it as the response leaves, which may be just after the client has it.
func (s *server) event(t *testing.T, key string, o idem.Outcome) idem.Event {
	t.Helper()
	var found idem.Event
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range s.events {
			if e.Key == key && e.Outcome == o {
				found = e
				return true
			}
		}
		return false
	}, time.Minute, 5*time.Millisecond, "no %s event for key %s", o, key)
	return found
}
