package storetest

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// RunSweep checks store.Capabilities.Sweep: every record past
// its expiry goes, whatever its status, but a claim whose lock is live, and
// nothing else goes; batches are
// bounded; the batch's own work commits or rolls back with it; a record
// another transaction holds is skipped, not waited on. A store without the
// capability skips these tests.
func RunSweep(t *testing.T, newStore NewStoreFunc) {
	ctx := context.Background()
	sweeper := func(t *testing.T) store.Store {
		t.Helper()
		s := newStore(t)
		skipWithout(t, s, s.Capabilities().Sweep, "Sweep")
		return s
	}

	t.Run("DeletesExpiredWhateverStatus", func(t *testing.T) {
		t.Parallel()
		s := sweeper(t)
		expired := map[store.Status]store.Claim{}
		live := map[store.Status]store.Claim{}
		for _, st := range []store.Status{store.StatusCompleted, store.StatusFailed, store.StatusProcessing} {
			// Expired PROCESSING is abandoned: its lock is long gone too.
			expired[st] = putRecord(t, s, "alice", st, time.Millisecond, time.Millisecond)
			live[st] = putRecord(t, s, "alice", st, long, ttl)
		}
		// A request still running past retention keeps its key.
		running := putRecord(t, s, "bob", store.StatusProcessing, long, time.Millisecond)
		var want []store.KeyRef
		for _, c := range expired {
			want = append(want, ref(c))
		}
		waitExpired(t, s, append(want, ref(running))...)

		require.ElementsMatch(t, want, deleteExpired(t, s, 100))
		for _, k := range want {
			_, err := s.Get(ctx, k.Scope, k.Key)
			require.ErrorIs(t, err, store.ErrNotFound, "%+v", k)
		}
		for st, c := range live {
			rec, err := s.Get(ctx, c.Scope, c.Key)
			require.NoError(t, err, "a live %s record stays", st)
			require.Equal(t, st, rec.Status)
		}
		rec, err := s.Get(ctx, running.Scope, running.Key)
		require.NoError(t, err, "an expired record whose lock is live stays")
		require.True(t, rec.LeaseLive)
		require.Empty(t, deleteExpired(t, s, 100))
	})

	t.Run("KeepsAnOutcomeUnknownUntilSettled", func(t *testing.T) {
		t.Parallel()
		s := sweeper(t)
		answer := func(body string) store.Response {
			return store.Response{StatusCode: 409, Header: http.Header{"Content-Type": {"application/problem+json"}}, Body: []byte(body)}
		}
		unknown := putRecord(t, s, "alice", store.StatusProcessing, long, time.Millisecond)
		require.NoError(t, s.Complete(ctx, unknown.Attempt(), answer(`{"status":409,"title":"Outcome unknown","type":"`+store.OutcomeUnknownType+`"}`)))
		conflict := putRecord(t, s, "alice", store.StatusProcessing, long, time.Millisecond)
		require.NoError(t, s.Complete(ctx, conflict.Attempt(), answer(`{"type":"https://example.com/already-paid"}`)))
		// The unknown outcome never reads as expired: it expired before
		// the conflict, made after it with the same retention.
		waitExpired(t, s, ref(conflict))

		require.Equal(t, []store.KeyRef{ref(conflict)}, deleteExpired(t, s, 100), "an upstream's own 409 goes")
		rec, err := s.Get(ctx, unknown.Scope, unknown.Key)
		require.NoError(t, err, "an unknown outcome stays past its retention, until an operator settles it")
		require.True(t, store.AwaitsOperator(rec.Status, rec.Response))
		require.False(t, rec.Expired, "it binds its key past retention: a retry gets it, never a run")
		won, err := s.Reacquire(ctx, claim("alice", unknown.Key, "body", long, ttl), rec.Token)
		require.NoError(t, err)
		require.False(t, won, "no retry re-acquires it")
		require.Empty(t, deleteExpired(t, s, 100))

		if !s.Capabilities().Resolve {
			return
		}
		require.NoError(t, s.ReplaceResponse(ctx, unknown.Attempt(), store.Response{StatusCode: 201, Body: []byte("paid")}))
		// Settled, it binds its key for its retention again, counted from
		// the answer (ReplacedPastRetentionIsReplayed), then goes.
		waitExpired(t, s, ref(unknown))
		require.Equal(t, []store.KeyRef{ref(unknown)}, deleteExpired(t, s, 100), "settled: it goes once its retention passes")
	})

	t.Run("BatchesAreBounded", func(t *testing.T) {
		t.Parallel()
		s := sweeper(t)
		var want []store.KeyRef
		for range 5 {
			want = append(want, ref(putRecord(t, s, "alice", store.StatusCompleted, long, time.Millisecond)))
		}
		putRecord(t, s, "alice", store.StatusCompleted, long, ttl)
		waitExpired(t, s, want...)
		var all []store.KeyRef
		for _, n := range []int{2, 2, 1, 0} {
			deleted := deleteExpired(t, s, 2)
			require.Len(t, deleted, n)
			all = append(all, deleted...)
		}
		require.ElementsMatch(t, want, all)
	})

	t.Run("HeldRecordIsSkippedNotWaitedOn", func(t *testing.T) {
		t.Parallel()
		s := sweeper(t)
		held := putRecord(t, s, "alice", store.StatusProcessing, time.Millisecond, time.Millisecond)
		free := putRecord(t, s, "alice", store.StatusCompleted, long, time.Millisecond)
		waitExpired(t, s, ref(held), ref(free))

		// A retry re-acquiring the expired key holds its row in an open
		// transaction.
		tx, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		won, err := tx.Reacquire(ctx, claim("alice", held.Key, "body", long, ttl), held.Token)
		require.NoError(t, err)
		require.True(t, won)

		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		deleted, err := s.DeleteExpired(sctx, 10)
		require.Less(t, time.Since(start), 2*time.Second, "the sweep must not wait for the holder")
		if !errors.Is(err, store.ErrSweepBusy) { // a store that locks the whole database may say busy
			require.NoError(t, err)
			require.Equal(t, []store.KeyRef{ref(free)}, deleted)
		}
		require.NoError(t, tx.Commit(ctx))
		rec, err := s.Get(ctx, held.Scope, held.Key)
		require.NoError(t, err, "the re-acquired record survived the sweep")
		require.False(t, rec.Expired)
	})

	t.Run("ConcurrentSweepsDeleteEachRecordOnce", func(t *testing.T) {
		t.Parallel()
		s := sweeper(t)
		var want []store.KeyRef
		for range 30 {
			want = append(want, ref(putRecord(t, s, "alice", store.StatusCompleted, long, time.Millisecond)))
		}
		waitExpired(t, s, want...)
		var (
			mu  sync.Mutex
			all []store.KeyRef
			wg  sync.WaitGroup
		)
		for range 4 {
			wg.Go(func() {
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
					deleted, err := s.DeleteExpired(ctx, 3)
					if errors.Is(err, store.ErrSweepBusy) {
						time.Sleep(time.Millisecond)
						continue
					}
					if !assertNoError(t, err) {
						return
					}
					mu.Lock()
					all = append(all, deleted...)
					n := len(all)
					mu.Unlock()
					if n >= len(want) {
						return
					}
				}
			})
		}
		wg.Wait()
		require.ElementsMatch(t, want, all, "each record deleted, and reported, exactly once")
	})
}

