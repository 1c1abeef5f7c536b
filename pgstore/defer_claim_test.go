package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
)

// roundTrips counts what a pool sends: each query outside a batch and each
// batch is one round trip once statements are prepared (n); statements
// counts the statements, in batches or not.
type roundTrips struct{ n, statements atomic.Int64 }

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	c.statements.Add(1)
	return ctx
}
func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.statements.Add(1)
}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// deferredWallet is a store with a business table, and a handler that
// writes one row to it through the request's transaction (in one batch, as
// pgledger does) and answers 201 with a body of its own each run.
type deferredWallet struct {
	pool  *pgxpool.Pool
	store *pgstore.Store
	trips *roundTrips
	runs  atomic.Int32
	// wrote counts the handler's business writes that succeeded.
	wrote atomic.Int32
}

func newDeferredWallet(t *testing.T) *deferredWallet {
	t.Helper()
	schema := pgtest.Schema(t)
	cfg, err := pgxpool.ParseConfig(pgtest.SchemaURL(t, schema))
	require.NoError(t, err)
	w := &deferredWallet{trips: &roundTrips{}}
	cfg.ConnConfig.Tracer = w.trips
	cfg.MaxConns = 24
	w.pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(w.pool.Close)
	migrate(t, w.pool)
	_, err = w.pool.Exec(context.Background(), `CREATE TABLE payments (ref text NOT NULL, amount bigint NOT NULL)`)
	require.NoError(t, err)
	w.store = pgstore.New(w.pool)
	return w
}

func (w *deferredWallet) handler(delay time.Duration) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		n := w.runs.Add(1)
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO payments (ref, amount) VALUES ($1, 100)`, r.Header.Get("Idempotency-Key"))
		if err := pgstore.DB(r.Context(), w.pool).SendBatch(r.Context(), b).Close(); err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		w.wrote.Add(1)
		time.Sleep(delay)
		rw.WriteHeader(http.StatusCreated)
		fmt.Fprintf(rw, `{"run":%d}`, n)
	})
}

// replica is one process's middleware in front of the wallet's handler.
func (w *deferredWallet) replica(t *testing.T, cfg idem.Config, h http.Handler) string {
	t.Helper()
	mw, err := idem.New(w.store, cfg)
	require.NoError(t, err)
	protected := mw.Require(h)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		protected.ServeHTTP(rw, r.WithContext(idem.WithScope(r.Context(), "alice")))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (w *deferredWallet) rows(t *testing.T, key string) int {
	t.Helper()
	var n int
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT count(*) FROM payments WHERE ref = $1`, key).Scan(&n))
	return n
}

func postDeferred(t *testing.T, url, key string) answer {
	t.Helper()
	return send(t, url+"/v1/payments", key, "application/json", `{"amount":100}`)
}

var deferredCached = idem.Config{Mode: idem.ModeAtomicDeferred, ReplayCacheBytes: 1 << 20}

// TestDeferredClaimRoundTrips: with the claim deferred to the completion
// and a replay cache, a fresh request costs the store the handler's batch
// (with BEGIN in front) and the completion's (the key's insert with the
// COMMIT): two round trips, where claiming first without the cache costs
// three (the look-up, the handler's batch behind the key's lock, the
// completion with the COMMIT). A replay from the
// cache costs none.
func TestDeferredClaimRoundTrips(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		cfg   idem.Config
		fresh int64
	}{
		{"DeferredCached", deferredCached, 2},
		{"ClaimFirst", idem.Config{Mode: idem.ModeAtomic, ReplayCacheBytes: -1}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newDeferredWallet(t)
			url := w.replica(t, c.cfg, w.handler(0))
			postDeferred(t, url, "warm-up") // prepares the statements on the connection
			before := w.trips.n.Load()
			key := uuid.NewString()
			require.Equal(t, http.StatusCreated, postDeferred(t, url, key).status)
			require.Equal(t, c.fresh, w.trips.n.Load()-before, "round trips of a fresh request")
			if c.cfg.ReplayCacheBytes > 0 {
				before = w.trips.n.Load()
				require.True(t, postDeferred(t, url, key).replayed)
				require.Zero(t, w.trips.n.Load()-before, "a replay from the cache")
			}
			require.Equal(t, 1, w.rows(t, key))
		})
	}
}

// TestDeferredClaimDuplicatesWriteOnce: concurrent duplicates all run
// their handlers, each writing a row in its own transaction; the
// completions' inserts let one commit and roll the others back, and every
// caller gets that one's answer.
func TestDeferredClaimDuplicatesWriteOnce(t *testing.T) {
	t.Parallel()
	w := newDeferredWallet(t)
	url := w.replica(t, deferredCached, w.handler(20*time.Millisecond))
	key := uuid.NewString()
	const n = 16
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i] = postDeferred(t, url, key) })
	}
	wg.Wait()
	require.Equal(t, 1, w.rows(t, key), "one row: every other attempt rolled back")
	executed := 0
	for _, a := range answers {
		require.Equal(t, http.StatusCreated, a.status, a.body)
		require.Equal(t, answers[0].body, a.body)
		if !a.replayed {
			executed++
		}
	}
	require.Equal(t, 1, executed)
	rec, err := w.store.Get(context.Background(), "alice", key)
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Status)
	require.Equal(t, 1, rec.Attempts)
	require.Equal(t, answers[0].body, string(rec.Response.Body))
}

