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
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/sqlitestore"
)

// idemStore opens the server's key table with the real store, as a second
// process on the same database would.
func (s *server) idemStore(t *testing.T) idem.Store {
	t.Helper()
	if s.store == "sqlite" {
		return sqlitestore.New(s.sqlite(t))
	}
	pool, err := pgxpool.New(context.Background(), s.db)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pgstore.New(pool)
}

// holdKey claims key for u as a request with body would, with a live lease:
// what a request that is still running (or crashed a moment ago) leaves.
func holdKey(t *testing.T, u *user, path, key, body string) idem.Lock {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	fp, err := idem.NewFingerprint(req, []byte(body))
	require.NoError(t, err)
	c := idem.Claim{Scope: u.id, Key: key, Fingerprint: fp, Token: uuid.NewString(), LockFor: time.Hour, TTL: time.Hour}
	_, inserted, err := u.s.idemStore(t).Insert(context.Background(), c)
	require.NoError(t, err)
	require.True(t, inserted)
	return idem.Lock{Scope: u.id, Key: key, Token: c.Token}
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
// Retry-After, at once in leased mode, after --wait-timeout in atomic mode.
// Then the first request finishes and the duplicate replays it. Only
// PostgreSQL can hold one row: SQLite's writer lock is the whole database,
// which the first request needs to start at all.
func TestInFlightWhileRunning(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(camel(mode), func(t *testing.T) {
			t.Parallel()
			s := startServer(t, newDB(t, "postgres"), "--idempotency-mode", mode, "--wait-timeout", "300ms")
			u := s.newUser(t)
			u.deposit(t, "USD", 1000)
			release := lockBalances(t, s, u)

			key := newKey()
			body := `{"source_currency":"USD","target_currency":"EUR","amount":100}`
			firstc := make(chan reply, 1)
			go func() {
				r, err := try(s, u, http.MethodPost, "/v1/transactions", body, "Idempotency-Key", key)
				if err != nil {
					r = reply{body: []byte(err.Error())}
				}
				firstc <- r
			}()
			waitForLockWait(t, s)

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

// waitForLockWait waits until one of the server's connections (known by the
// application_name newDB gives them) waits for a balance row lock: the
// request is inside its handler.
func waitForLockWait(t *testing.T, s *server) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.connURL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	u, err := url.Parse(s.db)
	require.NoError(t, err)
	app := u.Query().Get("application_name")
	require.Eventually(t, func() bool {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		                            WHERE application_name = $1 AND wait_event_type = 'Lock'
		                              AND query LIKE '%FROM balances%FOR UPDATE%'`, app).Scan(&n)
		return err == nil && n > 0
	}, 20*time.Second, 10*time.Millisecond, "the request never waited for the balance lock")
}
