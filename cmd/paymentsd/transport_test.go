package main_test

import (
	"bufio"
	"bytes"
	"context"
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

	"github.com/jackc/pgx/v5"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idem-dev/idem/cmd/internal/paymentsv1"
	"github.com/idem-dev/idem/internal/proctest"
	"github.com/idem-dev/idem/internal/require"
)

// The bounds that hold while a request's headers, or a gRPC call's
// message, arrive: before authentication, before any handler.

// dialAPI opens a raw connection to s's HTTP listener.
func dialAPI(t *testing.T, s *server) (net.Conn, string) {
	t.Helper()
	u, err := url.Parse(s.url)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn, u.Host
}

// closedByServer reads conn to its end: it fails the test if the server
// has not closed it within patience.
func closedByServer(t *testing.T, rd io.Reader, conn net.Conn) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(patience)))
	_, err := io.Copy(io.Discard, rd)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server did not close the connection within %v", patience)
	}
}

// TestHeaderBounds: a header block past --max-header-bytes gets 431 and
// its connection closed; one that stops arriving is closed at
// --header-timeout; past --max-conns a connection is not served until
// another closes.
func TestHeaderBounds(t *testing.T) {
	t.Parallel()
	t.Run("TooLarge431", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, newDB(t, "sqlite"))
		conn, host := dialAPI(t, s)
		// 64 KiB of header lines, never ended: four times the default bound.
		go func() {
			_, _ = fmt.Fprintf(conn, "POST /v1/deposits HTTP/1.1\r\nHost: %s\r\n", host)
			for i := range 64 {
				if _, err := fmt.Fprintf(conn, "X-Pad-%d: %s\r\n", i, strings.Repeat("x", 1000)); err != nil {
					return // the server answered and closed
				}
			}
		}()
		rd := bufio.NewReader(conn)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(patience)))
		resp, err := http.ReadResponse(rd, nil)
		require.NoError(t, err, "an answer before the header block ends")
		require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
		closedByServer(t, rd, conn)
	})
	t.Run("SlowClosed", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, newDB(t, "sqlite"), "--header-timeout", "300ms")
		conn, host := dialAPI(t, s)
		_, err := fmt.Fprintf(conn, "POST /v1/deposits HTTP/1.1\r\nHost: %s\r\nIdempotency-Key: ", host)
		require.NoError(t, err)
		closedByServer(t, conn, conn)
	})
	t.Run("MaxConns", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, newDB(t, "sqlite"), "--max-conns", "2", "--header-timeout", "1m")
		held := make([]net.Conn, 2)
		for i := range held {
			conn, host := dialAPI(t, s)
			_, err := fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n", host) // headers never ended
			require.NoError(t, err)
			held[i] = conn
		}
		third, host := dialAPI(t, s)
		_, err := fmt.Fprintf(third, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		require.NoError(t, err)
		rd := bufio.NewReader(third)
		require.NoError(t, third.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
		_, err = rd.Peek(1)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the third connection is not served while two are open")
		require.NoError(t, held[0].Close())
		require.NoError(t, third.SetReadDeadline(time.Now().Add(patience)))
		resp, err := http.ReadResponse(rd, nil)
		require.NoError(t, err, "served once a connection closed")
		require.Equal(t, http.StatusOK, resp.StatusCode)
	})
	t.Run("MaxConnsPerSource", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, newDB(t, "sqlite"), "--max-conns", "6", "--max-conns-per-source", "2", "--header-timeout", "1m")
		// One source opens the whole --max-conns, each header block unfinished.
		conns := make([]net.Conn, 6)
		statuses := make(chan int, len(conns)) // 0: closed unanswered
		for i := range conns {
			conn, host := dialAPI(t, s)
			_, _ = fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n", host) // it may be closed already
			conns[i] = conn
			go proctest.Answer(conn, patience, statuses)
		}
		for range 4 {
			require.Zero(t, <-statuses, "past --max-conns-per-source, closed at once, unanswered")
		}
		// Another source is served at once: the first holds 2 places, not 6.
		other := &http.Client{Timeout: patience, Transport: &http.Transport{DialContext: (&net.Dialer{
			LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
		resp, err := other.Get(s.url + "/healthz")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		// The first source's 2 connections were kept: ended, their requests are served.
		for _, conn := range conns {
			_, _ = io.WriteString(conn, "\r\n")
		}
		for range 2 {
			require.Equal(t, http.StatusOK, <-statuses)
		}
	})
}

// TestGRPCConnsPerSource: --max-conns-per-source bounds the gRPC listener
// too: a source's connection past it is closed at once, before the
// server's SETTINGS, and another source's calls are served.
func TestGRPCConnsPerSource(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "sqlite"), "--grpc-addr", "127.0.0.1:0", "--grpc-max-conns", "3",
		"--max-conns-per-source", "2", "--header-timeout", "1m")
	m := grpcListening.FindStringSubmatch(s.stderr.String())
	require.NotNil(t, m, "no grpc listening line:\n%s", s.stderr.String())
	// One source opens the whole --grpc-max-conns and never sends its preface.
	firstReads := make(chan error, 3)
	for range 3 {
		conn, err := net.Dial("tcp", m[1])
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		go func() {
			_ = conn.SetReadDeadline(time.Now().Add(patience))
			_, err := conn.Read(make([]byte, 1))
			firstReads <- err
		}()
	}
	var served, closed int
	for range 3 {
		err := <-firstReads
		require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "the server wrote or closed")
		if err == nil {
			served++
		} else {
			closed++
		}
	}
	require.Equal(t, 2, served, "the server's SETTINGS on the source's first 2 connections")
	require.Equal(t, 1, closed, "the third closed at once")
	u := grpcDial(t, s, s.newUser(t), grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext(ctx, "tcp", addr)
	}))
	_, err := u.client.GetRates(u.call(""), &paymentsv1.GetRatesRequest{})
	require.NoError(t, err, "another source is served")
}

