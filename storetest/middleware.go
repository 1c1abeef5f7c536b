package storetest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"

	"github.com/idem-dev/idem"
)

// created answers 201 with a body that differs on every run, so a replay
// is told apart from a second execution.
func created(w http.ResponseWriter, _ *http.Request, n int) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/v1/payments/p%d", n))
	w.Header().Set("Set-Cookie", "session=secret")
	w.Header().Set("X-Request-Cost", "3")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "{\"id\":\"p%d\",  \"amount\": 100}\n", n)
}

// lapsedThenCreated is created, saying in a header what
// idem.PriorAttemptLapsed told the handler.
func lapsedThenCreated(w http.ResponseWriter, r *http.Request, n int) {
	w.Header().Set("X-Prior-Attempt-Lapsed", strconv.FormatBool(idem.PriorAttemptLapsed(r.Context())))
	created(w, r, n)
}

// RunMiddleware drives the middleware over real HTTP in one configuration
// (its mode and, optionally, ReplayCacheBytes), on every
// branch of the flow.
func RunMiddleware(t *testing.T, newStore NewStoreFunc, cfg idem.Config) {
	mode := cfg.Mode
	// deferred: the claim may wait for the completion, so a handler holds
	// nothing while it runs, and a concurrent duplicate's handler in
	// another process may run to be discarded (in this one it waits for
	// the first). Executions (committed runs) stay one per key.
	ctx := context.Background()
	skipUnservedMode(t, newStore, cfg)
	deferred := mode == idem.ModeAtomicDeferred

	t.Run("ExecutesOnceAndReplaysByteForByte", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), cfg, created)
		key := newKey()
		first := s.do(t, call{keys: []string{key}, body: `{"b":1,"a":"é"}`})
		require.Equal(t, http.StatusCreated, first.status)
		require.Equal(t, "session=secret", first.header.Get("Set-Cookie"), "the first caller gets every header")
		require.Empty(t, first.header.Get("Idempotent-Replayed"))

		// The same request, written differently: the same JSON, canonically.
		again := s.do(t, call{keys: []string{`"` + key + `"`}, body: `{ "a": "\u00e9", "b": 1.0 }`})
		require.Equal(t, http.StatusCreated, again.status)
		require.Equal(t, first.body, again.body)
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		require.Equal(t, "/v1/payments/p1", again.header.Get("Location"))
		require.Equal(t, "application/json", again.header.Get("Content-Type"))
		require.Empty(t, again.header.Get("Set-Cookie"), "cookies are never replayed")
		require.Empty(t, again.header.Get("X-Request-Cost"), "only allow-listed headers are replayed")
		require.Equal(t, int32(1), s.runs.Load())

		rec, err := s.store.Get(ctx, "alice", key)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, rec.Status)
		require.Equal(t, "payments", rec.Response.ResourceType)
		require.Equal(t, "p1", rec.Response.ResourceID)
	})

	t.Run("KeyReusedForAnotherRequestIs422", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), cfg, created)
		key := newKey()
		require.Equal(t, http.StatusCreated, s.do(t, call{keys: []string{key}, body: `{"amount":100}`}).status)
		for name, c := range map[string]call{
			"OtherBody":   {keys: []string{key}, body: `{"amount":101}`},
			"OtherPath":   {keys: []string{key}, body: `{"amount":100}`, path: "/v1/refunds"},
			"OtherQuery":  {keys: []string{key}, body: `{"amount":100}`, path: "/v1/payments?dry=1"},
			"OtherMethod": {keys: []string{key}, body: `{"amount":100}`, method: http.MethodPut},
		} {
			r := s.do(t, c)
			require.Equal(t, http.StatusUnprocessableEntity, r.status, name)
			require.Equal(t, "key-reused", problemType(t, r), name)
		}
		require.Equal(t, int32(1), s.runs.Load())
	})

	t.Run("KeysAreScopedByUser", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), cfg, created)
		key := newKey()
		alice := s.do(t, call{keys: []string{key}, body: `{}`, user: "alice"})
		bob := s.do(t, call{keys: []string{key}, body: `{"other":true}`, user: "bob"})
		require.Equal(t, http.StatusCreated, bob.status, "bob's key is his own: no 422, no replay")
		require.Empty(t, bob.header.Get("Idempotent-Replayed"))
		require.NotEqual(t, alice.body, bob.body)
		require.Equal(t, int32(2), s.runs.Load())
	})

	t.Run("InvalidKeyIs400AndStoresNothing", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), cfg, created)
		cases := map[string][]string{
			"Missing":        nil,
			"Empty":          {""},
			"EmptyQuoted":    {`""`},
			"TooLong":        {strings.Repeat("k", 256)},
			"Space":          {"a b"},
			"NonASCII":       {"clé"},
			"Parameters":     {`"abc";x=1`},
			"BareParameters": {`abc;x=1`},
			"Twice":          {"abc", "abc"},
			"List":           {"abc, def"},
			"Unterminated":   {`"abc`},
			"BadEscape":      {`"a\bc"`},
			"TrailingJunk":   {`"abc"x`},
		}
		for name, keys := range cases {
			r := s.do(t, call{keys: keys, body: `{}`})
			require.Equal(t, http.StatusBadRequest, r.status, name)
			want := "key-invalid"
			if keys == nil {
				want = "key-missing"
			}
			require.Equal(t, want, problemType(t, r), name)
		}
		require.Equal(t, int32(0), s.runs.Load())
		_, err := s.store.Get(ctx, "alice", "abc")
		require.ErrorIs(t, err, store.ErrNotFound)
		ok := s.do(t, call{keys: []string{strings.Repeat("k", 255)}, body: `{}`})
		require.Equal(t, http.StatusCreated, ok.status, "255 characters is the limit, not over it")
	})

	t.Run("OptionalRouteWithoutKeyPassesThrough", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), cfg, created)
		for range 2 {
			require.Equal(t, http.StatusCreated, s.do(t, call{path: "/optional/x", body: `{}`}).status)
		}
		require.Equal(t, int32(2), s.runs.Load())
		key := newKey()
		s.do(t, call{path: "/optional/x", keys: []string{key}, body: `{}`})
		r := s.do(t, call{path: "/optional/x", keys: []string{key}, body: `{}`})
		require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
		require.Equal(t, int32(3), s.runs.Load())
	})

	t.Run("UnscopedRequestIs401", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), cfg, created)
		r := s.do(t, call{keys: []string{newKey()}, body: `{}`, user: "-"})
		require.Equal(t, http.StatusUnauthorized, r.status)
		require.Equal(t, "scope-missing", problemType(t, r))
		require.Equal(t, int32(0), s.runs.Load())
	})

	t.Run("BadBodyIsRejectedAndStoresNothing", func(t *testing.T) {
		t.Parallel()
		c := cfg
		c.MaxRequestBytes = 64
		s := newServer(t, newStore(t), c, created)
		cases := map[string]struct {
			body    string
			status  int
			problem string
		}{
			"TooLarge":      {`{"pad":"` + strings.Repeat("x", 100) + `"}`, 413, "body-too-large"},
			"Malformed":     {`{"a":`, 400, "body-invalid"},
			"Trailing":      {`{"a":1} {}`, 400, "body-invalid"},
			"DuplicateName": {`{"a":1,"a":2}`, 400, "body-invalid"},
			"InvalidUTF8":   {"{\"a\":\"\xff\"}", 400, "body-invalid"},
			"Empty":         {"", 400, "body-invalid"},
		}
		for name, tc := range cases {
			key := newKey()
			r := s.do(t, call{keys: []string{key}, body: tc.body})
			require.Equal(t, tc.status, r.status, name)
			require.Equal(t, tc.problem, problemType(t, r), name)
			_, err := s.store.Get(ctx, "alice", key)
			require.ErrorIs(t, err, store.ErrNotFound, name)
		}
		require.Equal(t, int32(0), s.runs.Load())
		// A target of bytes that are not UTF-8, which no text column keeps.
		key := newKey()
		r := s.do(t, call{keys: []string{key}, body: `{}`, path: "/v1/payments?q=\xff"})
		require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
		require.Equal(t, "target-invalid", problemType(t, r))
		_, err := s.store.Get(ctx, "alice", key)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.Equal(t, int32(0), s.runs.Load())
		// Bytes that are not JSON are fingerprinted raw when not declared JSON.
		r = s.do(t, call{keys: []string{newKey()}, body: `{"a":`, ctype: "text/plain"})
		require.Equal(t, http.StatusCreated, r.status)
	})

	t.Run("ServerErrorsAreRetried", func(t *testing.T) {
		t.Parallel()
		for _, code := range []int{500, 503, 408, 429} {
			s := newServer(t, newStore(t), cfg, func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					w.WriteHeader(code)
					return
				}
				lapsedThenCreated(w, r, n)
			})
			key := newKey()
			require.Equal(t, code, s.do(t, call{keys: []string{key}, body: `{}`}).status)
			if mode == idem.ModeLeased {
				rec, err := s.store.Get(ctx, "alice", key)
				require.NoError(t, err)
				require.Equal(t, store.StatusFailed, rec.Status)
				require.False(t, rec.LeaseLive, "a failure releases the lock")
			}
			r := s.do(t, call{keys: []string{key}, body: `{}`})
			require.Equal(t, http.StatusCreated, r.status, "status %d is retriable", code)
			require.Empty(t, r.header.Get("Idempotent-Replayed"))
			require.Equal(t, "false", r.header.Get("X-Prior-Attempt-Lapsed"), "the first attempt freed the key itself")
			r = s.do(t, call{keys: []string{key}, body: `{}`})
			require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
			require.Equal(t, int32(2), s.runs.Load())
		}
	})

	t.Run("ClientErrorsAreFinal", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), cfg, func(w http.ResponseWriter, _ *http.Request, n int) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusPaymentRequired)
			fmt.Fprintf(w, `{"title":"insufficient funds","run":%d}`, n)
		})
		key := newKey()
		first := s.do(t, call{keys: []string{key}, body: `{}`})
		again := s.do(t, call{keys: []string{key}, body: `{}`})
		require.Equal(t, http.StatusPaymentRequired, again.status)
		require.Equal(t, first.body, again.body)
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		require.Equal(t, int32(1), s.runs.Load())
	})

	t.Run("PanicReleasesKey", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), cfg, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				panic("boom")
			}
			created(w, r, n)
		})
		key := newKey()
		_, err := s.send(ctx, call{keys: []string{key}, body: `{}`})
		require.Error(t, err, "net/http drops the connection of a panicking handler")
		r := s.do(t, call{keys: []string{key}, body: `{}`})
		require.Equal(t, http.StatusCreated, r.status)
		require.Equal(t, int32(2), s.runs.Load())
	})

	if mode == idem.ModeLeased {
		// A handler that acts outside the transaction (a proxy, a provider
		// call) and panics may have acted: its key is not freed but left
		// to its lease, and the attempt that takes it over is told.
		t.Run("ExternalEffectsLeaveKeyToLease", func(t *testing.T) {
			t.Parallel()
			c := cfg
			c.ExternalEffects, c.LeaseDuration = true, time.Second
			s := newServer(t, newStore(t), c, func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					panic("boom after acting")
				}
				lapsedThenCreated(w, r, n)
			})
			key := newKey()
			_, err := s.send(ctx, call{keys: []string{key}, body: `{}`})
			require.Error(t, err, "net/http drops the connection of a panicking handler")
			rec, err := s.store.Get(ctx, "alice", key)
			require.NoError(t, err)
			require.Equal(t, store.StatusProcessing, rec.Status, "the key is not freed")
			busy := s.do(t, call{keys: []string{key}, body: `{}`})
			require.Equal(t, http.StatusConflict, busy.status)
			require.Equal(t, "in-flight", problemType(t, busy))
			waitUntil(t, func() bool {
				rec, err := s.store.Get(ctx, "alice", key)
				require.NoError(t, err)
				return !rec.LeaseLive
			})
			r := s.do(t, call{keys: []string{key}, body: `{}`})
			require.Equal(t, http.StatusCreated, r.status)
			require.Equal(t, "true", r.header.Get("X-Prior-Attempt-Lapsed"), "the next attempt knows the first may have acted")
			require.Equal(t, int32(2), s.runs.Load())
		})
	}

	t.Run("InFlightIs409WithRetryAfter", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		// A failed check must not leave the first handler blocked.
		let := sync.OnceFunc(func() { close(release) })
		defer let()
		c := cfg
		c.WaitTimeout = 300 * time.Millisecond
		s := newServer(t, newStore(t), c, func(w http.ResponseWriter, r *http.Request, n int) {
			<-release
			created(w, r, n)
		})
		key := newKey()
		firstDone := make(chan reply, 1)
		go func() { firstDone <- s.do(t, call{keys: []string{key}, body: `{}`}) }()
		waitUntil(t, func() bool { return s.runs.Load() == 1 })
		// In the same process a duplicate waits for the first, at most
		// WaitTimeout, and is then told to come back.
		r := s.do(t, call{keys: []string{key}, body: `{}`})
		require.Equal(t, http.StatusConflict, r.status)
		require.Equal(t, "in-flight", problemType(t, r))
		require.Equal(t, "1", r.header.Get("Retry-After"))
		require.Equal(t, int32(1), s.runs.Load())
		if deferred {
			// In another process (a middleware of its own on the same
			// store) the claim waits for the completion, so the first
			// handler holds nothing yet: the duplicate runs too, and
			// their completions decide. One executes, the other replays.
			other := newServer(t, s.store, c, func(w http.ResponseWriter, r *http.Request, n int) {
				<-release
				created(w, r, n)
			})
			dupDone := make(chan reply, 1)
			go func() { dupDone <- other.do(t, call{keys: []string{key}, body: `{}`}) }()
			waitUntil(t, func() bool { return other.runs.Load() == 1 })
			let()
			a, b := <-firstDone, <-dupDone
			require.Equal(t, http.StatusCreated, a.status)
			require.Equal(t, http.StatusCreated, b.status)
			require.Equal(t, a.body, b.body)
			require.NotEqual(t, a.header.Get("Idempotent-Replayed"), b.header.Get("Idempotent-Replayed"), "one executed, one replayed")
			require.Equal(t, int32(1), s.executed.Load()+other.executed.Load())
			return
		}
		let()
		first := <-firstDone
		require.Equal(t, http.StatusCreated, first.status)
		again := s.do(t, call{keys: []string{key}, body: `{}`})
		require.Equal(t, first.body, again.body)
		require.Equal(t, int32(1), s.runs.Load())
	})

	t.Run("CrashedClaimIsReacquiredAfterLockExpiry", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), cfg, lapsedThenCreated)
		key := newKey()
		// A claim whose process died: PROCESSING, with a short lock that
		// nobody renews.
		crashed := crashedClaim(t, s, key, `{}`, time.Second)
		busy := s.do(t, call{keys: []string{key}, body: `{}`})
		require.Equal(t, http.StatusConflict, busy.status, "the lock is live until it expires")
		waitUntil(t, func() bool {
			rec, err := s.store.Get(ctx, "alice", key)
			require.NoError(t, err)
			return !rec.LeaseLive
		})
		r := s.do(t, call{keys: []string{key}, body: `{}`})
		require.Equal(t, http.StatusCreated, r.status)
		require.Equal(t, "true", r.header.Get("X-Prior-Attempt-Lapsed"), "the handler is told the crashed attempt may have acted")
		rec, err := s.store.Get(ctx, "alice", key)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, rec.Status)
		require.Equal(t, 2, rec.Attempts)
		require.ErrorIs(t, s.store.Complete(ctx, crashed, store.Response{StatusCode: 201}), store.ErrNotHeld)
	})

	t.Run("ResponseTooLargeIsStoredAsProblem", func(t *testing.T) {
		t.Parallel()
		c := cfg
		c.MaxResponseBytes = 16
		s := newServer(t, newStore(t), c, created)
		key := newKey()
		first := s.do(t, call{keys: []string{key}, body: `{}`})
		require.Equal(t, http.StatusInternalServerError, first.status)
		require.Equal(t, "response-too-large", problemType(t, first))
		again := s.do(t, call{keys: []string{key}, body: `{}`})
		require.Equal(t, first.body, again.body)
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		require.Equal(t, int32(1), s.runs.Load(), "a request whose response was too large is never run again")
	})

	t.Run("RefusalTooLargeKeepsItsStatus", func(t *testing.T) {
		t.Parallel()
		c := cfg
		c.MaxResponseBytes = 16
		s := newServer(t, newStore(t), c, func(w http.ResponseWriter, r *http.Request, n int) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"detail":"a refusal longer than sixteen bytes"}`))
		})
		key := newKey()
		first := s.do(t, call{keys: []string{key}, body: `{}`})
		require.Equal(t, http.StatusBadRequest, first.status, "a refusal is never told as a 500 that took effect")
		require.Equal(t, "response-too-large", problemType(t, first))
		require.NotContains(t, first.body, "took effect,")
		again := s.do(t, call{keys: []string{key}, body: `{}`})
		require.Equal(t, first.body, again.body)
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	})

	t.Run("ClientGoneBeforeCommit", func(t *testing.T) {
		t.Parallel()
		clientGone := make(chan struct{})
		s := newServer(t, newStore(t), cfg, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				<-clientGone
				if mode != idem.ModeLeased {
					<-r.Context().Done() // the server has noticed too
				}
			}
			created(w, r, n)
		})
		key := newKey()
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			waitUntil(t, func() bool { return s.runs.Load() == 1 })
			cancel()
		}()
		_, err := s.send(cctx, call{keys: []string{key}, body: `{}`})
		require.Error(t, err)
		close(clientGone)
		var r reply
		waitUntil(t, func() bool {
			r = s.do(t, call{keys: []string{key}, body: `{}`})
			return r.status != http.StatusConflict // the first attempt may still be finishing
		})
		require.Equal(t, http.StatusCreated, r.status)
		if mode != idem.ModeLeased {
			// The handler only wrote to the database: the abandoned attempt
			// rolled back whole, and the retry executes.
			require.Empty(t, r.header.Get("Idempotent-Replayed"), "the abandoned attempt stored nothing")
			require.Contains(t, string(r.body), `"p2"`)
		} else {
			// The handler may have called a bank: it finished its work
			// despite the client leaving, and the retry gets its answer.
			require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
			require.Contains(t, string(r.body), `"p1"`)
			require.Equal(t, int32(1), s.runs.Load())
		}
	})

	t.Run("ExpiredKeyMayBeReused", func(t *testing.T) {
		t.Parallel()
		c := cfg
		c.TTL = 300 * time.Millisecond
		s := newServer(t, newStore(t), c, created)
		key := newKey()
		require.Equal(t, http.StatusCreated, s.do(t, call{keys: []string{key}, body: `{"n":1}`}).status)
		waitUntil(t, func() bool {
			rec, err := s.store.Get(ctx, "alice", key)
			require.NoError(t, err)
			return rec.Expired
		})
		r := s.do(t, call{keys: []string{key}, body: `{"n":2}`})
		require.Equal(t, http.StatusCreated, r.status, "past retention the key starts afresh, no 422")
		require.Equal(t, int32(2), s.executed.Load())
		if !deferred || cfg.ReplayCacheBytes < 0 {
			// Without a cache the key is read first, and a record found
			// there is claimed before the handler runs.
			require.Equal(t, int32(2), s.runs.Load())
		}
	})

	t.Run("ConcurrentDuplicatesExecuteOnce", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, newStore(t), cfg, func(w http.ResponseWriter, r *http.Request, n int) {
			time.Sleep(50 * time.Millisecond)
			created(w, r, n)
		})
		key := newKey()
		var (
			mu      sync.Mutex
			replies []reply
		)
		race(t, func() error {
			r, err := s.send(ctx, call{keys: []string{key}, body: `{"amount":100}`})
			mu.Lock()
			replies = append(replies, r)
			mu.Unlock()
			return err
		})
		require.Equal(t, int32(1), s.executed.Load(), "exactly one of %d executes", Racers)
		// deferred too: a duplicate in one process waits for the first.
		require.Equal(t, int32(1), s.runs.Load(), "no duplicate's handler runs")
		var firstBody []byte
		for _, r := range replies {
			switch r.status {
			case http.StatusCreated:
				if firstBody == nil {
					firstBody = r.body
				}
				require.Equal(t, firstBody, r.body, "every 201 is the one execution's response")
			case http.StatusConflict:
				require.Equal(t, "1", r.header.Get("Retry-After"))
			default:
				t.Fatalf("unexpected status %d: %s", r.status, r.body)
			}
		}
		require.NotNil(t, firstBody)
	})

	if deferred {
		t.Run("RecordedAnswerBeatsARetriableFailure", func(t *testing.T) {
			t.Parallel()
			key := newKey()
			st := newStore(t)
			// Another process (a middleware of its own on the same store):
			// in this one a duplicate would wait for the first.
			other := newServer(t, st, cfg, created)
			s := newServer(t, st, cfg, func(w http.ResponseWriter, r *http.Request, n int) {
				// The first run's claim waits for its completion, so a
				// duplicate records the key meanwhile; then it fails.
				dup, err := other.send(ctx, call{keys: []string{key}, body: `{}`})
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, dup.status)
				w.WriteHeader(http.StatusServiceUnavailable)
			})
			first := s.do(t, call{keys: []string{key}, body: `{}`})
			require.Equal(t, http.StatusCreated, first.status, "the recorded answer, not the 503")
			require.Equal(t, "true", first.header.Get("Idempotent-Replayed"))
			require.Equal(t, "/v1/payments/p1", first.header.Get("Location"))
			require.Equal(t, int32(1), s.runs.Load())
			require.Equal(t, int32(1), other.runs.Load())
			require.Equal(t, int32(0), s.executed.Load())
			require.Equal(t, int32(1), other.executed.Load())
		})
	}

	if mode != idem.ModeLeased {
		t.Run("DuplicateWaitsAndReplays", func(t *testing.T) {
			t.Parallel()
			s := newServer(t, newStore(t), cfg, func(w http.ResponseWriter, r *http.Request, n int) {
				time.Sleep(300 * time.Millisecond)
				created(w, r, n)
			})
			key := newKey()
			firstDone := make(chan reply, 1)
			go func() { firstDone <- s.do(t, call{keys: []string{key}, body: `{}`}) }()
			waitUntil(t, func() bool { return s.runs.Load() == 1 })
			dup := s.do(t, call{keys: []string{key}, body: `{}`})
			first := <-firstDone
			require.Equal(t, http.StatusCreated, dup.status, "the transaction is the lock: the duplicate waits and replays")
			require.Equal(t, first.body, dup.body)
			require.Equal(t, int32(1), s.executed.Load())
			// deferred too: in one process the duplicate waits for the
			// first rather than racing it to the completion.
			require.Equal(t, "true", dup.header.Get("Idempotent-Replayed"))
		})

		// A response the replay cache does not keep is read from the store
		// by each duplicate, never met at a deferred claim.
		variants := map[string]func(store.Response) bool{"": nil}
		if cfg.ReplayCacheBytes > 0 {
			variants["AnswerNotCached"] = func(store.Response) bool { return false }
		}
		for name, cacheable := range variants {
			t.Run("DuplicatesInOneProcessWaitForTheFirst"+name, func(t *testing.T) {
				t.Parallel()
				c := cfg
				c.ReplayCacheableFunc = cacheable
				duplicatesWaitForTheFirst(t, newStore, c)
			})
		}
	}
}

// duplicatesWaitForTheFirst sends duplicates of a request while the
// first's handler is held, and lets the handler go once all of them have
// started: none may run beside it, not even deferred ones, and each
// answers from the first's record.
func duplicatesWaitForTheFirst(t *testing.T, newStore NewStoreFunc, cfg idem.Config) {
	const dups = 8
	ctx := context.Background()
	var started atomic.Int32
	cfg.StartFunc = func(ctx context.Context) (context.Context, func(idem.Event)) {
		started.Add(1)
		return ctx, nil
	}
	entered, release := make(chan struct{}), make(chan struct{})
	s := newServer(t, newStore(t), cfg, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			close(entered)
		}
		<-release
		created(w, r, n)
	})
	key := newKey()
	firstDone := make(chan reply, 1)
	go func() { firstDone <- s.do(t, call{keys: []string{key}, body: `{"amount":100}`}) }()
	<-entered
	type sent struct {
		reply
		err error
	}
	replies := make(chan sent, dups+1)
	for i := range dups + 1 {
		body := `{"amount":100}`
		if i == dups {
			body = `{"amount":101}`
		}
		go func() {
			r, err := s.send(ctx, call{keys: []string{key}, body: body})
			replies <- sent{r, err}
		}()
	}
	waitUntil(t, func() bool { return started.Load() == dups+2 })
	close(release)
	first := <-firstDone
	require.Equal(t, http.StatusCreated, first.status)
	reused := 0
	for range dups + 1 {
		r := <-replies
		require.NoError(t, r.err)
		if r.status == http.StatusUnprocessableEntity {
			require.Equal(t, "key-reused", problemType(t, r.reply))
			reused++
			continue
		}
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
		require.Equal(t, first.body, r.body, "every duplicate gets the first's bytes")
	}
	require.Equal(t, 1, reused, "the duplicate with another body is 422")
	require.Equal(t, int32(1), s.runs.Load(), "no duplicate's handler runs")
	require.Equal(t, int32(1), s.executed.Load())
}

// crashedClaim leaves a PROCESSING record as a process that died after its
// claim would, and returns its lock.
func crashedClaim(t *testing.T, s *server, key, body string, lockFor time.Duration) store.Attempt {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	fp, err := idem.NewFingerprint(req, []byte(body))
	require.NoError(t, err)
	c := store.Claim{Scope: "alice", Key: key, Fingerprint: fp, Token: uuid.NewString(), Lease: lockFor, TTL: ttl}
	_, inserted, err := s.store.Insert(context.Background(), c)
	require.NoError(t, err)
	require.True(t, inserted)
	return c.Attempt()
}
