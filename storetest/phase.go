package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// RunAdvancer checks store.Capabilities.RecoveryPoints and Unfinished, the
// rules model/payout.pml found: the recovery point and
// the life are read together, fenced by the token; a point commits with
// its transaction; an unfinished record keeps its key and its life past
// retention, is never swept, and is resumed by a re-acquire; a completed
// one starts a new life with no point. A store without the capability
// skips these tests.
func RunAdvancer(t *testing.T, newStore NewStoreFunc) {
	ctx := context.Background()
	phaser := func(t *testing.T) store.Store {
		t.Helper()
		s := newStore(t)
		skipWithout(t, s, s.Capabilities().RecoveryPoints, "RecoveryPoints")
		return s
	}
	// unfinished claims a key, advances it to point and releases it.
	unfinished := func(t *testing.T, s store.Store, lease, ttl time.Duration) store.Claim {
		t.Helper()
		c := claim("alice", newKey(), "body", lease, ttl)
		_, inserted, err := s.Insert(ctx, c)
		require.NoError(t, err)
		require.True(t, inserted)
		require.NoError(t, s.Advance(ctx, c.Attempt(), "debited", map[string]string{"bank": "bank-key-" + c.Key}))
		return c
	}

	t.Run("PhaseIsFencedByTheToken", func(t *testing.T) {
		t.Parallel()
		s := phaser(t)
		c := claim("alice", newKey(), "body", long, ttl)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		rec, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		ph, err := s.Progress(ctx, c.Attempt())
		require.NoError(t, err)
		require.Equal(t, "", ph.Point)
		require.True(t, ph.Life.Equal(rec.CreatedAt), "the life is the record's created_at")

		require.Empty(t, ph.ProviderKeys)

		require.NoError(t, s.Advance(ctx, c.Attempt(), "debited", map[string]string{"bank": "b1"}))
		ph, err = s.Progress(ctx, c.Attempt())
		require.NoError(t, err)
		require.Equal(t, "debited", ph.Point)
		require.Equal(t, map[string]string{"bank": "b1"}, ph.ProviderKeys)
		require.NoError(t, s.Advance(ctx, c.Attempt(), "sent", map[string]string{"bank": "b2", "fx": "f1"}))
		require.NoError(t, s.Advance(ctx, c.Attempt(), "sent", nil))
		ph, err = s.Progress(ctx, c.Attempt())
		require.NoError(t, err)
		require.Equal(t, map[string]string{"bank": "b1", "fx": "f1"}, ph.ProviderKeys,
			"a recorded key is kept, never replaced; new ones are added")
		rec, err = s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, "sent", rec.RecoveryPoint)

		other := c.Attempt()
		other.Token = claim("alice", c.Key, "body", long, ttl).Token
		_, err = s.Progress(ctx, other)
		require.ErrorIs(t, err, store.ErrNotHeld)
		require.ErrorIs(t, s.Advance(ctx, other, "paid", nil), store.ErrNotHeld)
		require.Error(t, s.Advance(ctx, c.Attempt(), "", nil), "no point means nothing happened: never set back")

		require.NoError(t, s.Fail(ctx, c.Attempt()))
		_, err = s.Progress(ctx, c.Attempt())
		require.ErrorIs(t, err, store.ErrNotHeld, "a released hold reads nothing")
	})

	t.Run("PointCommitsWithItsTransaction", func(t *testing.T) {
		t.Parallel()
		s := phaser(t)
		c := claim("alice", newKey(), "body", long, ttl)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		for _, commit := range []bool{false, true} {
			tx, err := s.Begin(ctx, store.TxOptions{})
			require.NoError(t, err)
			require.NoError(t, tx.Advance(ctx, c.Attempt(), "debited", map[string]string{"bank": "b1"}))
			if commit {
				require.NoError(t, tx.Commit(ctx))
			} else {
				require.NoError(t, tx.Rollback(ctx))
			}
			rec, err := s.Get(ctx, c.Scope, c.Key)
			require.NoError(t, err)
			want := ""
			if commit {
				want = "debited"
			}
			require.Equal(t, want, rec.RecoveryPoint)
		}
	})

	t.Run("UnfinishedKeepsItsKeyAndLifePastRetention", func(t *testing.T) {
		t.Parallel()
		s := phaser(t)
		c := unfinished(t, s, long, time.Millisecond)
		require.NoError(t, s.Fail(ctx, c.Attempt()))
		before, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		// A finished record made after it passes its retention: so has
		// the unfinished one, by the store's clock.
		waitExpired(t, s, ref(putRecord(t, s, "bob", store.StatusFailed, long, time.Millisecond)))

		rec, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.False(t, rec.Expired, "an unfinished record binds its key past retention")
		if s.Capabilities().Sweep {
			require.NotContains(t, deleteExpired(t, s, 100), ref(c), "the sweeper skips an unfinished record")
			_, err = s.Get(ctx, c.Scope, c.Key)
			require.NoError(t, err)
		}

		again := claim("alice", c.Key, "body", long, ttl)
		won, err := s.Reacquire(ctx, again, c.Token)
		require.NoError(t, err)
		require.True(t, won)
		ph, err := s.Progress(ctx, again.Attempt())
		require.NoError(t, err)
		require.Equal(t, "debited", ph.Point, "a re-acquire resumes the unfinished record")
		require.True(t, ph.Life.Equal(before.CreatedAt), "in the same life")
		require.Equal(t, map[string]string{"bank": "bank-key-" + c.Key}, ph.ProviderKeys, "with its provider keys")
		rec, err = s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, 2, rec.Attempts)
	})

	t.Run("CompletedStartsANewLifeWithNoPoint", func(t *testing.T) {
		t.Parallel()
		s := phaser(t)
		c := unfinished(t, s, long, time.Millisecond)
		require.NoError(t, s.Complete(ctx, c.Attempt(), store.Response{StatusCode: 201, Body: []byte("paid")}))
		before, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, "debited", before.RecoveryPoint)
		waitExpired(t, s, ref(c))

		again := claim("alice", c.Key, "body", long, ttl)
		won, err := s.Reacquire(ctx, again, c.Token)
		require.NoError(t, err)
		require.True(t, won)
		ph, err := s.Progress(ctx, again.Attempt())
		require.NoError(t, err)
		require.Equal(t, "", ph.Point)
		require.Empty(t, ph.ProviderKeys, "a new payout derives new keys")
		require.True(t, ph.Life.After(before.CreatedAt), "a new life: a new payout")
	})

	t.Run("ResumeUnfinishedTakesOnlyTheListedRecord", func(t *testing.T) {
		t.Parallel()
		s := phaser(t)
		skipWithout(t, s, s.Capabilities().Unfinished, "Unfinished")
		resume := func(c store.Claim, prevToken string) (store.Claim, bool) {
			t.Helper()
			next := claim(c.Scope, c.Key, "body", long, ttl)
			won, err := s.ResumeUnfinished(ctx, next, prevToken)
			require.NoError(t, err)
			return next, won
		}
		released := unfinished(t, s, long, ttl)
		require.NoError(t, s.Fail(ctx, released.Attempt()))
		before, err := s.Get(ctx, released.Scope, released.Key)
		require.NoError(t, err)
		_, won := resume(released, claim("alice", released.Key, "body", long, ttl).Token)
		require.False(t, won, "another token: not the record as listed")
		next, won := resume(released, released.Token)
		require.True(t, won)
		ph, err := s.Progress(ctx, next.Attempt())
		require.NoError(t, err)
		require.Equal(t, "debited", ph.Point)
		require.True(t, ph.Life.Equal(before.CreatedAt), "in the same life")
		require.Equal(t, map[string]string{"bank": "bank-key-" + released.Key}, ph.ProviderKeys)
		_, won = resume(released, released.Token)
		require.False(t, won, "taken over once")
		_, won = resume(next, next.Token)
		require.False(t, won, "a live hold is never taken over")

		// Finished by the attempt that was listed (its lease had run out),
		// then past its retention: not unfinished any more.
		done := unfinished(t, s, long, time.Millisecond)
		require.NoError(t, s.Complete(ctx, done.Attempt(), store.Response{StatusCode: 201, Body: []byte("paid")}))
		waitExpired(t, s, ref(done))
		_, won = resume(done, done.Token)
		require.False(t, won, "a finished record starts no new life for a completer")
		rec, err := s.Get(ctx, done.Scope, done.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, rec.Status)

		gone := claim("alice", newKey(), "body", long, ttl)
		_, won = resume(gone, gone.Token)
		require.False(t, won)
		_, err = s.Get(ctx, gone.Scope, gone.Key)
		require.ErrorIs(t, err, store.ErrNotFound, "no key is claimed afresh")

		plain := putRecord(t, s, "alice", store.StatusFailed, long, ttl)
		_, won = resume(plain, plain.Token)
		require.False(t, won, "no recovery point: nothing to resume")
	})

	t.Run("FindUnfinishedListsAbandonedOnes", func(t *testing.T) {
		t.Parallel()
		s := phaser(t)
		skipWithout(t, s, s.Capabilities().Unfinished, "Unfinished")
		released := unfinished(t, s, long, ttl)
		require.NoError(t, s.Fail(ctx, released.Attempt()))
		lapsed := unfinished(t, s, time.Millisecond, ttl)
		held := unfinished(t, s, long, ttl)
		done := unfinished(t, s, long, ttl)
		require.NoError(t, s.Complete(ctx, done.Attempt(), store.Response{StatusCode: 201, Body: []byte("paid")}))
		putRecord(t, s, "alice", store.StatusFailed, long, ttl) // no point: nothing to finish
		waitUntil(t, func() bool {
			rec, err := s.Get(ctx, lapsed.Scope, lapsed.Key)
			require.NoError(t, err)
			return !rec.LeaseLive
		})

		found, err := s.FindUnfinished(ctx, 100)
		require.NoError(t, err)
		got := map[string]store.Unfinished{}
		for _, u := range found {
			got[u.Key] = u
		}
		require.Len(t, got, 2, "%+v", found)
		for _, c := range []store.Claim{released, lapsed} {
			u, ok := got[c.Key]
			require.True(t, ok, "%s is listed", c.Key)
			require.Equal(t, "debited", u.Point)
			require.Equal(t, c.Token, u.Token)
			require.Equal(t, c.Fingerprint, u.Fingerprint)
		}
		require.NotContains(t, got, held.Key)
		one, err := s.FindUnfinished(ctx, 1)
		require.NoError(t, err)
		require.Len(t, one, 1)
	})
}