// grpcConn dials s's gRPC listener.
func grpcConn(t *testing.T, s *server) *grpc.ClientConn {
	t.Helper()
	m := grpcListening.FindStringSubmatch(s.stderr.String())
	require.NotNil(t, m, "no grpc listening line:\n%s", s.stderr.String())
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// openCall opens a CreateDeposit call with apiKey, sends no message, and
// returns the server's answer: its status, never the client's deadline
// (the call has none).
func openCall(t *testing.T, conn *grpc.ClientConn, apiKey string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(),
		"authorization", "Bearer "+apiKey, "idempotency-key", newKey()))
	defer cancel()
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, paymentsv1.Payments_CreateDeposit_FullMethodName)
	require.NoError(t, err)
	answer := make(chan error, 1)
	go func() { answer <- st.RecvMsg(new(paymentsv1.Deposit)) }()
	select {
	case err := <-answer:
		return err
	case <-time.After(patience):
		t.Fatalf("the server did not end the call within %v", patience)
		return nil
	}
}

// TestGRPCTransportBounds: a message past --grpc-max-message-bytes is
// ResourceExhausted before the service; a call with an unknown API key is
// refused from its headers, its message never read; a call whose message
// does not arrive within --body-timeout ends DeadlineExceeded and frees
// its user's place.
func TestGRPCTransportBounds(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "sqlite"), "--grpc-addr", "127.0.0.1:0", "--body-timeout", "300ms", "--requests-per-scope", "1")
	u := grpcDial(t, s, s.newUser(t))
	conn := grpcConn(t, s)

	t.Run("MessageTooLarge", func(t *testing.T) {
		_, err := u.client.CreateDeposit(u.call(newKey()), &paymentsv1.CreateDepositRequest{Currency: strings.Repeat("U", 20<<10), Amount: 1})
		require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
		require.Zero(t, u.storedKeys(t), "nothing stored")
	})
	t.Run("UnknownKeyUnread", func(t *testing.T) {
		err := openCall(t, conn, "sk_unknown")
		require.Equal(t, codes.Unauthenticated, status.Code(err), "answered from the headers: %v", err)
		require.Equal(t, "unauthorized", grpcReason(t, err)["reason"])
	})
	t.Run("StalledMessage", func(t *testing.T) {
		err := openCall(t, conn, u.apiKey)
		require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
		// The stalled call held the user's one place; it is free again.
		waitFor(t, func() bool {
			_, err := u.client.CreateDeposit(u.call(newKey()), &paymentsv1.CreateDepositRequest{Currency: "USD", Amount: 100})
			require.True(t, err == nil || status.Code(err) == codes.ResourceExhausted, "%v", err)
			return err == nil
		}, "the user's place was not freed")
	})
}

// TestGRPCAuthenticationBounded: the tap's database read, which holds the
// connection's reader, gives up after 2 s: with the API keys locked, a
// call is Unavailable instead of waiting for its own deadline.
func TestGRPCAuthenticationBounded(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "postgres"), "--grpc-addr", "127.0.0.1:0")
	u := grpcDial(t, s, s.newUser(t))
	ctx := context.Background()
	db, err := pgx.Connect(ctx, s.connURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(ctx) })
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	call, cancel := context.WithTimeout(u.call(""), patience)
	defer cancel()
	start := time.Now()
	_, err = u.client.GetRates(call, &paymentsv1.GetRatesRequest{})
	t.Logf("GetRates with the API keys locked: %v after %v", status.Code(err), time.Since(start).Round(time.Millisecond))
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	require.Equal(t, "unavailable", grpcReason(t, err)["reason"])
}

// h2Conn is a raw HTTP/2 connection to paymentsd's gRPC listener.
type h2Conn struct {
	fr   *http2.Framer
	conn net.Conn
}

func dialH2(t *testing.T, s *server) *h2Conn {
	t.Helper()
	m := grpcListening.FindStringSubmatch(s.stderr.String())
	require.NotNil(t, m, "no grpc listening line:\n%s", s.stderr.String())
	conn, err := net.Dial("tcp", m[1])
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(patience)))
	_, err = io.WriteString(conn, http2.ClientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	require.NoError(t, fr.WriteSettings())
	return &h2Conn{fr: fr, conn: conn}
}

