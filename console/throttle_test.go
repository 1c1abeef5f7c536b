package console

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// TestSignInThrottle: an address fails signInBurst sign-ins, then waits
// signInEvery for each; a success gives its token back; all addresses
// together stop at globalBurst; the addresses tracked stay bounded.
func TestSignInThrottle(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Run("PerAddress", func(t *testing.T) {
		t.Parallel()
		var th signInThrottle
		for range signInBurst {
			_, ok := th.take("10.0.0.1", now)
			require.True(t, ok)
		}
		wait, ok := th.take("10.0.0.1", now)
		require.False(t, ok)
		require.Equal(t, signInEvery, wait)
		_, ok = th.take("10.0.0.2", now)
		require.True(t, ok, "another address is not throttled")
		_, ok = th.take("10.0.0.1", now.Add(signInEvery))
		require.True(t, ok, "one more after signInEvery")
		_, ok = th.take("10.0.0.1", now.Add(signInEvery))
		require.False(t, ok)

		var good signInThrottle
		for range 3 * signInBurst {
			_, ok := good.take("10.0.0.3", now)
			require.True(t, ok)
			good.refund("10.0.0.3", now)
		}
	})
	t.Run("Global", func(t *testing.T) {
		t.Parallel()
		var th signInThrottle
		for i := range globalBurst {
			_, ok := th.take(fmt.Sprintf("10.1.%d.%d", i/256, i%256), now)
			require.True(t, ok)
		}
		wait, ok := th.take("10.2.0.1", now)
		require.False(t, ok, "over the global limit")
		require.Equal(t, globalEvery, wait)
		_, ok = th.take("10.2.0.1", now.Add(globalEvery))
		require.True(t, ok)
	})
	t.Run("Bounded", func(t *testing.T) {
		t.Parallel()
		var th signInThrottle
		at := now
		for i := range maxTrackedAddrs {
			at = at.Add(globalEvery) // within the global limit
			_, ok := th.take(fmt.Sprintf("10.3.%d.%d", i/256, i%256), at)
			require.True(t, ok)
		}
		require.Len(t, th.byAddr, maxTrackedAddrs)
		_, ok := th.take("10.4.0.1", now.Add(signInEvery))
		require.False(t, ok, "full, and no bucket filled again: a new address waits")
		require.Len(t, th.byAddr, maxTrackedAddrs)
		_, ok = th.take("10.4.0.1", at.Add(signInEvery))
		require.True(t, ok, "the filled buckets are forgotten")
		require.Len(t, th.byAddr, 1)
	})
	t.Run("IPv6By64", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct{ remote, want string }{
			{"127.0.0.1:5000", "127.0.0.1"},
			{"[2001:db8:1:2:aaaa::1]:5000", "2001:db8:1:2::/64"},
			{"[2001:db8:1:2:bbbb::9]:1", "2001:db8:1:2::/64"},
		} {
			require.Equal(t, c.want, clientAddr(&http.Request{RemoteAddr: c.remote}))
		}
	})
}