// TestDeferredClaimAnotherReplicaCompleted: a retry reaching a replica
// whose cache does not hold the key runs its handler, whose write the
// key's insert rolls back; the retry gets the first replica's answer, and
// the second replica caches it.
func TestDeferredClaimAnotherReplicaCompleted(t *testing.T) {
	t.Parallel()
	w := newDeferredWallet(t)
	a := w.replica(t, deferredCached, w.handler(0))
	b := w.replica(t, deferredCached, w.handler(0))
	key := uuid.NewString()
	first := postDeferred(t, a, key)
	require.Equal(t, http.StatusCreated, first.status)
	retry := postDeferred(t, b, key)
	require.Equal(t, answer{http.StatusCreated, first.body, true}, retry)
	require.Equal(t, int32(2), w.runs.Load(), "b's handler ran, not knowing the key")
	require.Equal(t, 1, w.rows(t, key), "and its write was rolled back")
	require.Equal(t, answer{http.StatusCreated, first.body, true}, postDeferred(t, b, key))
	require.Equal(t, int32(2), w.runs.Load(), "b now answers from its cache")

	// A handler that asks for a retry without touching the database yields
	// to the record too: the client gets the stored answer, not the 503.
	unavailable := w.replica(t, deferredCached, http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		http.Error(rw, "try later", http.StatusServiceUnavailable)
	}))
	require.Equal(t, answer{http.StatusCreated, first.body, true}, postDeferred(t, unavailable, key))
}

// TestDeferredClaimWaitIsBounded: a completion whose key another
// transaction holds waits at most WaitTimeout, then answers 409 in flight
// with its handler's write rolled back.
func TestDeferredClaimWaitIsBounded(t *testing.T) {
	t.Parallel()
	w := newDeferredWallet(t)
	cfg := deferredCached
	cfg.WaitTimeout = 200 * time.Millisecond
	url := w.replica(t, cfg, w.handler(0))
	key := uuid.NewString()

	ctx := context.Background()
	holder, err := w.store.Begin(ctx, store.TxOptions{})
	require.NoError(t, err)
	defer func() { require.NoError(t, holder.Rollback(ctx)) }()
	c := newClaim(key)
	_, inserted, err := holder.Insert(ctx, c)
	require.NoError(t, err)
	require.True(t, inserted)

	r := postDeferred(t, url, key)
	require.Equal(t, http.StatusConflict, r.status, r.body)
	require.Contains(t, r.body, "in-flight")
	require.Equal(t, 0, w.rows(t, key))
}

// TestDeferredClaimBusinessConflictReplays: a retry on a replica that
// does not hold the key in its cache runs its handler, which meets the
// first request's row in a unique index and answers a final 409 from an
// aborted transaction. The key's record still answers: the retry gets the
// first request's 201, never the 409 (nor a 409 lease-lost).
func TestDeferredClaimBusinessConflictReplays(t *testing.T) {
	t.Parallel()
	w := newDeferredWallet(t)
	_, err := w.pool.Exec(context.Background(), `CREATE UNIQUE INDEX ON payments (ref)`)
	require.NoError(t, err)
	uniqueRef := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, err := pgstore.DB(r.Context(), w.pool).Exec(r.Context(),
			`INSERT INTO payments (ref, amount) VALUES ($1, 100)`, r.Header.Get("Idempotency-Key"))
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23505" {
			http.Error(rw, "duplicate payment", http.StatusConflict) // the transaction is aborted now
			return
		}
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		rw.WriteHeader(http.StatusCreated)
		fmt.Fprint(rw, `{"paid":true}`)
	})
	a := w.replica(t, deferredCached, uniqueRef)
	b := w.replica(t, deferredCached, uniqueRef)
	key := uuid.NewString()
	first := postDeferred(t, a, key)
	require.Equal(t, http.StatusCreated, first.status, first.body)
	for range 2 {
		require.Equal(t, answer{http.StatusCreated, first.body, true}, postDeferred(t, b, key))
	}
	require.Equal(t, 1, w.rows(t, key))
}

// TestDeferredClaimIsTraced: a TraceFunc sees a deferred claim as an
// OpInsert once it has run: nil for the request that recorded the key,
// ErrKeyExists (an answer, not a failure) for a discarded duplicate.
func TestDeferredClaimIsTraced(t *testing.T) {
	t.Parallel()
	w := newDeferredWallet(t)
	var (
		mu      sync.Mutex
		inserts []error
	)
	cfg := deferredCached
	cfg.TraceFunc = func(ctx context.Context, op idem.Op) (context.Context, func(error)) {
		return ctx, func(err error) {
			if op == idem.OpInsert {
				mu.Lock()
				inserts = append(inserts, err)
				mu.Unlock()
			}
		}
	}
	a := w.replica(t, cfg, w.handler(0))
	b := w.replica(t, cfg, w.handler(0))
	key := uuid.NewString()
	require.Equal(t, http.StatusCreated, postDeferred(t, a, key).status)
	require.True(t, postDeferred(t, b, key).replayed)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, inserts, 2)
	require.NoError(t, inserts[0])
	require.ErrorIs(t, inserts[1], store.ErrKeyExists)
}
