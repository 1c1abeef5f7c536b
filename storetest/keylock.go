package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// RunKeyLock checks the key's lock (store.Capabilities.KeyLock), the claim
// of a claim-first request on such a store: a transaction that locks a key
// makes another that locks it wait, boundedly, until it ends, and the
// read after the lock then sees what the first one recorded. Other keys,
// and the same key in another scope, never wait.
func RunKeyLock(t *testing.T, newStore NewStoreFunc) {
	ctx := context.Background()
	// lockAndGet locks ref in a new transaction waiting at most wait, and
	// reads its record there.
	lockAndGet := func(s store.Store, ref store.KeyRef, wait time.Duration) (store.Tx, *store.Record, error) {
		tx, err := s.Begin(ctx, store.TxOptions{MaxWait: wait, LockKey: ref})
		if err != nil {
			return nil, nil, err
		}
		rec, err := tx.Get(ctx, ref.Scope, ref.Key)
		return tx, rec, err
	}
	// locked returns a store whose key ref a transaction has locked, and
	// that transaction.
	locked := func(t *testing.T) (store.Store, store.KeyRef, store.Tx) {
		s := newStore(t)
		skipWithout(t, s, s.Capabilities().KeyLock, "KeyLock")
		ref := store.KeyRef{Scope: "alice", Key: newKey()}
		tx, _, err := lockAndGet(s, ref, time.Minute)
		require.ErrorIs(t, err, store.ErrNotFound)
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		return s, ref, tx
	}

	t.Run("DuplicateWaitsThenSeesTheRecord", func(t *testing.T) {
		t.Parallel()
		s, ref, tx1 := locked(t)
		first := claim(ref.Scope, ref.Key, "body", long, ttl)
		require.True(t, tx1.DeferClaim(first))

		type got struct {
			rec *store.Record
			err error
		}
		done := make(chan got, 1)
		go func() {
			tx2, rec, err := lockAndGet(s, ref, time.Minute)
			if tx2 != nil {
				_ = tx2.Rollback(ctx)
			}
			done <- got{rec, err}
		}()
		select {
		case r := <-done:
			t.Fatalf("the duplicate did not wait for the lock: %+v", r)
		case <-time.After(300 * time.Millisecond):
		}
		completed, err := tx1.CompleteAndCommit(ctx, first.Attempt(), store.Response{StatusCode: 201, Body: []byte("first")})
		require.NoError(t, err)
		require.True(t, completed)
		r := <-done
		require.NoError(t, r.err, "the read after the lock sees the record committed meanwhile")
		require.Equal(t, store.StatusCompleted, r.rec.Status)
		require.Equal(t, []byte("first"), r.rec.Response.Body)
	})

	t.Run("WaitIsBounded", func(t *testing.T) {
		t.Parallel()
		s, ref, _ := locked(t)
		tx2, _, err := lockAndGet(s, ref, 200*time.Millisecond)
		require.ErrorIs(t, err, store.ErrWaitTimeout)
		require.NoError(t, tx2.Rollback(ctx))
	})

	t.Run("RollbackReleasesTheLock", func(t *testing.T) {
		t.Parallel()
		s, ref, tx1 := locked(t)
		require.NoError(t, tx1.Rollback(ctx))
		tx2, _, err := lockAndGet(s, ref, time.Minute)
		require.ErrorIs(t, err, store.ErrNotFound, "the lock is free and the key unrecorded")
		require.NoError(t, tx2.Rollback(ctx))
	})

	t.Run("OtherKeysDoNotWait", func(t *testing.T) {
		t.Parallel()
		s, ref, _ := locked(t)
		for _, other := range []store.KeyRef{{Scope: ref.Scope, Key: newKey()}, {Scope: "bob", Key: ref.Key}} {
			tx2, _, err := lockAndGet(s, other, 200*time.Millisecond)
			require.ErrorIs(t, err, store.ErrNotFound, "%+v does not wait for %+v", other, ref)
			require.NoError(t, tx2.Rollback(ctx))
		}
	})
}
