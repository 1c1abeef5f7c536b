package main_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// keyTTL is the retention of the servers here: short, so a key's record
// expires within the test, yet long enough for a request and its retry to
// fall within it on a loaded machine (2 s was not, on MySQL).
const keyTTL = 5 * time.Second

// TestKeyAfterRetention: once a key's record is past its retention, the key
// is free for a new request, which makes a fresh movement, whether the
// record still waits for the sweeper or is gone (deleted by a sweeper that
// knows nothing of the wallet). The wallet's tables keep the key as plain
// data and bind nothing. Before they stopped binding it, atomic mode with
// the deferred claim answered the swept key with a stored 409
// duplicate-transaction.
func TestKeyAfterRetention(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *server) {
		expired, swept := keyedMovements(t, s), keyedMovements(t, s)
		waitExpired(t, s, expired.u, expired.txKey, expired.depKey)
		waitExpired(t, s, swept.u, swept.txKey, swept.depKey)
		for _, key := range []string{swept.txKey, swept.depKey} {
			require.Equal(t, int64(1), s.sqlInt(t, fmt.Sprintf(
				`DELETE FROM idempotency_keys WHERE scope = '%s' AND idempotency_key = '%s' RETURNING 1`, swept.u.id, key)))
		}

		for _, m := range []movements{expired, swept} {
			for _, c := range []struct{ path, table, key, body string }{
				// Other amounts, so that the minute nets cannot fire: a key
				// past retention binds nothing, whatever the body.
				{"/v1/transactions", "transactions", m.txKey, `{"source_currency":"USD","target_currency":"EUR","amount":200}`},
				{"/v1/deposits", "deposits", m.depKey, `{"currency":"GBP","amount":150}`},
			} {
				fresh := m.u.post(t, c.path, c.key, c.body)
				require.Equal(t, http.StatusCreated, fresh.status, "%s: %s", c.path, fresh)
				require.False(t, fresh.replayed())
				again := m.u.post(t, c.path, c.key, c.body)
				require.True(t, again.replayed(), "%s", again)
				require.Equal(t, string(fresh.body), string(again.body))
				require.Equal(t, int64(2), s.sqlInt(t, fmt.Sprintf(
					`SELECT count(*) FROM %s WHERE user_id = '%s' AND idempotency_key = '%s'`, c.table, m.u.id, c.key)),
					"both movements keep the key, as plain data")
			}
			want := map[string]int64{"USD": 10000 - 300, "EUR": 92 + 184, "GBP": 250}
			require.Equal(t, want, m.u.balances(t), "both lives of each key moved money once")
			require.Equal(t, want, m.u.entrySums(t))
		}
	}, "--idempotency-ttl", keyTTL.String(), "--sweep-interval", "0")
}

// movements are a user's keyed movements: see keyedMovements.
type movements struct {
	u             *user
	txKey, depKey string
}

const depositBody = `{"currency":"GBP","amount":100}`

// keyedMovements makes a user with 10000 USD, then a transfer of 100 USD to
// EUR and a deposit of 100 GBP, each with a key of its own.
func keyedMovements(t *testing.T, s *server) movements {
	t.Helper()
	m := movements{u: s.newUser(t), txKey: newKey(), depKey: newKey()}
	m.u.deposit(t, "USD", 10000)
	r := m.u.post(t, "/v1/transactions", m.txKey, `{"source_currency":"USD","target_currency":"EUR","amount":100}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	r = m.u.post(t, "/v1/deposits", m.depKey, depositBody)
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	return m
}
