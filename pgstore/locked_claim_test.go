package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/store"
)

var claimFirstCached = idem.Config{Mode: idem.ModeAtomic, ReplayCacheBytes: 1 << 20}

// TestLockedClaimRunsOnceAcrossReplicas: claiming first by the key's lock,
// duplicates spread over two replicas (two processes as far as the store
// can tell) wait for the first and replay it: the handler's write runs
// once, and one business row commits. Each replica holds its own
// duplicates back before the handler; the other replica's first one
// enters the handler, and its write waits for the lock, then fails on the
// recorded key.
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
	require.Equal(t, int32(1), w.wrote.Load(), "every duplicate's write waited for the key's lock, then failed")
	require.True(t, w.runs.Load() <= 2, "a replica holds its own duplicates back: %d handler runs", w.runs.Load())
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
	claimFirst := w.replica(t, claimFirstCached, w.holding(wrote, release))
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

// TestLockedClaimFailsTheFirstStatement: claiming first by the key's lock,
// the lock goes with the handler's first statement. A duplicate on
// another replica enters its handler, and its first statement waits for
// the lock: past WaitTimeout it fails with store.ErrWaitTimeout. Whatever
// the handler then answers (here a final 422), the client gets 409 in
// flight, and nothing of the duplicate is stored. A retry that misses the
// replica's replay cache finds the key recorded at the same statement
// (store.ErrKeyExists) and gets the first request's answer.
func TestLockedClaimFailsTheFirstStatement(t *testing.T) {
	t.Parallel()
	w := newDeferredWallet(t)
	wrote, release := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 4)
	cfg := claimFirstCached
	cfg.WaitTimeout = 200 * time.Millisecond
	firstURL := w.replica(t, claimFirstCached, w.holding(wrote, release))
	duplicateURL := w.replica(t, cfg, w.careless(errs))
	key := uuid.NewString()

	done := make(chan answer, 1)
	go func() { done <- postDeferred(t, firstURL, key) }()
	<-wrote // the first holds the key's lock
	waited := postDeferred(t, duplicateURL, key)
	require.Equal(t, http.StatusConflict, waited.status, waited.body)
	require.Contains(t, waited.body, "in-flight")
	err := <-errs
	require.True(t, errors.Is(err, store.ErrWaitTimeout), "the wait: %v", err)

	close(release)
	require.Equal(t, answer{http.StatusCreated, `{"by":"first"}`, false}, <-done)
	require.Equal(t, answer{http.StatusCreated, `{"by":"first"}`, true}, postDeferred(t, duplicateURL, key), "the duplicate's 422s were never stored")
	err = <-errs
	require.True(t, errors.Is(err, store.ErrKeyExists), "the retry: %v", err)
	require.Equal(t, 1, w.rows(t, key))
}

// TestLockedClaimFindsTheKeyRecorded: a duplicate whose first statement
// waited for the key's lock while the first request completed finds the
// key recorded: the statement fails with store.ErrKeyExists, the
// duplicate's transaction rolls back, and its client gets the first
// request's answer, whatever its handler answered.
func TestLockedClaimFindsTheKeyRecorded(t *testing.T) {
	t.Parallel()
	w := newDeferredWallet(t)
	wrote, release := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 1)
	firstURL := w.replica(t, claimFirstCached, w.holding(wrote, release))
	duplicateURL := w.replica(t, claimFirstCached, w.careless(errs))
	key := uuid.NewString()

	done := make(chan answer, 1)
	go func() { done <- postDeferred(t, firstURL, key) }()
	<-wrote
	dup := make(chan answer, 1)
	go func() { dup <- postDeferred(t, duplicateURL, key) }()
	// The duplicate's statement waits for the lock (up to the default
	// 5 s): let the first finish.
	require.Eventually(t, func() bool { return w.lockWaiters(t, key) == 1 }, 5*time.Second, 5*time.Millisecond)
	close(release)
	require.Equal(t, answer{http.StatusCreated, `{"by":"first"}`, false}, <-done)
	require.Equal(t, answer{http.StatusCreated, `{"by":"first"}`, true}, <-dup)
	err := <-errs
	require.True(t, errors.Is(err, store.ErrKeyExists), "the duplicate's statement: %v", err)
	require.Equal(t, 1, w.rows(t, key))
}

// holding is the first request's handler: it writes its business row
// (taking the key's lock), closes wrote, and answers 201 once release is
// closed, holding the lock until then.
func (w *deferredWallet) holding(wrote chan<- struct{}, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if err := w.pay(r); err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		close(wrote)
		<-release
		rw.WriteHeader(http.StatusCreated)
		fmt.Fprint(rw, `{"by":"first"}`)
	})
}

// careless is a handler that takes every failed write for the client's
// fault: a final 422. It sends each write's error to errs.
func (w *deferredWallet) careless(errs chan<- error) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		err := w.pay(r)
		errs <- err
		if err != nil {
			http.Error(rw, "rejected", http.StatusUnprocessableEntity)
			return
		}
		rw.WriteHeader(http.StatusCreated)
		fmt.Fprint(rw, `{"by":"duplicate"}`)
	})
}

// pay writes the request's business row in its transaction.
func (w *deferredWallet) pay(r *http.Request) error {
	_, err := pgstore.DB(r.Context(), w.pool).Exec(r.Context(), `INSERT INTO payments (ref, amount) VALUES ($1, 100)`, r.Header.Get("Idempotency-Key"))
	return err
}

// lockWaiters counts the transactions waiting for key's lock (of scope
// alice, on the default key table).
func (w *deferredWallet) lockWaiters(t *testing.T, key string) int {
	t.Helper()
	var n int
	err := w.pool.QueryRow(context.Background(), `
SELECT count(*) FROM pg_locks,
       (SELECT hashtextextended(length($2) || ':' || $2 || $3, hashtextextended($1, 0)) AS k) lock
 WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
   AND classid::bigint = (lock.k >> 32) & 4294967295 AND objid::bigint = lock.k & 4294967295`,
		"idempotency_keys", "alice", key).Scan(&n)
	require.NoError(t, err)
	return n
}
