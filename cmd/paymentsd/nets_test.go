package main_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// keyTTL is the retention of the key-net servers: short, so a key's record
// expires within the test.
const keyTTL = 2 * time.Second

// TestKeyNet makes the key net fire through the API: the key's
// idempotency record is lost (deleted behind the service's back, as a
// botched restore would), so the middleware runs a retry afresh, and the
// key, still bound to the deposit or transaction it made, refuses it with
// a final 409 of its own type; nothing moves. The replay cache is off: it
// would still hold the record deleted behind its back, and answer from it.
func TestKeyNet(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *server) {
		u, txKey, depKey := keyedMovements(t, s)
		before := u.balances(t)

		for _, c := range []struct{ path, key, body string }{
			// Other amounts than before, so that only the key net can fire.
			{"/v1/transactions", txKey, `{"source_currency":"USD","target_currency":"EUR","amount":200}`},
			{"/v1/deposits", depKey, `{"currency":"GBP","amount":200}`},
		} {
			require.Equal(t, int64(1), s.sqlInt(t, fmt.Sprintf(
				`DELETE FROM idempotency_keys WHERE user_id = '%s' AND idempotency_key = '%s' RETURNING 1`, u.id, c.key)))
			dup := u.post(t, c.path, c.key, c.body)
			require.Equal(t, http.StatusConflict, dup.status, "%s: %s", c.path, dup)
			require.Equal(t, "duplicate-transaction", dup.problemType(t))
			require.Empty(t, dup.header.Get("Retry-After"), "final, not try again")
			require.False(t, dup.replayed())
			// The 409 is now the key's stored answer.
			again := u.post(t, c.path, c.key, c.body)
			require.True(t, again.replayed(), "%s", again)
			require.Equal(t, string(dup.body), string(again.body))
		}
		require.Equal(t, before, u.balances(t), "nothing moved")
		require.Equal(t, before, u.entrySums(t))
	}, "--replay-cache-mb", "0")
}

// TestKeyAfterRetention: once a key's record has expired, the key is free
// for a new request whether or not the sweeper has released it yet: the
// movement of its earlier life no longer binds it.
func TestKeyAfterRetention(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *server) {
		u, txKey, depKey := keyedMovements(t, s)
		time.Sleep(keyTTL + 200*time.Millisecond)

		for _, c := range []struct{ path, key, body string }{
			{"/v1/transactions", txKey, `{"source_currency":"USD","target_currency":"EUR","amount":200}`},
			{"/v1/deposits", depKey, `{"currency":"GBP","amount":200}`},
		} {
			fresh := u.post(t, c.path, c.key, c.body)
			require.Equal(t, http.StatusCreated, fresh.status, "%s: %s", c.path, fresh)
			require.False(t, fresh.replayed())
			again := u.post(t, c.path, c.key, c.body)
			require.True(t, again.replayed(), "%s", again)
			require.Equal(t, string(fresh.body), string(again.body))
		}
		want := map[string]int64{"USD": 10000 - 300, "EUR": 92 + 184, "GBP": 300}
		require.Equal(t, want, u.balances(t), "both lives of each key moved money once")
		require.Equal(t, want, u.entrySums(t))
	}, "--idempotency-ttl", keyTTL.String())
}

// keyedMovements makes a user with 10000 USD, then a transfer of 100 USD to
// EUR and a deposit of 100 GBP, and returns their keys.
func keyedMovements(t *testing.T, s *server) (u *user, txKey, depKey string) {
	t.Helper()
	u = s.newUser(t)
	u.deposit(t, "USD", 10000)
	txKey, depKey = newKey(), newKey()
	r := u.post(t, "/v1/transactions", txKey, `{"source_currency":"USD","target_currency":"EUR","amount":100}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	r = u.post(t, "/v1/deposits", depKey, `{"currency":"GBP","amount":100}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	return u, txKey, depKey
}
