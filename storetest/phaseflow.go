package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/completer"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// provider is an in-process downstream that deduplicates by key, for ever,
// and can be told to lose its answers (the call may or may not execute).
type provider struct {
	mu       sync.Mutex
	executed map[string]int // executions per key: must stay at most 1
	silent   bool           // execute, but lose the answer
}

// call sends key; ok is false when the caller got no answer.
func (p *provider) call(key string) (ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.executed[key] == 0 {
		p.executed[key]++
	}
	return !p.silent
}

func (p *provider) setSilent(v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.silent = v
}

func (p *provider) executions() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.executed {
		out[k] = v
	}
	return out
}

// RunPhaseFlow drives recovery points through the middleware in leased
// mode (idem.RecoveryPoint, idem.Advance, idem.ProviderKey, idem.Pending) and
// package completer, with model/payout.pml's flow over an in-process
// provider: debit with the point PointOutcomeUnknown, call, then finish;
// with no answer, pending; resumed by a retry or the completer, which send
// again with the same derived key. A store without recovery points skips
// these tests.
func RunPhaseFlow(t *testing.T, newStore NewStoreFunc) {
	ctx := context.Background()
	secret := []byte("0123456789abcdef0123456789abcdef")
	h := sha256.Sum256([]byte(`{"amount":100}`))
	call := idem.Call{
		Scope: "alice", Key: "payout-1", Method: "POST", Route: "/v1/payouts",
		Fingerprint: store.Fingerprint{Version: idem.FingerprintVersion, Method: "POST", Path: "/v1/payouts", Hash: h[:]},
	}
	type flow struct {
		s      store.Store
		mw     *idem.Middleware
		p      *provider
		debits atomic.Int32
		keys   sync.Map // provider keys derived, by attempt
		work   func(ctx context.Context) idem.Response
		resume completer.Resume
	}
	newFlow := func(t *testing.T, lease, retention time.Duration) *flow {
		t.Helper()
		s := newStore(t)
		skipWithout(t, s, s.Capabilities().RecoveryPoints, "RecoveryPoints")
		skipWithout(t, s, s.Capabilities().Unfinished, "Unfinished")
		f := &flow{s: s, p: &provider{executed: map[string]int{}}}
		mw, err := idem.New(s, idem.Config{Mode: idem.ModeLeased, LeaseDuration: lease, TTL: retention, ProviderKeySecret: secret})
		require.NoError(t, err)
		f.mw = mw
		f.work = func(ctx context.Context) idem.Response {
			point, err := idem.RecoveryPoint(ctx)
			if err != nil {
				return idem.Response{StatusCode: http.StatusServiceUnavailable}
			}
			pk, err := idem.ProviderKey(ctx, "bank")
			require.NoError(t, err)
			f.keys.Store(pk, true)
			if point == "" {
				err := idem.Advance(ctx, idem.PointOutcomeUnknown, func(context.Context) error {
					f.debits.Add(1)
					return nil
				})
				if err != nil {
					return idem.Response{StatusCode: http.StatusServiceUnavailable}
				}
			}
			// Resuming at PointOutcomeUnknown: this provider's send is its
			// look-up too (it deduplicates by key), and the key is the
			// same derived one.
			if !f.p.call(pk) {
				require.NoError(t, idem.Pending(ctx))
				return idem.Response{StatusCode: http.StatusAccepted, Body: []byte("pending")}
			}
			return idem.Response{StatusCode: http.StatusCreated, Body: []byte("paid " + pk)}
		}
		f.resume = func(ctx context.Context, u store.Unfinished) idem.Response {
			require.Equal(t, idem.PointOutcomeUnknown, u.Point)
			return f.work(ctx)
		}
		return f
	}
	// oneTransfer checks the books: one debit, one execution, one key.
	oneTransfer := func(t *testing.T, f *flow) {
		t.Helper()
		require.Equal(t, int32(1), f.debits.Load())
		ex := f.p.executions()
		require.Len(t, ex, 1, "one provider key for the payout: %v", ex)
		n := 0
		f.keys.Range(func(any, any) bool { n++; return true })
		require.Equal(t, 1, n, "every attempt derived the same provider key")
	}

	t.Run("PendingThenRetryResumes", func(t *testing.T) {
		t.Parallel()
		f := newFlow(t, long, ttl)
		f.p.setSilent(true)
		first := f.mw.Do(ctx, call, f.work)
		require.Equal(t, http.StatusAccepted, first.Response.StatusCode, "%v", first.Err)
		require.Equal(t, idem.OutcomeFailed, first.Outcome, "a pending answer is not stored")
		rec, err := f.s.Get(ctx, call.Scope, call.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusFailed, rec.Status)
		require.Equal(t, idem.PointOutcomeUnknown, rec.RecoveryPoint)

		f.p.setSilent(false)
		second := f.mw.Do(ctx, call, f.work)
		require.Equal(t, idem.OutcomeExecuted, second.Outcome, "%v", second.Err)
		require.Equal(t, http.StatusCreated, second.Response.StatusCode)
		third := f.mw.Do(ctx, call, f.work)
		require.True(t, third.Replayed)
		require.Equal(t, second.Response.Body, third.Response.Body)
		oneTransfer(t, f)
	})

	t.Run("CompleterFinishesAPendingOne", func(t *testing.T) {
		t.Parallel()
		f := newFlow(t, long, ttl)
		f.p.setSilent(true)
		first := f.mw.Do(ctx, call, f.work)
		require.Equal(t, http.StatusAccepted, first.Response.StatusCode, "%v", first.Err)
		c, err := completer.New(f.mw, f.s, f.resume, completer.Config{})
		require.NoError(t, err)

		r, err := c.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, r.Found)
		require.Equal(t, 0, r.Finished, "still no answer: still pending")
		f.p.setSilent(false)
		r, err = c.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, r.Finished)
		r, err = c.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 0, r.Found, "nothing left to finish")

		retry := f.mw.Do(ctx, call, f.work)
		require.True(t, retry.Replayed, "the client's retry gets the completer's answer")
		require.Equal(t, http.StatusCreated, retry.Response.StatusCode)
		oneTransfer(t, f)
	})

	t.Run("CompleterTakesOverAKilledAttempt", func(t *testing.T) {
		t.Parallel()
		f := newFlow(t, long, ttl)
		// An attempt claims the key, commits its debit with the point
		// PointOutcomeUnknown, calls the provider, and dies: its lease
		// is never renewed, nor released.
		c := store.Claim{Scope: call.Scope, Key: call.Key, Fingerprint: call.Fingerprint, Token: uuid.NewString(), Lease: long, TTL: ttl}
		_, inserted, err := f.s.Insert(ctx, c)
		require.NoError(t, err)
		require.True(t, inserted)
		require.NoError(t, f.s.Advance(ctx, c.Attempt(), idem.PointOutcomeUnknown, nil))
		f.debits.Add(1)
		comp, err := completer.New(f.mw, f.s, f.resume, completer.Config{})
		require.NoError(t, err)
		r, err := comp.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 0, r.Found, "a live lease is never taken over")
		// Its lease runs out: cut short here, so that the check above
		// never races a short lease on a loaded machine.
		require.NoError(t, f.s.Renew(ctx, c.Attempt(), time.Millisecond))
		waitUntil(t, func() bool {
			rec, err := f.s.Get(ctx, c.Scope, c.Key)
			require.NoError(t, err)
			return !rec.LeaseLive
		})
		r, err = comp.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, r.Finished)
		oneTransfer(t, f)
		_, err = f.s.Progress(ctx, c.Attempt())
		require.ErrorIs(t, err, store.ErrNotHeld, "the dead attempt is fenced out")
	})

	t.Run("CompleterResumesOnlyTheRecordItListed", func(t *testing.T) {
		t.Parallel()
		for _, swept := range []bool{false, true} {
			// Finished records bind their key for a millisecond.
			f := newFlow(t, long, time.Millisecond)
			f.p.setSilent(true)
			first := f.mw.Do(ctx, call, f.work)
			require.Equal(t, http.StatusAccepted, first.Response.StatusCode, "%v", first.Err)
			f.p.setSilent(false)
			// Between the completer's listing and its take-over, the
			// client's retry finishes the payout, its retention passes,
			// and the sweeper deletes it (or not yet).
			finder := staleFinder{Store: f.s, after: func() {
				retry := f.mw.Do(ctx, call, f.work)
				require.Equal(t, idem.OutcomeExecuted, retry.Outcome, "%v", retry.Err)
				waitExpired(t, f.s, store.KeyRef{Scope: call.Scope, Key: call.Key})
				if swept {
					sweep(t, f.s, store.KeyRef{Scope: call.Scope, Key: call.Key})
				}
			}}
			c, err := completer.New(f.mw, finder, f.resume, completer.Config{})
			require.NoError(t, err)
			r, err := c.RunOnce(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, r.Found)
			require.Equal(t, 0, r.Finished)
			rec, err := f.s.Get(ctx, call.Scope, call.Key)
			if swept {
				require.ErrorIs(t, err, store.ErrNotFound, "the completer claims no key afresh: %+v", rec)
			} else {
				require.NoError(t, err)
				require.Equal(t, store.StatusCompleted, rec.Status, "the finished payout is left as it was, past its retention")
				require.True(t, rec.Expired)
			}
			oneTransfer(t, f)
		}
	})

	t.Run("UnfinishedPastRetentionIsBoundAndResumed", func(t *testing.T) {
		t.Parallel()
		f := newFlow(t, long, time.Millisecond)
		f.p.setSilent(true)
		first := f.mw.Do(ctx, call, f.work)
		require.Equal(t, http.StatusAccepted, first.Response.StatusCode, "%v", first.Err)
		// A finished record made after it passes its retention: so has
		// the pending payout, by the store's clock.
		waitExpired(t, f.s, ref(putRecord(t, f.s, "bob", store.StatusFailed, long, time.Millisecond)))
		if f.s.Capabilities().Sweep {
			deleteExpired(t, f.s, 100)
		}

		other := call
		h := sha256.Sum256([]byte(`{"amount":999}`))
		other.Fingerprint.Hash = h[:]
		res := f.mw.Do(ctx, other, func(context.Context) idem.Response {
			t.Error("another body must not run")
			return idem.Response{StatusCode: http.StatusCreated}
		})
		require.Equal(t, idem.OutcomeKeyReused, res.Outcome, "the pending payout still binds its key: %v", res.Err)

		f.p.setSilent(false)
		c, err := completer.New(f.mw, f.s, f.resume, completer.Config{})
		require.NoError(t, err)
		r, err := c.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, r.Finished, "the completer resumes it past its retention")
		rec, err := f.s.Get(ctx, call.Scope, call.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, rec.Status)
		require.Equal(t, http.StatusCreated, rec.Response.StatusCode)
		oneTransfer(t, f)
	})

	t.Run("RotatedSecretResumesWithTheRecordedKey", func(t *testing.T) {
		t.Parallel()
		for _, recovery := range []string{"retry", "completer"} {
			f := newFlow(t, long, ttl)
			f.p.setSilent(true)
			first := f.mw.Do(ctx, call, f.work)
			require.Equal(t, http.StatusAccepted, first.Response.StatusCode, "%v", first.Err)
			f.p.setSilent(false)
			// The service restarts with another secret while the payout
			// is pending.
			rotated, err := idem.New(f.s, idem.Config{Mode: idem.ModeLeased, LeaseDuration: long,
				ProviderKeySecret: []byte("the next secret, just as long")})
			require.NoError(t, err)
			switch recovery {
			case "retry":
				res := rotated.Do(ctx, call, f.work)
				require.Equal(t, idem.OutcomeExecuted, res.Outcome, "%v", res.Err)
			case "completer":
				c, err := completer.New(rotated, f.s, f.resume, completer.Config{})
				require.NoError(t, err)
				r, err := c.RunOnce(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, r.Finished)
			}
			oneTransfer(t, f)
		}
	})

	// acrossRotation runs derive as an attempt under the secret, then as
	// the next under another, and returns the provider keys they got. Each
	// attempt is killed before its last phase: released, nothing stored.
	acrossRotation := func(t *testing.T, derive func(ctx context.Context, point string) string) []string {
		f := newFlow(t, long, ttl)
		rotated, err := idem.New(f.s, idem.Config{Mode: idem.ModeLeased, LeaseDuration: long,
			ProviderKeySecret: []byte("the next secret, just as long")})
		require.NoError(t, err)
		var keys []string
		for _, mw := range []*idem.Middleware{f.mw, rotated} {
			res := mw.Do(ctx, call, func(ctx context.Context) idem.Response {
				point, err := idem.RecoveryPoint(ctx)
				require.NoError(t, err)
				keys = append(keys, derive(ctx, point))
				return idem.Response{StatusCode: http.StatusServiceUnavailable}
			})
			require.Equal(t, idem.OutcomeFailed, res.Outcome, "%v", res.Err)
		}
		return keys
	}

	t.Run("KeyDerivedAfterAPhaseIsRecordedAtOnce", func(t *testing.T) {
		t.Parallel()
		keys := acrossRotation(t, func(ctx context.Context, point string) string {
			if point == "" {
				require.NoError(t, idem.Advance(ctx, "debited", nil))
			}
			pk, err := idem.ProviderKey(ctx, "fx")
			require.NoError(t, err)
			return pk
		})
		require.Equal(t, keys[0], keys[1], "the key derived after the first phase was recorded before it was returned")
	})

	t.Run("KeyDerivedInsideALaterPhaseIsRecordedWithIt", func(t *testing.T) {
		t.Parallel()
		keys := acrossRotation(t, func(ctx context.Context, point string) (pk string) {
			if point != "" {
				pk, err := idem.ProviderKey(ctx, "fx")
				require.NoError(t, err)
				return pk
			}
			require.NoError(t, idem.Advance(ctx, "debited", nil))
			// This phase holds the record's row while fn runs: the key
			// goes with it, not with a phase of its own that would wait
			// for that row.
			require.NoError(t, idem.Advance(ctx, "sent", func(ctx context.Context) (err error) {
				pk, err = idem.ProviderKey(ctx, "fx")
				return err
			}))
			return pk
		})
		require.Equal(t, keys[0], keys[1], "the key derived inside a phase was recorded with it")
	})

	t.Run("ProviderKeyIsPerLifeAndSecret", func(t *testing.T) {
		t.Parallel()
		f := newFlow(t, long, ttl)
		derive := func(mw *idem.Middleware, key string) string {
			var pk string
			c := call
			c.Key = key
			res := mw.Do(ctx, c, func(ctx context.Context) idem.Response {
				var err error
				pk, err = idem.ProviderKey(ctx, "bank")
				require.NoError(t, err)
				// Not final: the key is freed for the next derivation.
				return idem.Response{StatusCode: http.StatusServiceUnavailable}
			})
			require.Equal(t, idem.OutcomeFailed, res.Outcome, "%v", res.Err)
			return pk
		}
		a := derive(f.mw, "payout-7f3a9c")
		require.Equal(t, a, derive(f.mw, "payout-7f3a9c"), "stable across attempts")
		require.NotEqual(t, a, derive(f.mw, "payout-7f3a9d"))
		require.NotContains(t, a, "payout-7f3a9c", "not the client's key")
		other, err := idem.New(f.s, idem.Config{Mode: idem.ModeLeased, ProviderKeySecret: []byte("another secret, just as long")})
		require.NoError(t, err)
		require.NotEqual(t, a, derive(other, "payout-7f3a9c"), "another secret, another key")

		nosecret, err := idem.New(f.s, idem.Config{Mode: idem.ModeLeased})
		require.NoError(t, err)
		res := nosecret.Do(ctx, call, func(ctx context.Context) idem.Response {
			_, err := idem.ProviderKey(ctx, "bank")
			require.ErrorIs(t, err, idem.ErrNoProviderKeySecret)
			return idem.Response{StatusCode: http.StatusServiceUnavailable}
		})
		require.Equal(t, idem.OutcomeFailed, res.Outcome)
		atomicMW, err := idem.New(f.s, idem.Config{Mode: idem.ModeAtomic, ProviderKeySecret: secret})
		require.NoError(t, err)
		res = atomicMW.Do(ctx, call, func(ctx context.Context) idem.Response {
			_, err := idem.RecoveryPoint(ctx)
			require.ErrorIs(t, err, idem.ErrNoRecoveryPoints)
			return idem.Response{StatusCode: http.StatusServiceUnavailable}
		})
		require.Equal(t, idem.OutcomeFailed, res.Outcome)
	})

	t.Run("AFailedPhaseCommitsNothing", func(t *testing.T) {
		t.Parallel()
		f := newFlow(t, long, ttl)
		res := f.mw.Do(ctx, call, func(ctx context.Context) idem.Response {
			err := idem.Advance(ctx, "debited", func(context.Context) error { return context.Canceled })
			require.ErrorIs(t, err, context.Canceled)
			point, err := idem.RecoveryPoint(ctx)
			require.NoError(t, err)
			require.Equal(t, "", point)
			require.Error(t, idem.Pending(ctx), "nothing to resume")
			require.Error(t, idem.Advance(ctx, "", nil))
			return idem.Response{StatusCode: http.StatusServiceUnavailable}
		})
		require.Equal(t, idem.OutcomeFailed, res.Outcome)
		rec, err := f.s.Get(ctx, call.Scope, call.Key)
		require.NoError(t, err)
		require.Equal(t, "", rec.RecoveryPoint)
	})
}

// staleFinder lists what the store lists, then runs after: what happens
// between a completer's listing and its take-over.
type staleFinder struct {
	store.Store
	after func()
}

func (f staleFinder) FindUnfinished(ctx context.Context, limit int) ([]store.Unfinished, error) {
	found, err := f.Store.FindUnfinished(ctx, limit)
	f.after()
	return found, err
}

// sweep runs the store's DeleteExpired until k is gone.
func sweep(t *testing.T, s store.Store, k store.KeyRef) {
	t.Helper()
	skipWithout(t, s, s.Capabilities().Sweep, "Sweep")
	waitUntil(t, func() bool {
		_, err := s.DeleteExpired(context.Background(), 100)
		if errors.Is(err, store.ErrSweepBusy) {
			return false
		}
		require.NoError(t, err)
		_, err = s.Get(context.Background(), k.Scope, k.Key)
		return errors.Is(err, store.ErrNotFound)
	})
}
