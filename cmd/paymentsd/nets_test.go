package main_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// keyTTL is the retention of the key-net servers: short, so a key's record
// expires within the test.
const keyTTL = 2 * time.Second

// TestKeyNet makes the key net fire through the API. Once a key's record
// expires, the middleware lets the key be used afresh; the key is still
// bound to the deposit or transaction it made (until the sweeper deletes
// the record and releases it), so a new request with it is refused with a
// final 409 of its own type, and nothing moves.
func TestKeyNet(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *server) {
		u := s.newUser(t)
		u.deposit(t, "USD", 10000)
		txKey, depKey := newKey(), newKey()
		r := u.post(t, "/v1/transactions", txKey, `{"source_currency":"USD","target_currency":"EUR","amount":100}`)
		require.Equal(t, http.StatusCreated, r.status, "%s", r)
		r = u.post(t, "/v1/deposits", depKey, `{"currency":"GBP","amount":100}`)
		require.Equal(t, http.StatusCreated, r.status, "%s", r)
		before := u.balances(t)
		time.Sleep(keyTTL + 200*time.Millisecond)

		for _, c := range []struct{ path, key, body string }{
			// Other amounts than before, so that only the key net can fire.
			{"/v1/transactions", txKey, `{"source_currency":"USD","target_currency":"EUR","amount":200}`},
			{"/v1/deposits", depKey, `{"currency":"GBP","amount":200}`},
		} {
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
	}, "--idempotency-ttl", keyTTL.String())
}