// headers opens stream id for CreateDeposit as apiKey, with extra fields.
func (c *h2Conn) headers(t *testing.T, id uint32, apiKey string, extra ...hpack.HeaderField) {
	t.Helper()
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":authority", Value: "paymentsd"},
		{Name: ":path", Value: paymentsv1.Payments_CreateDeposit_FullMethodName}, {Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"}, {Name: "authorization", Value: "Bearer " + apiKey}, {Name: "idempotency-key", Value: newKey()},
	}, extra...) {
		require.NoError(t, enc.WriteField(f))
	}
	block := b.Bytes()
	first := min(len(block), 16<<10)
	require.NoError(t, c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:first], EndHeaders: first == len(block)}))
	for rest := block[first:]; len(rest) > 0; {
		n := min(len(rest), 16<<10)
		require.NoError(t, c.fr.WriteContinuation(id, n == len(rest), rest[:n]))
		rest = rest[n:]
	}
}

// next reads frames until one about stream id (or the connection: a
// GOAWAY), skipping SETTINGS, pings and window updates.
func (c *h2Conn) next(t *testing.T, id uint32) http2.Frame {
	t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		require.NoError(t, err)
		if f.Header().StreamID == id || f.Header().Type == http2.FrameGoAway {
			return f
		}
	}
}

// TestGRPCStreamsAndMetadata: the server announces --grpc-max-streams and
// the metadata bound; a stream past the first is refused, unread; a
// metadata block past --max-header-bytes is refused before any handler.
func TestGRPCStreamsAndMetadata(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "sqlite"), "--grpc-addr", "127.0.0.1:0", "--grpc-max-streams", "2", "--body-timeout", "1m")
	u := s.newUser(t)
	c := dialH2(t, s)
	settings := map[http2.SettingID]uint32{}
	for len(settings) == 0 {
		f, err := c.fr.ReadFrame()
		require.NoError(t, err)
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			require.NoError(t, sf.ForeachSetting(func(s http2.Setting) error { settings[s.ID] = s.Val; return nil }))
		}
	}
	require.Equal(t, uint32(2), settings[http2.SettingMaxConcurrentStreams])
	require.Equal(t, uint32(16<<10), settings[http2.SettingMaxHeaderListSize])

	t.Run("ThirdStreamRefused", func(t *testing.T) {
		c.headers(t, 1, u.apiKey)
		c.headers(t, 3, u.apiKey)
		c.headers(t, 5, u.apiKey)
		f := c.next(t, 5)
		rst, ok := f.(*http2.RSTStreamFrame)
		require.True(t, ok, "want RST_STREAM, got %v", f)
		require.Equal(t, http2.ErrCodeRefusedStream, rst.ErrCode)
	})
	t.Run("MetadataTooLarge", func(t *testing.T) {
		c := dialH2(t, s)
		var pad []hpack.HeaderField
		for i := range 8 {
			pad = append(pad, hpack.HeaderField{Name: fmt.Sprintf("x-pad-%d", i), Value: strings.Repeat("x", 4<<10)})
		}
		c.headers(t, 1, u.apiKey, pad...)
		// The stream reset, or the connection closed: never an answer.
		for {
			f, err := c.fr.ReadFrame()
			if errors.Is(err, io.EOF) {
				return
			}
			require.NoError(t, err)
			switch f := f.(type) {
			case *http2.RSTStreamFrame:
				require.NotEqual(t, http2.ErrCodeNo, f.ErrCode)
				return
			case *http2.GoAwayFrame:
				return
			case *http2.HeadersFrame, *http2.MetaHeadersFrame:
				t.Fatalf("the stream was answered: %v", f)
			}
		}
	})
}

// TestGRPCHandlerOutlivesBodyTimeout: --body-timeout bounds a message's
// arrival, not the call: a deposit whose message arrived, waiting on its
// balance's lock for longer than the timeout, is answered once the lock
// goes.
func TestGRPCHandlerOutlivesBodyTimeout(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "postgres"), "--grpc-addr", "127.0.0.1:0", "--body-timeout", "200ms")
	u := grpcDial(t, s, s.newUser(t))
	_, err := u.client.CreateDeposit(u.call(newKey()), &paymentsv1.CreateDepositRequest{Currency: "USD", Amount: 1})
	require.NoError(t, err)
	release := lockBalances(t, s, u.user)
	answered := make(chan error, 1)
	go func() {
		_, err := u.client.CreateDeposit(u.call(newKey()), &paymentsv1.CreateDepositRequest{Currency: "USD", Amount: 2})
		answered <- err
	}()
	waitForLockWait(t, s, 1)
	time.Sleep(5 * 200 * time.Millisecond) // the call outlives its message's deadline
	release()
	require.NoError(t, <-answered)
	require.Equal(t, map[string]int64{"USD": 3}, u.balances(t))
}
