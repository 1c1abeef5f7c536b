package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/store"
)

var claimFirstCached = idem.Config{Mode: idem.ModeAtomic, ReplayCacheBytes: 1 << 20}

// TestLockedClaimRunsOnceAcrossReplicas: claiming first by the key's lock,
// duplicates spread over two replicas (two processes as far as the store
// can tell) wait for the first and replay it: the handler runs once, and
// writes one business row.
func TestLockedClaimRunsOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	w := newDeferredWallet(t)
	require.True(t, w.store.Capabilities().KeyLock)
	replicas := []string{
		w.replica(t, claimFirstCached, w.handler(20*time.Millisecond)),
		w.replica(t, claimFirstCached, w.handler(20*time.Millisecond)),
	}
	key := uuid.NewString()
	const n = 16
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i] = postDeferred(t, replicas[i%2], key) })
	}
	wg.Wait()
	require.Equal(t, int32(1), w.runs.Load(), "every duplicate waited for the key's lock")
	require.Equal(t, 1, w.rows(t, key))
	for _, a := range answers {
		require.Equal(t, http.StatusCreated, a.status, a.body)
		require.Equal(t, answers[0].body, a.body)
	}
	rec, err := w.store.Get(context.Background(), "alice", key)
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Status)
	require.Equal(t, 1, rec.Attempts)
}

// TestLockedClaimYieldsToAnotherMode: a request of another mode does not
// take the key's lock (a route whose mode changes in a rolling deploy): it
// records the key while the claim-first request's handler runs. The
// claim-first request's insert then finds the key taken: its write rolls
// back and its client gets the recorded answer. The key took effect once.
func TestLockedClaimYieldsToAnotherMode(t *testing.T) {
	t.Parallel()
	w := newDeferredWallet(t)
	wrote, release := make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO payments (ref, amount) VALUES ($1, 100)`, r.Header.Get("Idempotency-Key"))
		if err := pgstore.DB(r.Context(), w.pool).SendBatch(r.Context(), b).Close(); err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		close(wrote)
		<-release
		rw.WriteHeader(http.StatusCreated)
		fmt.Fprint(rw, `{"by":"claim-first"}`)
	})
	claimFirst := w.replica(t, claimFirstCached, slow)
	deferred := w.replica(t, deferredCached, w.handler(0))
	key := uuid.NewString()

	first := make(chan answer, 1)
	go func() { first <- postDeferred(t, claimFirst, key) }()
	<-wrote
	other := postDeferred(t, deferred, key)
	require.Equal(t, http.StatusCreated, other.status, other.body)
	require.False(t, other.replayed, "the key's lock did not hold the deferred claim back")
	close(release)
	got := <-first
	require.Equal(t, answer{http.StatusCreated, other.body, true}, got)
	require.Equal(t, 1, w.rows(t, key), "the claim-first request's write rolled back")
}
