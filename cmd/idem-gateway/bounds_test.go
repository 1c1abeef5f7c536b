package main_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/proctest"
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
// connection's reader of the answer, and the connection.
func stall(t *testing.T, gw, auth, key string, size, sent int) (*bufio.Reader, net.Conn) {
	t.Helper()
	addr := strings.TrimPrefix(gw, "http://")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = fmt.Fprintf(conn, "POST /ok HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nIdempotency-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		addr, auth, key, size, strings.Repeat("x", sent))
	require.NoError(t, err)
	return bufio.NewReader(conn), conn
}

// refusal posts guarded requests, each with a fresh key, until one is
// refused by a bound (the gateway may not have read the stalled requests'
// headers yet), and returns its status and key; 0 if none is within 30 s.
func refusal(gw, auth, key string) (int, string) {
	for i, deadline := 0, time.Now().Add(30*time.Second); ; i++ {
		if time.Now().After(deadline) {
			return 0, ""
		}
		time.Sleep(20 * time.Millisecond)
		req, _ := http.NewRequest(http.MethodPost, gw+"/ok", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Authorization", auth)
		k := fmt.Sprintf("%s-%d", key, i)
		req.Header.Set("Idempotency-Key", k)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.Header.Get("Retry-After") != "" {
			return resp.StatusCode, k
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
	// One gateway whose body deadline the test waits for; one whose
	// deadline is far, so that stalled bodies hold their bounds until the
	// test lets them go, however busy the machine.
	// One gateway per bound, so that one subtest's stalled bodies, let go
	// asynchronously, never count against another's. The upstream may be
	// slow on a busy machine: its timeout is long.
	gw := startGateway(t, up, "--body-timeout", "2s", "--upstream-timeout", "1m")
	held := startGateway(t, up, "--body-timeout", "10m", "--requests-per-scope", "2", "--upstream-timeout", "1m")
	full := startGateway(t, up, "--body-timeout", "10m", "--body-memory-mb", "2", "--upstream-timeout", "1m")

	t.Run("StalledBody408", func(t *testing.T) {
		c, _ := stall(t, gw, "Bearer slow", "k-stall", 1<<20, 800<<10)
		resp, err := http.ReadResponse(c, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
		require.True(t, resp.Close, "the connection is closed")
		// The same key afterwards runs: nothing was stored.
		require.Equal(t, reply{201, `{"runs": 1}`, false}, post(t, gw, "/ok", "Bearer slow", "k-stall"))
	})
	var refused [][3]string // the gateway, scope and key of each request a bound refused
	t.Run("PerScope429", func(t *testing.T) {
		_, a := stall(t, held, "Bearer busy", "k-a", 1000, 10)
		_, b := stall(t, held, "Bearer busy", "k-b", 1000, 10)
		status, key := refusal(held, "Bearer busy", "k-c")
		require.Equal(t, http.StatusTooManyRequests, status, "a third request of the scope")
		refused = append(refused, [3]string{held, "Bearer busy", key})
		require.Equal(t, reply{201, `{"runs": 1}`, false}, post(t, held, "/ok", "Bearer other", "k-c"), "another scope is answered")
		_, _ = a.Close(), b.Close()
	})
	t.Run("Memory503", func(t *testing.T) {
		// Two stalled 1 MiB bodies hold the 2 MiB budget.
		_, a := stall(t, full, "Bearer m1", "k-m1", 1<<20, 10)
		_, b := stall(t, full, "Bearer m2", "k-m2", 1<<20, 10)
		status, key := refusal(full, "Bearer m3", "k-m3")
		require.Equal(t, http.StatusServiceUnavailable, status, "past the memory budget")
		refused = append(refused, [3]string{full, "Bearer m3", key})
		_, _ = a.Close(), b.Close()
	})
	t.Run("RefusalsStoredNothing", func(t *testing.T) {
		// The bounds let go once the stalled connections closed; the keys
		// refused run afresh.
		require.Len(t, refused, 2)
		for _, k := range refused {
			var r reply
			require.Eventually(t, func() bool {
				r = post(t, k[0], "/ok", k[1], k[2])
				return r.status != http.StatusTooManyRequests && r.status != http.StatusServiceUnavailable
			}, time.Minute, 50*time.Millisecond)
			require.Equal(t, reply{201, `{"runs": 1}`, false}, r, k[2])
		}
	})
	for _, e := range up.log(t) {
		require.NotContains(t, []string{"k-a", "k-b", "k-m1", "k-m2"}, e.Key)
	}
}

// TestHeaderBounds: a header block past --max-header-bytes gets 431 and
// its connection closed, one that stops arriving is closed at
// --header-timeout, and an idle keep-alive connection at --idle-timeout:
// none reaches the upstream.
func TestHeaderBounds(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	gw := startGateway(t, up, "--header-timeout", "300ms", "--idle-timeout", "300ms")
	addr := strings.TrimPrefix(gw, "http://")
	dial := func(t *testing.T) (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Minute)))
		return conn, bufio.NewReader(conn)
	}
	closed := func(t *testing.T, rd *bufio.Reader) {
		// EOF, or a reset: the gateway closes with the client's bytes unread.
		_, err := io.Copy(io.Discard, rd)
		require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "closed by the gateway, not by the test's deadline")
	}
	t.Run("TooLarge431", func(t *testing.T) {
		conn, rd := dial(t)
		go func() {
			_, _ = fmt.Fprintf(conn, "POST /ok HTTP/1.1\r\nHost: %s\r\n", addr)
			for i := range 128 { // 128 KiB, never ended: four times the bound
				if _, err := fmt.Fprintf(conn, "X-Pad-%d: %s\r\n", i, strings.Repeat("x", 1000)); err != nil {
					return
				}
			}
		}()
		resp, err := http.ReadResponse(rd, nil)
		require.NoError(t, err, "an answer before the header block ends")
		require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
		closed(t, rd)
	})
	t.Run("SlowClosed", func(t *testing.T) {
		conn, rd := dial(t)
		_, err := fmt.Fprintf(conn, "POST /ok HTTP/1.1\r\nHost: %s\r\nIdempotency-Key: ", addr)
		require.NoError(t, err)
		closed(t, rd)
	})
	t.Run("IdleClosed", func(t *testing.T) {
		conn, rd := dial(t)
		_, err := fmt.Fprintf(conn, "GET /ok HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		require.NoError(t, err)
		resp, err := http.ReadResponse(rd, nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		closed(t, rd)
	})
	for _, e := range up.log(t) {
		require.Equal(t, "/ok", e.Path, "nothing reached the upstream but the GET")
		require.Empty(t, e.Key)
	}
}

// TestHeaderBoundsConnsPerSource: the configuration file's
// limits.max_conns_per_source closes at once a source's connection past
// it, unanswered, and keeps the one within it.
func TestHeaderBoundsConnsPerSource(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	config := writeFile(t, "gateway.yaml", fmt.Sprintf("limits:\n  max_conns_per_source: 1\n  header_timeout: 1m\nupstreams:\n  - url: %s\n", up.url))
	addr := strings.TrimPrefix(startGatewayWith(t, "--config", config).url, "http://")
	statuses := make(chan int, 2) // 0: closed unanswered
	conns := make([]net.Conn, 2)
	for i := range conns {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		_, _ = fmt.Fprintf(conn, "GET /ok HTTP/1.1\r\nHost: %s\r\n", addr) // the second may be closed already
		conns[i] = conn
		go proctest.Answer(conn, time.Minute, statuses)
	}
	require.Zero(t, <-statuses, "the source's second connection closed at once, unanswered")
	for _, conn := range conns {
		_, _ = io.WriteString(conn, "\r\n")
	}
	require.Equal(t, http.StatusOK, <-statuses, "the first kept, and served once its headers end")
}
