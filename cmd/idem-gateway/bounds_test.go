package main_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// TestGuardCannotBeSkipped: on a guarded route, an Upgrade header that is
// no WebSocket handshake, or an Accept that asks for an event stream, is
// guarded like any request: the upstream runs the key once.
func TestGuardCannotBeSkipped(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	gw := startGateway(t, up)
	for name, header := range map[string][]string{
		"UpgradeFoo":  {"Upgrade", "foo", "Connection", "upgrade"},
		"EventStream": {"Accept", "text/event-stream, application/json"},
	} {
		key := "k-" + name
		for range 2 {
			resp, body := send(t, gw+"/ok", `{"amount":1}`, append([]string{"Authorization", "Bearer alice", "Idempotency-Key", key}, header...)...)
			require.Equal(t, http.StatusCreated, resp.StatusCode, "%s: %s", name, body)
			require.Equal(t, `{"runs": 1}`, body, name)
		}
		resp, body := send(t, gw+"/ok", `{"amount":1}`, append([]string{"Idempotency-Key", key + "-anon"}, header...)...)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s without a scope: %s", name, body)
	}
	for _, e := range up.log(t) {
		require.Regexp(t, `^[0-9a-f]{32}$`, e.Key, "the client's raw key never goes upstream")
	}
	require.Len(t, up.log(t), 2, "one run per key")
}

// stall opens a connection that sends a guarded POST's headers declaring
// size bytes, then sent bytes of its body, and stalls; it returns the
// connection's reader of the answer.
func stall(t *testing.T, gw, auth, key string, size, sent int) *bufio.Reader {
	t.Helper()
	addr := strings.TrimPrefix(gw, "http://")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = fmt.Fprintf(conn, "POST /ok HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nIdempotency-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		addr, auth, key, size, strings.Repeat("x", sent))
	require.NoError(t, err)
	return bufio.NewReader(conn)
}

// refusal posts guarded requests, each with a fresh key, until one is
// refused by a bound (the gateway may not have read the stalled requests'
// headers yet), and returns its status; 0 if none is within 30 s.
func refusal(gw, auth, key string) int {
	for i := 0; ; i++ {
		if i == 1500 {
			return 0
		}
		time.Sleep(20 * time.Millisecond)
		req, _ := http.NewRequest(http.MethodPost, gw+"/ok", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Authorization", auth)
		req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d", key, i))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.Header.Get("Retry-After") != "" {
			return resp.StatusCode
		}
	}
}

// TestBodyBounds: paymentsd's bounds hold at the gateway: a stalled body
// gets 408, a body past the memory budget 503 with Retry-After, a scope
// past its requests in flight 429 with Retry-After; nothing is stored,
// nothing reaches the upstream, and another scope is still answered.
func TestBodyBounds(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	gw := startGateway(t, up, "--body-timeout", "5s", "--body-memory-mb", "2", "--requests-per-scope", "2")

	t.Run("StalledBody408", func(t *testing.T) {
		resp, err := http.ReadResponse(stall(t, gw, "Bearer slow", "k-stall", 1<<20, 800<<10), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
		require.True(t, resp.Close, "the connection is closed")
		// The same key afterwards runs: nothing was stored.
		require.Equal(t, reply{201, `{"runs": 1}`, false}, post(t, gw, "/ok", "Bearer slow", "k-stall"))
	})
	t.Run("PerScope429", func(t *testing.T) {
		a := stall(t, gw, "Bearer busy", "k-a", 1000, 10)
		b := stall(t, gw, "Bearer busy", "k-b", 1000, 10)
		require.Equal(t, http.StatusTooManyRequests, refusal(gw, "Bearer busy", "k-c"), "a third request of the scope")
		require.Equal(t, reply{201, `{"runs": 1}`, false}, post(t, gw, "/ok", "Bearer other", "k-c"), "another scope is answered")
		for _, c := range []*bufio.Reader{a, b} {
			resp, err := http.ReadResponse(c, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
		}
		require.Equal(t, reply{201, `{"runs": 1}`, false}, post(t, gw, "/ok", "Bearer busy", "k-c"), "k-c stored nothing")
	})
	t.Run("Memory503", func(t *testing.T) {
		// Two stalled 1 MiB bodies hold the 2 MiB budget.
		a := stall(t, gw, "Bearer m1", "k-m1", 1<<20, 10)
		b := stall(t, gw, "Bearer m2", "k-m2", 1<<20, 10)
		require.Equal(t, http.StatusServiceUnavailable, refusal(gw, "Bearer m3", "k-m3"), "past the memory budget")
		for _, c := range []*bufio.Reader{a, b} {
			r, err := http.ReadResponse(c, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusRequestTimeout, r.StatusCode)
		}
		require.Equal(t, reply{201, `{"runs": 1}`, false}, post(t, gw, "/ok", "Bearer m3", "k-m3"), "k-m3 stored nothing")
	})
	for _, e := range up.log(t) {
		require.NotContains(t, []string{"k-a", "k-b", "k-m1", "k-m2"}, e.Key)
	}
}
