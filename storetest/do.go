package storetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// RunDo drives Middleware.Do, the door for work that does not come over
// net/http (a gRPC method, a queue message), in one configuration.
func RunDo(t *testing.T, newStore NewStoreFunc, cfg idem.Config) {
	ctx := context.Background()
	skipUnservedMode(t, newStore, cfg)
	call := func(key, body string) idem.Call {
		h := sha256.Sum256([]byte(body))
		return idem.Call{
			Scope: "alice", Key: key, Method: "/payments.v1.Payments/Pay", Route: "/payments.v1.Payments/Pay",
			Fingerprint: store.Fingerprint{Version: idem.FingerprintVersion, Method: "RPC", Path: "/payments.v1.Payments/Pay", Hash: h[:]},
		}
	}
	// newDoer returns a Middleware on a fresh store and work that counts
	// its runs and the runs whose answers were kept.
	newDoer := func(t *testing.T, status int) (*idem.Middleware, func(context.Context) idem.Response, *atomic.Int32, *atomic.Int32) {
		var runs, executed atomic.Int32
		c := cfg
		c.ObserveFunc = func(e idem.Event) {
			if e.Outcome == idem.OutcomeExecuted {
				executed.Add(1)
			}
		}
		mw, err := idem.New(newStore(t), c)
		require.NoError(t, err)
		work := func(ctx context.Context) idem.Response {
			n := runs.Add(1)
			require.Equal(t, "order-1", idem.KeyFromContext(ctx)[:7])
			return idem.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: fmt.Appendf(nil, `{"run":%d}`, n)}
		}
		return mw, work, &runs, &executed
	}

	t.Run("ExecutesOnceThenReplays", func(t *testing.T) {
		t.Parallel()
		mw, work, runs, _ := newDoer(t, http.StatusCreated)
		first := mw.Do(ctx, call("order-1", "a"), work)
		require.Equal(t, idem.OutcomeExecuted, first.Outcome, "%v", first.Err)
		require.Equal(t, http.StatusCreated, first.Response.StatusCode)
		require.False(t, first.Replayed)
		again := mw.Do(ctx, call("order-1", "a"), work)
		require.Equal(t, idem.OutcomeReplayed, again.Outcome)
		require.True(t, again.Replayed)
		require.Equal(t, first.Response.Body, again.Response.Body)
		require.Equal(t, int32(1), runs.Load())
	})

	t.Run("KeyReusedWithAnotherRequestIs422", func(t *testing.T) {
		t.Parallel()
		mw, work, runs, _ := newDoer(t, http.StatusCreated)
		require.Equal(t, idem.OutcomeExecuted, mw.Do(ctx, call("order-1", "a"), work).Outcome)
		r := mw.Do(ctx, call("order-1", "b"), work)
		require.Equal(t, idem.OutcomeKeyReused, r.Outcome)
		require.Equal(t, http.StatusUnprocessableEntity, r.Response.StatusCode)
		require.Equal(t, "application/problem+json", r.Response.Header.Get("Content-Type"))
		require.Equal(t, int32(1), runs.Load())
	})

	t.Run("RetriableReplyFreesTheKey", func(t *testing.T) {
		t.Parallel()
		mw, work, runs, _ := newDoer(t, http.StatusServiceUnavailable)
		for range 2 {
			r := mw.Do(ctx, call("order-1", "a"), work)
			require.Equal(t, idem.OutcomeFailed, r.Outcome)
			require.Equal(t, http.StatusServiceUnavailable, r.Response.StatusCode)
		}
		require.Equal(t, int32(2), runs.Load(), "a retriable failure is not stored")
	})

	t.Run("NoScopeAndBadKeyStoreNothing", func(t *testing.T) {
		t.Parallel()
		mw, work, runs, _ := newDoer(t, http.StatusCreated)
		c := call("order-1", "a")
		c.Scope = ""
		require.Equal(t, idem.OutcomeScopeMissing, mw.Do(ctx, c, work).Outcome)
		bad := mw.Do(ctx, call("order-1\x00", "a"), work)
		require.Equal(t, idem.OutcomeInvalidKey, bad.Outcome)
		require.Equal(t, http.StatusBadRequest, bad.Response.StatusCode)
		require.Zero(t, runs.Load())
	})

	t.Run("ConcurrentDuplicatesTakeEffectOnce", func(t *testing.T) {
		t.Parallel()
		mw, work, _, executed := newDoer(t, http.StatusCreated)
		var (
			mu     sync.Mutex
			bodies = map[string]int{}
		)
		race(t, func() error {
			unavailable := 0
			for {
				r := mw.Do(ctx, call("order-1", "a"), work)
				switch {
				case r.Outcome == idem.OutcomeExecuted || r.Outcome == idem.OutcomeReplayed:
					mu.Lock()
					bodies[string(r.Response.Body)]++
					mu.Unlock()
					return nil
				case r.Outcome == idem.OutcomeInFlight:
					continue // as a client honouring Retry-After would, at once
				case r.Outcome == idem.OutcomeStoreUnavailable && r.Response.Header.Get("Retry-After") != "" && unavailable < 10:
					// A store that stayed busy past its bounded wait on a
					// loaded machine (SQLite's write lock): 503 with
					// Retry-After, which a client retries too.
					unavailable++
					continue
				default:
					return fmt.Errorf("outcome %s: %w", r.Outcome, r.Err)
				}
			}
		})
		require.Equal(t, int32(1), executed.Load())
		require.Len(t, bodies, 1, "every caller got the one answer")
	})
}
