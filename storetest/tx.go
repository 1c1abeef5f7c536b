package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// RunTx checks the key operations inside a transaction: what atomic mode
// rests on. The claim commits or vanishes with the transaction, and a
// duplicate's claim waits for the holder, boundedly, then sees its outcome.
func RunTx(t *testing.T, newStore NewStoreFunc) {
	ctx := context.Background()

	t.Run("RollbackUndoesClaim", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		tx, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		c := claim("alice", newKey(), "body", long, ttl)
		_, inserted, err := tx.Insert(ctx, c)
		require.NoError(t, err)
		require.True(t, inserted)
		require.NoError(t, tx.Rollback(ctx))
		_, err = s.Get(ctx, c.Scope, c.Key)
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("CommitKeepsCompletion", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		tx, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		c := claim("alice", newKey(), "body", long, ttl)
		_, _, err = tx.Insert(ctx, c)
		require.NoError(t, err)
		require.NoError(t, tx.Complete(ctx, c.Attempt(), store.Response{StatusCode: 201, Body: []byte("ok")}))
		_, err = s.Get(ctx, c.Scope, c.Key)
		require.ErrorIs(t, err, store.ErrNotFound, "nothing is visible before commit")
		require.NoError(t, tx.Commit(ctx))
		got, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, got.Status)
		require.Equal(t, []byte("ok"), got.Response.Body)
		require.NoError(t, tx.Rollback(ctx), "rollback after commit is a no-op")
	})

	t.Run("DuplicateWaitsThenSeesCompletion", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		key := newKey()
		first, second := claim("alice", key, "body", long, ttl), claim("alice", key, "body", long, ttl)
		tx1, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		_, _, err = tx1.Insert(ctx, first)
		require.NoError(t, err)

		done := make(chan insertResult, 1)
		go func() { done <- insertInTx(ctx, s, second, time.Minute) }()
		select {
		case r := <-done:
			t.Fatalf("the duplicate did not wait for the holder: %+v", r)
		case <-time.After(300 * time.Millisecond):
		}
		require.NoError(t, tx1.Complete(ctx, first.Attempt(), store.Response{StatusCode: 201, Body: []byte("first")}))
		require.NoError(t, tx1.Commit(ctx))
		r := <-done
		require.NoError(t, r.err)
		require.False(t, r.inserted)
		require.Equal(t, store.StatusCompleted, r.rec.Status)
		require.Equal(t, []byte("first"), r.rec.Response.Body)
	})

	t.Run("DuplicateClaimsAfterHolderRollsBack", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		key := newKey()
		first, second := claim("alice", key, "body", long, ttl), claim("alice", key, "body", long, ttl)
		tx1, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		_, _, err = tx1.Insert(ctx, first)
		require.NoError(t, err)
		done := make(chan insertResult, 1)
		go func() { done <- insertInTx(ctx, s, second, time.Minute) }()
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, tx1.Rollback(ctx))
		r := <-done
		require.NoError(t, r.err)
		require.True(t, r.inserted, "the holder crashed: the duplicate takes the key")
	})

	t.Run("WaitIsBounded", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		key := newKey()
		first := claim("alice", key, "body", long, ttl)
		tx1, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		defer func() { _ = tx1.Rollback(ctx) }()
		_, _, err = tx1.Insert(ctx, first)
		require.NoError(t, err)
		start := time.Now()
		r := insertInTx(ctx, s, claim("alice", key, "body", long, ttl), 200*time.Millisecond)
		require.ErrorIs(t, r.err, store.ErrWaitTimeout)
		require.Less(t, time.Since(start), 4*time.Second, "the wait ends near its bound")
	})

	t.Run("ReacquireInTxWaitsForHolder", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := claim("alice", newKey(), "body", long, ttl)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		require.NoError(t, s.Fail(ctx, c.Attempt()))

		tx1, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		retry1 := claim("alice", c.Key, "body", long, ttl)
		won, err := tx1.Reacquire(ctx, retry1, c.Token)
		require.NoError(t, err)
		require.True(t, won)

		done := make(chan bool, 1)
		go func() {
			tx2, err := s.Begin(ctx, store.TxOptions{MaxWait: time.Minute})
			if err != nil {
				done <- true
				return
			}
			defer func() { _ = tx2.Rollback(ctx) }()
			won, err := tx2.Reacquire(ctx, claim("alice", c.Key, "body", long, ttl), c.Token)
			done <- won || err != nil
		}()
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, tx1.Complete(ctx, retry1.Attempt(), store.Response{StatusCode: 201}))
		require.NoError(t, tx1.Commit(ctx))
		require.False(t, <-done, "the second re-acquire waits, then finds the key completed")
	})
}

type insertResult struct {
	rec      *store.Record
	inserted bool
	err      error
}

// insertInTx claims in a transaction of its own and rolls it back.
func insertInTx(ctx context.Context, s store.Store, c store.Claim, wait time.Duration) insertResult {
	tx, err := s.Begin(ctx, store.TxOptions{MaxWait: wait})
	if err != nil {
		return insertResult{err: err}
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rec, inserted, err := tx.Insert(ctx, c)
	return insertResult{rec, inserted, err}
}
