package memstore_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.RunContract(t, func(*testing.T) store.Store { return memstore.New() })
}

func newClaim(key string, lease, ttl time.Duration) store.Claim {
	h := sha256.Sum256([]byte("body"))
	return store.Claim{
		Scope: "alice", Key: key, Token: uuid.NewString(), Lease: lease, TTL: ttl,
		Fingerprint: store.Fingerprint{Version: 1, Method: "POST", Path: "/v1/payments", Hash: h[:]},
	}
}

// The store's clock is time.Now: in a bubble, the bubble's, so a lease and
// a retention run out when the fake clock says so, and not a moment before.
// The operator's search judges a lease by it too, a count says when it
// counted, and the audit log stamps each entry with it.
func TestClock(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := memstore.New()
		c := newClaim("k", 30*time.Second, time.Hour)
		_, inserted, err := s.Insert(ctx, c)
		require.NoError(t, err)
		require.True(t, inserted)

		time.Sleep(30*time.Second - time.Nanosecond)
		rec, err := s.Get(ctx, "alice", "k")
		require.NoError(t, err)
		require.True(t, rec.LeaseLive)
		won, err := s.Reacquire(ctx, newClaim("k", time.Minute, time.Hour), c.Token)
		require.NoError(t, err)
		require.False(t, won, "the lease is live a nanosecond before it ends")

		time.Sleep(time.Nanosecond)
		rec, err = s.Get(ctx, "alice", "k")
		require.NoError(t, err)
		require.False(t, rec.LeaseLive)
		found, err := s.ListKeys(ctx, store.KeyQuery{Status: store.StatusProcessing})
		require.NoError(t, err)
		require.Len(t, found, 1)
		require.False(t, found[0].LeaseLive)
		counts, err := s.CountKeys(ctx)
		require.NoError(t, err)
		require.Equal(t, time.Now(), counts.Now)
		require.Equal(t, time.Now().Add(-30*time.Second), counts.OldestProcessing)
		require.NoError(t, s.AppendAudit(ctx, store.AuditEntry{Actor: "ann", Action: "release", Reason: "INC-1"}))
		logged, err := s.ListAudit(ctx, store.KeyRef{}, 1)
		require.NoError(t, err)
		require.Len(t, logged, 1)
		require.Equal(t, time.Now(), logged[0].At)
		require.NoError(t, s.Complete(ctx, c.Attempt(), store.Response{StatusCode: 201}))

		time.Sleep(time.Hour - 30*time.Second)
		rec, err = s.Get(ctx, "alice", "k")
		require.NoError(t, err)
		require.True(t, rec.Expired, "an hour after its creation")
		deleted, err := s.DeleteExpired(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, []store.KeyRef{{Scope: "alice", Key: "k"}}, deleted)
	})
}

// A transaction that claims a key another transaction holds waits on a
// channel: durably blocked, so synctest.Wait returns while it waits, and
// the fake clock bounds the wait exactly.
func TestWaitOnAKeyIsDurablyBlocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	insert := func(s *memstore.Store, c store.Claim, wait time.Duration) (chan error, chan bool) {
		errs, inserted := make(chan error, 1), make(chan bool, 1)
		go func() {
			tx, err := s.Begin(ctx, store.TxOptions{MaxWait: wait})
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, ok, err := tx.Insert(ctx, c)
			inserted <- ok
			errs <- err
		}()
		return errs, inserted
	}
	hold := func(s *memstore.Store, c store.Claim) store.Tx {
		tx, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		_, inserted, err := tx.Insert(ctx, c)
		require.NoError(t, err)
		require.True(t, inserted)
		return tx
	}

	t.Run("UntilTheHolderEnds", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := memstore.New()
			first := newClaim("k", time.Minute, time.Hour)
			tx := hold(s, first)
			errs, inserted := insert(s, newClaim("k", time.Minute, time.Hour), time.Hour)
			synctest.Wait()
			select {
			case err := <-errs:
				t.Fatalf("the duplicate did not wait: %v", err)
			default:
			}
			require.NoError(t, tx.Rollback(ctx))
			require.NoError(t, <-errs)
			require.True(t, <-inserted, "the holder rolled back: the duplicate takes the key")
		})
	})

	t.Run("AtMostItsBound", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			s := memstore.New()
			tx := hold(s, newClaim("k", time.Minute, time.Hour))
			defer func() { _ = tx.Rollback(ctx) }()
			start := time.Now()
			errs, _ := insert(s, newClaim("k", time.Minute, time.Hour), 3*time.Second)
			require.ErrorIs(t, <-errs, store.ErrWaitTimeout)
			require.Equal(t, 3*time.Second, time.Since(start))
		})
	})
}
