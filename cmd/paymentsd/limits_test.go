package main_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// rawConn is a client connection spoken to in raw HTTP/1.1: a request
// whose body stops arriving, or keep-alive requests.
type rawConn struct {
	conn net.Conn
	rd   *bufio.Reader
	gone bool // the server closed it (TestIdleConnsBound)
}

// stall sends a deposit whose headers declare declared bytes of body and
// whose body stops after sent.
func (u *user) stall(t *testing.T, key string, declared int, sent string) *rawConn {
	t.Helper()
	addr, err := url.Parse(u.s.url)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", addr.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = fmt.Fprintf(conn, "POST /v1/deposits HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nIdempotency-Key: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr.Host, u.apiKey, key, declared, sent)
	require.NoError(t, err)
	return &rawConn{conn: conn, rd: bufio.NewReader(conn)}
}

// reply reads the server's answer to the stalled request.
func (s *rawConn) reply(t *testing.T) reply {
	t.Helper()
	require.NoError(t, s.conn.SetReadDeadline(time.Now().Add(time.Minute)))
	resp, err := http.ReadResponse(s.rd, nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// TestBodyTimeout: a body that stops arriving gets 408 once the body
// deadline passes, and nothing is stored: the key is still free.
func TestBodyTimeout(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			s := startServer(t, newDB(t, store), "--body-timeout", "300ms")
			u := s.newUser(t)
			key := newKey()
			const body = `{"currency":"USD","amount":100}`
			r := u.stall(t, key, len(body), body[:10]).reply(t)
			require.Equal(t, http.StatusRequestTimeout, r.status, "%s", r)
			require.Equal(t, "body-timeout", r.problemType(t))
			require.Zero(t, u.storedKeys(t), "nothing stored")
			require.Empty(t, u.balances(t))

			ok := u.post(t, "/v1/deposits", key, body)
			require.Equal(t, http.StatusCreated, ok.status, "%s", ok)
			require.False(t, ok.replayed(), "the key was free")
		})
	}
}

// TestBodyBounds: while one request's body holds most of the body memory
// bound, another body that would pass it gets 503 overloaded; while a user
// has as many requests in flight as allowed, another of theirs gets 429.
// Both with Retry-After, both storing nothing; the bounds free as soon as
// the stalled request ends.
func TestBodyBounds(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			s := startServer(t, newDB(t, store), "--body-memory-mb", "1", "--requests-per-scope", "1", "--body-timeout", "1m")
			u, other := s.newUser(t), s.newUser(t)
			hold, r := holdInFlight(t, s, u)
			require.Equal(t, "too-many-requests", r.problemType(t))
			require.Equal(t, "1", r.header.Get("Retry-After"))

			// Another user: 700,000 + 400,000 bytes pass the 1 MiB bound.
			r = do(t, s, other, http.MethodPost, "/v1/deposits", `{"pad":"`+strings.Repeat("x", 400_000)+`"}`, "Idempotency-Key", newKey())
			require.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r)
			require.Equal(t, "overloaded", r.problemType(t))
			require.Equal(t, "1", r.header.Get("Retry-After"))
			// A small body still fits.
			ok := other.post(t, "/v1/deposits", newKey(), `{"currency":"USD","amount":100}`)
			require.Equal(t, http.StatusCreated, ok.status, "%s", ok)

			// The stalled client goes away: both bounds free.
			require.NoError(t, hold.conn.Close())
			for deadline := time.Now().Add(30 * time.Second); ; {
				r := u.post(t, "/v1/deposits", newKey(), `{"currency":"EUR","amount":100}`)
				if r.status == http.StatusCreated {
					break
				}
				require.Equal(t, http.StatusTooManyRequests, r.status, "%s", r)
				require.True(t, time.Now().Before(deadline), "the bound was not freed within 30s")
			}
			require.Equal(t, int64(1), u.storedKeys(t), "only the deposit that went through")
			require.Equal(t, int64(1), other.storedKeys(t))
			require.Equal(t, map[string]int64{"EUR": 100}, u.balances(t))
		})
	}
}

// holdInFlight stalls a deposit of u declaring 700,000 bytes, and returns
// it once it is in flight: when a one-byte request of u gets 429 (until
// then that request is a bad body: 400, nothing stored), with that 429. A
// probe that reaches the bound first makes the stalled deposit the one
// refused; it is then stalled again.
func holdInFlight(t *testing.T, s *server, u *user) (*rawConn, reply) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		hold := u.stall(t, newKey(), 700_000, `{"currency":`)
		refused := make(chan struct{})
		go func() {
			defer close(refused)
			_, _ = http.ReadResponse(hold.rd, nil)
		}()
	probe:
		for time.Now().Before(deadline) {
			r := do(t, s, u, http.MethodPost, "/v1/deposits", "x", "Idempotency-Key", newKey())
			if r.status == http.StatusTooManyRequests {
				return hold, r
			}
			require.Equal(t, http.StatusBadRequest, r.status, "%s", r)
			select {
			case <-refused:
				break probe
			default:
			}
		}
	}
	t.Fatalf("the stalled deposit was not in flight within 30s; paymentsd said:\n%s", s.stderr.String())
	return nil, reply{}
}

// TestIdleConnsBound: with --max-idle-conns 2, a third and a fourth
// keep-alive connection are closed as they go idle; the first two stay
// open and serve another request.
func TestIdleConnsBound(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "sqlite"), "--max-idle-conns", "2")
	addr, err := url.Parse(s.url)
	require.NoError(t, err)
	get := func(c *rawConn) {
		t.Helper()
		_, err := fmt.Fprintf(c.conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr.Host)
		require.NoError(t, err)
		r := c.reply(t)
		require.Equal(t, http.StatusOK, r.status, "%s", r)
	}
	conns := make([]*rawConn, 4)
	for i := range conns {
		conn, err := net.Dial("tcp", addr.Host)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		conns[i] = &rawConn{conn: conn, rd: bufio.NewReader(conn)}
		get(conns[i])
	}
	// The server closes a connection going idle past the bound: two of
	// the four, whichever its hook saw go idle last (the order a client
	// reads its replies in is not the order the server marks them idle).
	var open []*rawConn
	closed := 0
	for deadline := time.Now().Add(time.Minute); closed < 2; {
		require.True(t, time.Now().Before(deadline), "the server closed %d of 4 idle connections, want 2", closed)
		open, closed = open[:0], 0
		for _, c := range conns {
			if c.gone {
				closed++
				continue
			}
			require.NoError(t, c.conn.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
			_, err := c.rd.ReadByte()
			switch {
			case errors.Is(err, io.EOF):
				c.gone = true
				closed++
			case errors.Is(err, os.ErrDeadlineExceeded):
				open = append(open, c)
			default:
				require.NoError(t, err, "an idle connection sent something")
			}
		}
	}
	require.Len(t, open, 2, "the bound keeps two idle connections")
	for _, c := range open {
		require.NoError(t, c.conn.SetReadDeadline(time.Time{}))
		get(c)
	}
}