// deleteExpired runs s.DeleteExpired until it does not answer
// store.ErrSweepBusy, which is no failure: a store whose sweep lock is the
// database's write lock (SQLite) may find it taken, or not get it within
// its bound on a loaded machine.
func deleteExpired(t *testing.T, s store.Store, limit int) []store.KeyRef {
	t.Helper()
	var deleted []store.KeyRef
	waitUntil(t, func() bool {
		var err error
		deleted, err = s.DeleteExpired(context.Background(), limit)
		if errors.Is(err, store.ErrSweepBusy) {
			return false
		}
		require.NoError(t, err)
		return true
	})
	return deleted
}

// putRecord makes a record in status st, locked for lockFor, kept for ttl.
func putRecord(t *testing.T, s store.Store, scope string, st store.Status, lockFor, ttl time.Duration) store.Claim {
	t.Helper()
	ctx := context.Background()
	c := claim(scope, newKey(), "body", lockFor, ttl)
	_, inserted, err := s.Insert(ctx, c)
	require.NoError(t, err)
	require.True(t, inserted)
	switch st {
	case store.StatusCompleted:
		require.NoError(t, s.Complete(ctx, c.Attempt(), store.Response{StatusCode: 201, Body: []byte("ok")}))
	case store.StatusFailed:
		require.NoError(t, s.Fail(ctx, c.Attempt()))
	}
	return c
}

func ref(c store.Claim) store.KeyRef { return store.KeyRef{Scope: c.Scope, Key: c.Key} }

// waitExpired waits until the store's clock has passed the records' expiry.
func waitExpired(t *testing.T, s store.Store, refs ...store.KeyRef) {
	t.Helper()
	for _, k := range refs {
		waitUntil(t, func() bool {
			rec, err := s.Get(context.Background(), k.Scope, k.Key)
			require.NoError(t, err)
			return rec.Expired
		})
	}
}

// assertNoError reports err from a goroutine other than the test's, where
// require must not be used.
func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}
