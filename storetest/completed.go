package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// RunCompletedAt checks Record.CompletedAt: zero while PROCESSING or
// FAILED; set by every operation that stores a final response (Complete,
// on the store and in a transaction, the deferred claim's insert, an
// operator's ReplaceResponse), never before the record's claim; cleared by
// an operator's Release and by a re-acquire. Every time compared is the
// store's: the record's own ClaimedAt, never this host's clock.
func RunCompletedAt(t *testing.T, newStore NewStoreFunc) {
	ctx := context.Background()
	resp := store.Response{StatusCode: 201, Body: []byte("ok")}
	// completedAt reads c's record, COMPLETED, and returns when it was
	// completed, which is not before its claim.
	completedAt := func(t *testing.T, s store.Store, c store.Claim) time.Time {
		t.Helper()
		rec, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, rec.Status)
		require.False(t, rec.CompletedAt.IsZero(), "a COMPLETED record says when it was completed")
		require.False(t, rec.CompletedAt.Before(rec.ClaimedAt), "completed at %v, before its claim at %v", rec.CompletedAt, rec.ClaimedAt)
		return rec.CompletedAt
	}
	// notCompleted checks that c's record is in st and not completed.
	notCompleted := func(t *testing.T, s store.Store, c store.Claim, st store.Status) {
		t.Helper()
		rec, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, st, rec.Status)
		require.True(t, rec.CompletedAt.IsZero(), "a %s record has no completion time, got %v", st, rec.CompletedAt)
	}

	// reacquired takes c's record over with a retry, which holds it
	// PROCESSING, not completed, and returns the retry's claim.
	reacquired := func(t *testing.T, s store.Store, c store.Claim) store.Claim {
		t.Helper()
		retry := claim(c.Scope, c.Key, "body", long, ttl)
		won, err := s.Reacquire(ctx, retry, c.Token)
		require.NoError(t, err)
		require.True(t, won, "the retry takes the record over")
		notCompleted(t, s, retry, store.StatusProcessing)
		return retry
	}

	t.Run("SetByComplete", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := putRecord(t, s, "alice", store.StatusProcessing, long, ttl)
		notCompleted(t, s, c, store.StatusProcessing)
		require.NoError(t, s.Complete(ctx, c.Attempt(), resp))
		at := completedAt(t, s, c)
		if s.Capabilities().Search {
			recs, err := s.ListKeys(ctx, store.KeyQuery{Scope: c.Scope, Key: c.Key})
			require.NoError(t, err)
			require.Len(t, recs, 1)
			require.True(t, at.Equal(recs[0].CompletedAt), "the search reads it too: %v, Get %v", recs[0].CompletedAt, at)
		}
	})

	// inTx claims a key in a transaction with take, completes it and
	// commits, then checks the completion time.
	inTx := func(t *testing.T, s store.Store, take func(tx store.Tx, c store.Claim)) {
		t.Helper()
		tx, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		c := claim("alice", newKey(), "body", long, ttl)
		take(tx, c)
		completed, err := tx.CompleteAndCommit(ctx, c.Attempt(), resp)
		require.NoError(t, err)
		require.True(t, completed)
		completedAt(t, s, c)
	}

	t.Run("SetByCompleteAndCommit", func(t *testing.T) {
		t.Parallel()
		inTx(t, newStore(t), func(tx store.Tx, c store.Claim) {
			_, inserted, err := tx.Insert(ctx, c)
			require.NoError(t, err)
			require.True(t, inserted)
		})
	})

	t.Run("SetByDeferredClaim", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		skipWithout(t, s, s.Capabilities().DeferredClaim, "DeferredClaim")
		inTx(t, s, func(tx store.Tx, c store.Claim) { require.True(t, tx.DeferClaim(c)) })
	})

	t.Run("ZeroWhenFailedAndReacquired", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := putRecord(t, s, "alice", store.StatusFailed, long, ttl)
		notCompleted(t, s, c, store.StatusFailed)
		reacquired(t, s, c)
	})

	t.Run("ClearedByReacquirePastRetention", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := putRecord(t, s, "alice", store.StatusCompleted, long, 2*time.Second)
		completedAt(t, s, c)
		waitExpired(t, s, ref(c))
		reacquired(t, s, c) // a record past retention starts a new life
	})

	t.Run("ClearedByReleaseSetAgainByComplete", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		skipWithout(t, s, s.Capabilities().Resolve, "Resolve")
		c := putRecord(t, s, "alice", store.StatusCompleted, long, ttl)
		completedAt(t, s, c)
		require.NoError(t, s.Release(ctx, c.Attempt()))
		notCompleted(t, s, c, store.StatusFailed)
		retry := reacquired(t, s, c)
		require.NoError(t, s.Complete(ctx, retry.Attempt(), resp))
		completedAt(t, s, retry)
	})

	t.Run("SetAgainByReplaceResponse", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		skipWithout(t, s, s.Capabilities().Resolve, "Resolve")
		// Completed within its retention, replaced once the store's clock
		// has passed it: the replacement's time is the later one.
		const retention = 2 * time.Second
		c := putRecord(t, s, "alice", store.StatusCompleted, long, retention)
		first := completedAt(t, s, c)
		rec, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		if !first.Before(rec.ClaimedAt.Add(retention)) {
			t.Skipf("the completion took the whole retention (claimed %v, completed %v): nothing to tell apart", rec.ClaimedAt, first)
		}
		waitExpired(t, s, ref(c))
		require.NoError(t, s.ReplaceResponse(ctx, c.Attempt(), store.Response{StatusCode: 200, Body: []byte("settled")}))
		rec, err = s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.False(t, rec.CompletedAt.Before(rec.ClaimedAt.Add(retention)),
			"replaced after the retention from its claim at %v, completed at %v (first %v)", rec.ClaimedAt, rec.CompletedAt, first)
	})
}
