package idem_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"
)

// The lease of a leased-mode request, on memstore under testing/synctest:
// the bubble's fake clock is the store's and the middleware's, so a lease
// runs out, a renewal falls due and a maximum life passes at the very
// instant the configuration says, with no real time spent and nothing
// left to a loaded machine's timing.

// payment is the call every lease test makes, for key.
func payment(key string) idem.Call {
	h := sha256.Sum256([]byte(`{"amount":100}`))
	return idem.Call{
		Scope: "alice", Key: key, Method: "POST", Route: "/v1/payments",
		Fingerprint: store.Fingerprint{Version: idem.FingerprintVersion, Method: "POST", Path: "/v1/payments", Hash: h[:]},
	}
}

// paid is a final answer that names the run that gave it.
func paid(n int32) idem.Response {
	return idem.Response{StatusCode: http.StatusCreated, Body: fmt.Appendf(nil, `{"payment":"p%d"}`, n)}
}

// unrenewableStore is a memstore whose lease renewals fail, as they
// would against a database that cannot be reached.
type unrenewableStore struct{ *memstore.Store }

func unrenewable() unrenewableStore { return unrenewableStore{memstore.New()} }

func (unrenewableStore) Renew(context.Context, store.Attempt, time.Duration) error {
	return errors.New("connection refused")
}

// leased returns a leased-mode middleware on s with a 30s lease, renewed
// every 10s, and the Events it observed.
func leased(t *testing.T, s store.Store, maxLife time.Duration) (*idem.Middleware, chan idem.Event) {
	t.Helper()
	events := make(chan idem.Event, 16)
	mw, err := idem.New(s, idem.Config{
		Mode: idem.ModeLeased, LeaseDuration: 30 * time.Second, MaxLeaseLife: maxLife,
		ObserveFunc: func(e idem.Event) { events <- e },
	})
	require.NoError(t, err)
	return mw, events
}

// start runs work for key in the background; its Result arrives on the
// channel returned.
func start(mw *idem.Middleware, key string, work func(context.Context) idem.Response) chan idem.Result {
	done := make(chan idem.Result, 1)
	go func() { done <- mw.Do(context.Background(), payment(key), work) }()
	return done
}

// notRun is work that must not run.
func notRun(t *testing.T) func(context.Context) idem.Response {
	return func(context.Context) idem.Response {
		t.Error("a duplicate ran while the key was held")
		return idem.Response{StatusCode: http.StatusInternalServerError}
	}
}

// requireLeaseLost checks a Result the attempt that lost its hold got: 409
// lease-lost, with a Retry-After that sends the client to the holder.
func requireLeaseLost(t *testing.T, r idem.Result) {
	t.Helper()
	require.Equal(t, idem.OutcomeLeaseLost, r.Outcome, "%v", r.Err)
	require.Equal(t, http.StatusConflict, r.Response.StatusCode)
	require.Contains(t, string(r.Response.Body), string(idem.ProblemLeaseLost))
	require.Equal(t, "1", r.Response.Header.Get("Retry-After"))
}

func TestLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RenewalKeepsASlowHandlersKey", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := memstore.New()
			mw, events := leased(t, s, time.Hour)
			done := start(mw, "k", func(context.Context) idem.Response {
				time.Sleep(5 * time.Minute) // ten leases long
				return paid(1)
			})
			time.Sleep(4 * time.Minute)
			rec, err := s.Get(ctx, "alice", "k")
			require.NoError(t, err)
			require.True(t, rec.LeaseLive, "renewed: the lease outlives its first 30s eight times over")
			dup := mw.Do(ctx, payment("k"), notRun(t))
			require.Equal(t, idem.OutcomeInFlight, dup.Outcome, "%v", dup.Err)
			require.Equal(t, http.StatusConflict, dup.Response.StatusCode)

			r := <-done
			require.Equal(t, idem.OutcomeExecuted, r.Outcome, "%v", r.Err)
			<-events // the duplicate's
			require.GreaterOrEqual(t, (<-events).Renewals, 29, "one renewal every 10s of the handler's 5 minutes")
		})
	})

	t.Run("LostRenewalCancelsTheHandler", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := memstore.New()
			mw, _ := leased(t, s, time.Hour)
			running, cause := make(chan struct{}), make(chan error, 1)
			begun := time.Now()
			done := start(mw, "k", func(ctx context.Context) idem.Response {
				close(running)
				<-ctx.Done() // a bank call, cut short when the hold is found lost
				cause <- context.Cause(ctx)
				return idem.Response{StatusCode: http.StatusBadGateway}
			})
			<-running
			// Another attempt takes the key over, as after a pause longer
			// than the lease.
			rec, err := s.Get(ctx, "alice", "k")
			require.NoError(t, err)
			require.NoError(t, s.Fail(ctx, store.Attempt{Scope: "alice", Key: "k", Token: rec.Token}))
			thief := store.Claim{Scope: "alice", Key: "k", Fingerprint: rec.Fingerprint, Token: uuid.NewString(), Lease: time.Hour, TTL: time.Hour}
			won, err := s.Reacquire(ctx, thief, rec.Token)
			require.NoError(t, err)
			require.True(t, won)

			require.ErrorIs(t, <-cause, store.ErrNotHeld)
			require.Equal(t, 10*time.Second, time.Since(begun), "found by the first renewal, a third of a lease in")
			requireLeaseLost(t, <-done)
			rec, err = s.Get(ctx, "alice", "k")
			require.NoError(t, err)
			require.Equal(t, thief.Token, rec.Token, "the holder's record is left alone")
			require.Equal(t, store.StatusProcessing, rec.Status)
		})
	})

	t.Run("FailedRenewalsLapseTheLease", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			mw, _ := leased(t, unrenewable(), time.Hour)
			cause := make(chan error, 1)
			begun := time.Now()
			done := start(mw, "k", func(ctx context.Context) idem.Response {
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return idem.Response{StatusCode: http.StatusBadGateway}
			})
			require.ErrorIs(t, <-cause, idem.ErrLeaseExpired)
			require.Equal(t, 30*time.Second, time.Since(begun), "a whole lease with no renewal")
			requireLeaseLost(t, <-done)
		})
	})

	t.Run("MaxLifeEndsAHungHandler", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := memstore.New()
			mw, _ := leased(t, s, 2*time.Minute)
			var runs atomic.Int32
			hang, cause := make(chan struct{}), make(chan error, 1)
			begun := time.Now()
			work := func(ctx context.Context) idem.Response {
				n := runs.Add(1)
				if n == 1 {
					// A bank call with no timeout: it ignores its context.
					go func() {
						<-ctx.Done()
						cause <- context.Cause(ctx)
					}()
					<-hang
				}
				return paid(n)
			}
			first := start(mw, "k", work)
			require.ErrorIs(t, <-cause, idem.ErrLeaseMaxLife)
			require.Equal(t, 2*time.Minute, time.Since(begun))

			// Renewal has stopped; the last lease still holds the key.
			dup := mw.Do(ctx, payment("k"), notRun(t))
			require.Equal(t, idem.OutcomeInFlight, dup.Outcome, "%v", dup.Err)
			rec, err := s.Get(ctx, "alice", "k")
			require.NoError(t, err)
			time.Sleep(time.Until(rec.LeaseExpiresAt))
			retry := mw.Do(ctx, payment("k"), work)
			require.Equal(t, idem.OutcomeExecuted, retry.Outcome, "%v", retry.Err)
			require.Equal(t, `{"payment":"p2"}`, string(retry.Response.Body))

			close(hang) // the hung handler answers at last: too late to count
			requireLeaseLost(t, <-first)
			again := mw.Do(ctx, payment("k"), notRun(t))
			require.True(t, again.Replayed)
			require.Equal(t, retry.Response.Body, again.Response.Body, "the record keeps the retry's answer")
		})
	})

	t.Run("StaleCompletionIsFencedOut", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := unrenewable()
			mw, _ := leased(t, s, time.Hour)
			var runs atomic.Int32
			proceed := make(chan struct{})
			work := func(ctx context.Context) idem.Response {
				n := runs.Add(1)
				if n == 1 {
					<-proceed // paused past its lease, it never looks at its context
				}
				return paid(n)
			}
			first := start(mw, "k", work)
			time.Sleep(30 * time.Second) // the lease runs out, unrenewed
			retry := mw.Do(ctx, payment("k"), work)
			require.Equal(t, idem.OutcomeExecuted, retry.Outcome, "%v", retry.Err)

			close(proceed) // the first attempt completes: its token no longer holds the key
			requireLeaseLost(t, <-first)
			rec, err := s.Get(ctx, "alice", "k")
			require.NoError(t, err)
			require.Equal(t, store.StatusCompleted, rec.Status)
			require.Equal(t, `{"payment":"p2"}`, string(rec.Response.Body), "the stale attempt wrote nothing")
			require.Equal(t, 2, rec.Attempts)
		})
	})
}
