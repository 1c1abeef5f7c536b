package main_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/sqlitestore"
	"github.com/idem-dev/idem/store"
)

// idemStore opens the server's key table with the real store, as a second
// process on the same database would.
func (s *server) idemStore(t *testing.T) store.Store {
	t.Helper()
	if s.store == "sqlite" {
		return sqlitestore.New(s.sqlite(t))
	}
	if k, ok := sqlStores[s.store]; ok {
		db := k.open(t, s.db)
		t.Cleanup(func() { _ = db.Close() })
		return k.idemStore(t, db)
	}
	pool, err := pgxpool.New(context.Background(), s.db)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pgstore.New(pool)
}

// holdKey claims key for u as a request with body would, with a live lease:
// what a request that is still running (or crashed a moment ago) leaves.
func holdKey(t *testing.T, u *user, path, key, body string) store.Attempt {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	fp, err := idem.NewFingerprint(req, []byte(body))
	require.NoError(t, err)
	c := store.Claim{Scope: u.id, Key: key, Fingerprint: fp, Token: uuid.NewString(), Lease: time.Hour, TTL: time.Hour}
	_, inserted, err := u.s.idemStore(t).Insert(context.Background(), c)
	require.NoError(t, err)
	require.True(t, inserted)
	return store.Attempt{Scope: u.id, Key: key, Token: c.Token}
}

// testInFlight: a key whose request holds it gets 409 with Retry-After;
// once that request fails, a retry runs.
func testInFlight(t *testing.T, s *server) {
	u := s.newUser(t)
	u.deposit(t, "USD", 1000)
	key := newKey()
	body := `{"source_currency":"USD","target_currency":"EUR","amount":100}`
	lock := holdKey(t, u, "/v1/transactions", key, body)

	r := u.post(t, "/v1/transactions", key, body)
	require.Equal(t, http.StatusConflict, r.status, "%s", r)
	require.Equal(t, "in-flight", r.problemType(t))
	require.Equal(t, "1", r.header.Get("Retry-After"))
	r = u.post(t, "/v1/transactions", key, `{"source_currency":"USD","target_currency":"EUR","amount":101}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r)
	require.Equal(t, map[string]int64{"USD": 1000}, u.balances(t))

	require.NoError(t, s.idemStore(t).Fail(context.Background(), lock))
	r = u.post(t, "/v1/transactions", key, body)
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	require.False(t, r.replayed())
	require.Equal(t, map[string]int64{"USD": 900, "EUR": 92}, u.balances(t))
}

// TestInFlightWhileRunning holds a request inside its handler (its balance
// row is locked by the test) and sends its duplicate: 409 with
// Retry-After, at once in leased mode, after --wait-timeout in the atomic
// modes, whose duplicate waits for the first in the process (with the
// claim deferred to the completion nothing holds the key in the store, but
// the process knows the first runs: the duplicate's handler does not run
// beside it). Then the first request finishes and the duplicate replays
// it. Only PostgreSQL can hold one row: SQLite's writer lock is the whole
// database, which the first request needs to start at all.
func TestInFlightWhileRunning(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
	}{
		{"Leased", []string{"--idempotency-mode", "leased"}},
		{"AtomicClaimFirst", []string{"--idempotency-mode", "atomic"}},
		{"AtomicDeferredClaim", []string{"--idempotency-mode", "atomic-deferred"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, newDB(t, "postgres"), append(c.args, "--wait-timeout", "300ms")...)
			u := s.newUser(t)
			u.deposit(t, "USD", 1000)
			release := lockBalances(t, s, u)

			key := newKey()
			body := `{"source_currency":"USD","target_currency":"EUR","amount":100}`
			firstc := sendAsync(s, u, "/v1/transactions", body, key)
			waitForLockWait(t, s, 1)

			dup := u.post(t, "/v1/transactions", key, body)
			require.Equal(t, http.StatusConflict, dup.status, "%s", dup)
			require.Equal(t, "in-flight", dup.problemType(t))
			require.Equal(t, "1", dup.header.Get("Retry-After"))

			release()
			first := <-firstc
			require.Equal(t, http.StatusCreated, first.status, "%s", first)
			again := u.post(t, "/v1/transactions", key, body)
			require.True(t, again.replayed())
			require.Equal(t, string(first.body), string(again.body))
			require.Equal(t, map[string]int64{"USD": 900, "EUR": 92}, u.balances(t))
		})
	}
}

// lockBalances locks the user's balance rows from a transaction of the
// test's own, and returns the function that releases them.
func lockBalances(t *testing.T, s *server, u *user) (release func()) {
	t.Helper()
	ctx := context.Background()
	if _, ok := sqlStores[s.store]; ok {
		return lockBalancesSQL(t, s, u)
	}
	conn, err := pgx.Connect(ctx, s.connURL(t))
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, fmt.Sprintf(`SELECT 1 FROM balances WHERE user_id = '%s' FOR UPDATE`, u.id))
	require.NoError(t, err)
	done := false
	release = func() {
		if !done {
			done = true
			_ = tx.Rollback(ctx)
			_ = conn.Close(ctx)
		}
	}
	t.Cleanup(release)
	return release
}

// waitForLockWait waits until waiters of the server's connections (known by
// the application_name newDB gives them) wait for a lock: the row the test
// holds, or, for a second request, a balance row the first one inserted
// (pg_stat_activity may show no query text for a statement of a pipeline).
// The requests are inside their handlers.
func waitForLockWait(t *testing.T, s *server, waiters int) {
	t.Helper()
	ctx := context.Background()
	if k, ok := sqlStores[s.store]; ok {
		db := k.open(t, s.db)
		defer db.Close()
		waitFor(t, func() bool { return k.lockWaiters(t, db) >= waiters }, "%d requests never waited for the balance lock", waiters)
		return
	}
	conn, err := pgx.Connect(ctx, s.connURL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	u, err := url.Parse(s.db)
	require.NoError(t, err)
	app := u.Query().Get("application_name")
	waiting := `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`
	if pgtest.Citus() {
		// The rows are on a worker: the server's connection to the
		// coordinator waits on its worker connection, which waits for the
		// lock, one global pid for both.
		waiting = `SELECT count(DISTINCT global_pid) FROM citus_stat_activity WHERE wait_event_type = 'Lock'
		              AND global_pid IN (SELECT global_pid FROM citus_stat_activity WHERE application_name = $1)`
	}
	require.Eventually(t, func() bool {
		var n int
		err := conn.QueryRow(ctx, waiting, app).Scan(&n)
		return err == nil && n >= waiters
	}, patience, 10*time.Millisecond, "%d requests never waited for the balance lock", waiters)
}

// lockBalancesSQL is lockBalances on a store of sqlStores.
func lockBalancesSQL(t *testing.T, s *server, u *user) (release func()) {
	t.Helper()
	ctx := context.Background()
	db := sqlStores[s.store].open(t, s.db)
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	rows, err := tx.QueryContext(ctx, `SELECT 1 FROM balances WHERE user_id = '`+u.id+`' FOR UPDATE`)
	require.NoError(t, err)
	require.NoError(t, rows.Close())
	done := false
	release = func() {
		if !done {
			done = true
			_ = tx.Rollback()
			_ = db.Close()
		}
	}
	t.Cleanup(release)
	return release
}
