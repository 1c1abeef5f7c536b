package pgstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
)

// servePay runs one keyed POST through h as user alice.
func servePay(h http.Handler, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(idem.WithScope(req.Context(), "alice")))
	return rec
}

// leasedReplicas are two replicas of a leased-mode service with a 300 ms
// lease on one schema: A with a one-connection pool, which its handler's
// transaction saturates so that its renewals cannot get a connection, and
// B on base's roomy pool.
func leasedReplicas(t *testing.T) (base *pgstore.Store, poolA *pgxpool.Pool, mwA, mwB *idem.Middleware) {
	base = newStore(t)
	poolA = replicaPool(t, base, 1)
	conf := idem.Config{Mode: idem.ModeLeased, LeaseDuration: 300 * time.Millisecond}
	mwA, err := idem.New(pgstore.New(poolA), conf)
	require.NoError(t, err)
	mwB, err = idem.New(base, conf)
	require.NoError(t, err)
	return base, poolA, mwA, mwB
}

// replicaPool is another replica's pool on base's schema, of at most
// maxConns connections, closed when the test ends. pgxpool's Close waits
// for every checked-out connection: one still out then is reported, and
// its backend ended so that the schema can be dropped, rather than waited
// for without end.
func replicaPool(t *testing.T, base *pgstore.Store, maxConns int32) *pgxpool.Pool {
	ctx := context.Background()
	cfg := base.Pool().Config()
	cfg.MaxConns = maxConns
	app := "replica-" + uuid.NewString()[:8]
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		// A failed test has already waited for them, if it meant to.
		if pool.Stat().AcquiredConns() != 0 && (t.Failed() || !connsReturned(pool)) {
			t.Errorf("%d connection(s) of a replica's pool still checked out when the test ended", pool.Stat().AcquiredConns())
			_, _ = base.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
			return
		}
		pool.Close()
	})
	return pool
}

// connsReturned waits, a minute at most, until no connection of pool is
// checked out, and reports whether none is.
func connsReturned(pool *pgxpool.Pool) bool {
	deadline := time.Now().Add(time.Minute)
	for pool.Stat().AcquiredConns() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return pool.Stat().AcquiredConns() == 0
}

// waitLeaseLapsed waits, a minute at most, until the database says the
// lease on alice's key has lapsed.
func waitLeaseLapsed(t *testing.T, s *pgstore.Store, key string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		rec, err := s.Get(context.Background(), "alice", key)
		require.NoError(t, err)
		if !rec.LeaseLive {
			return
		}
		require.True(t, time.Now().Before(deadline), "the lease on %s never lapsed", key)
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAnswer waits, a minute at most, for a request's answer on done.
func waitAnswer(t *testing.T, done <-chan *httptest.ResponseRecorder, who string) *httptest.ResponseRecorder {
	t.Helper()
	select {
	case rec := <-done:
		return rec
	case <-time.After(time.Minute):
		t.Fatalf("%s never answered", who)
		return nil
	}
}

// A leased-mode handler whose lease cannot be renewed (here its replica's
// pool is saturated) is cancelled before the lease lapses, so a retry that
// re-acquires the key on another replica never runs beside it.
func TestLeasedHandlerIsCancelledWhenItsLeaseLapses(t *testing.T) {
	t.Parallel()
	base, poolA, mwA, mwB := leasedReplicas(t)

	aCtx := make(chan context.Context, 1)
	releaseA := make(chan struct{})
	release := sync.OnceFunc(func() { close(releaseA) })
	defer release() // a failed check must not leave A's handler waiting
	handlerA := mwA.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A pending-payment row first: the transaction begins and holds
		// replica A's only connection.
		if _, err := pgstore.DB(r.Context(), poolA).Exec(r.Context(), `SELECT 1`); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		aCtx <- r.Context()
		// The bank call: in flight until the test lets it end.
		select {
		case <-r.Context().Done():
		case <-releaseA:
		}
		w.WriteHeader(http.StatusCreated)
	}))
	var aAliveWhenBRan error = context.Canceled
	bRan := false
	handlerB := mwB.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bRan = true
		select {
		case c := <-aCtx:
			aAliveWhenBRan = c.Err()
		default:
		}
		w.WriteHeader(http.StatusCreated)
	}))

	key := "lease-" + t.Name()
	aDone := make(chan *httptest.ResponseRecorder, 1)
	go func() { aDone <- servePay(handlerA, key, `{"amount":100}`) }()
	var ca context.Context
	select {
	case ca = <-aCtx:
		aCtx <- ca // for handler B to inspect
	case <-time.After(time.Minute):
		t.Fatal("handler A never started")
	}

	// Wait until the database says A's lease has lapsed (its renewals
	// cannot get a connection), while A is still running.
	waitLeaseLapsed(t, base, key)

	// A retry through replica B.
	rb := servePay(handlerB, key, `{"amount":100}`)
	release()
	ra := waitAnswer(t, aDone, "replica A")
	t.Logf("A answered %d, B answered %d (B ran the handler: %v)", ra.Code, rb.Code, bRan)

	require.False(t, bRan && aAliveWhenBRan == nil,
		"the handler ran a second time (replica B) while the first run (replica A) was still in flight "+
			"and had never been told that its lease had lapsed: the bank is called twice")
}

// A leased-mode handler that outlives its lease (its bank call ignores
// the cancellation) and answers after a retry on another replica has taken
// the key and completed it: its completion is refused by the fence, and
// its transaction is rolled back, so its replica's pool gets the
// connection back. Left open, the transaction held a connection, idle in
// transaction, for good: the pool shrank by one with every such request.
func TestRefusedLeasedCompletionGivesItsConnectionBack(t *testing.T) {
	t.Parallel()
	base, poolA, mwA, mwB := leasedReplicas(t)

	startedA := make(chan struct{})
	releaseA := make(chan struct{})
	release := sync.OnceFunc(func() { close(releaseA) })
	defer release()
	handlerA := mwA.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The transaction begins and holds replica A's only connection.
		if _, err := pgstore.DB(r.Context(), poolA).Exec(r.Context(), `SELECT 1`); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		close(startedA)
		<-releaseA
		w.WriteHeader(http.StatusCreated)
	}))
	handlerB := mwB.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))

	key := "refused-" + t.Name()
	aDone := make(chan *httptest.ResponseRecorder, 1)
	go func() { aDone <- servePay(handlerA, key, `{"amount":100}`) }()
	select {
	case <-startedA:
	case <-time.After(time.Minute):
		t.Fatal("handler A never started")
	}
	waitLeaseLapsed(t, base, key)
	rb := servePay(handlerB, key, `{"amount":100}`)
	require.Equal(t, http.StatusCreated, rb.Code, "the retry on replica B takes the lapsed key over")
	release()
	ra := waitAnswer(t, aDone, "replica A")
	t.Logf("A answered %d after B had completed the key", ra.Code)

	require.True(t, connsReturned(poolA),
		"replica A's request is over, but its connection is still checked out: the transaction of its refused completion was never rolled back")
}
