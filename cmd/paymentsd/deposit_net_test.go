package main_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// TestDepositMinuteNet sends one deposit eight times at once under eight
// keys: it credits once, and the other seven get a final 409
// duplicate-deposit, stored under their keys; nothing else moves.
func TestDepositMinuteNet(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *server) {
		u := s.newUser(t)
		// All eight must fall in one UTC minute.
		if now := time.Now(); now.Second() >= 50 {
			time.Sleep(now.Truncate(time.Minute).Add(time.Minute + 100*time.Millisecond).Sub(now))
		}
		const body = `{"currency":"USD","amount":777}`
		keys := make([]string, 8)
		replies := make([]chan reply, len(keys))
		for i := range keys {
			keys[i] = newKey()
			replies[i] = sendAsync(s, u, "/v1/deposits", body, keys[i])
		}
		var made int
		for i, c := range replies {
			r := <-c
			switch r.status {
			case http.StatusCreated:
				made++
			case http.StatusConflict:
				require.Equal(t, "duplicate-deposit", r.problemType(t), "%s", r)
				require.Empty(t, r.header.Get("Retry-After"), "final, not try again")
				again := u.post(t, "/v1/deposits", keys[i], body)
				require.True(t, again.replayed(), "the 409 is the key's answer: %s", again)
				require.Equal(t, string(r.body), string(again.body))
			default:
				t.Fatalf("deposit %d: %s", i, r)
			}
		}
		require.Equal(t, 1, made)
		require.Equal(t, map[string]int64{"USD": 777}, u.balances(t), "credited once")
		require.Equal(t, u.balances(t), u.entrySums(t))
	})
}
