package main_test

// Text a database cannot keep (a NUL byte, invalid UTF-8) and bodies that
// are not JSON, at every door of one paymentsd (docs/hostile.md).

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idem-dev/idem/cmd/internal/paymentsv1"
	"github.com/idem-dev/idem/internal/require"
)

// TestUnstorableText sends text PostgreSQL refuses to keep (NUL, which no
// text column takes) and control characters in a payout's destination, and
// in a deposit's currency: each is a final 400 (gRPC InvalidArgument),
// stored and replayed to its retry, never a 500 that every retry repeats;
// nothing is debited and the bank is never called.
func TestUnstorableText(t *testing.T) {
	t.Parallel()
	destinations := map[string]string{"NUL": "acct\x00-42", "Newline": "acct\n42", "Escape": "acct-\x1b[2J", "C1": "acct-\u0085"}
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			bankURL, accepted := blackhole(t)
			url := startNATS(t)
			s := startServer(t, newDB(t, store), "--bank-url", bankURL, "--bank-key-secret-file", secretFile(t),
				"--bank-timeout", "200ms", "--complete-interval", "1h", "--grpc-addr", "127.0.0.1:0", "--nats-url", url)
			u := grpcDial(t, s, s.newUser(t))
			u.deposit(t, "USD", 10000)
			for name, dest := range destinations {
				body := fmt.Sprintf(`{"currency":"USD","amount":2500,"destination":%q}`, dest)
				body = strings.ReplaceAll(body, `\x00`, `\u0000`) // Go's %q is not JSON's
				body = strings.ReplaceAll(body, `\x1b`, `\u001b`)
				key := newKey()
				r := u.post(t, "/v1/payouts", key, body)
				require.Equal(t, http.StatusBadRequest, r.status, "%s over HTTP: %s", name, r)
				require.Equal(t, "invalid-request", r.problemType(t), name)
				again := u.post(t, "/v1/payouts", key, body)
				require.Equal(t, http.StatusBadRequest, again.status, "%s's retry over HTTP: %s", name, again)
				require.True(t, again.replayed(), "%s: the 400 is stored", name)

				key = newKey()
				req := &paymentsv1.CreatePayoutRequest{Currency: "USD", Amount: 2500, Destination: dest}
				_, err := u.client.CreatePayout(u.call(key), req)
				require.Equal(t, codes.InvalidArgument, status.Code(err), "%s over gRPC: %v", name, err)
				var h metadata.MD
				_, err = u.client.CreatePayout(u.call(key), req, grpc.Header(&h))
				require.Equal(t, codes.InvalidArgument, status.Code(err), "%s's retry over gRPC: %v", name, err)
				require.Equal(t, []string{"true"}, h.Get("idempotent-replayed"), "%s: the refusal is stored", name)
			}

			nc := newNATSCommander(t, url, u.user)
			key := newKey()
			body := `{"currency":"US\u0000","amount":1}`
			r := u.post(t, "/v1/deposits", key, body)
			require.Equal(t, http.StatusBadRequest, r.status, "a NUL currency over HTTP: %s", r)
			m := nc.send(t, "deposits", key, body)
			require.Equal(t, http.StatusBadRequest, m.status, "a NUL currency over NATS: %s", m)
			require.True(t, m.replayed(), "the HTTP answer, replayed over NATS")
			m = nc.send(t, "deposits", newKey(), body)
			require.Equal(t, http.StatusBadRequest, m.status, "a NUL currency over NATS: %s", m)
			require.Contains(t, string(m.body), "invalid-request")

			require.Equal(t, map[string]int64{"USD": 10000}, u.balances(t), "nothing debited")
			require.Empty(t, accepted, "the bank was never called")
		})
	}
}

// TestInvalidUTF8 sends bodies whose bytes are not UTF-8 under a JSON
// Content-Type: 400 body-invalid, nothing stored, over HTTP and NATS. A
// gRPC string field of invalid UTF-8 never reaches paymentsd: grpc-go's
// decoder refuses the message, with Internal.
func TestInvalidUTF8(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			url := startNATS(t)
			s := startServer(t, newDB(t, store), "--nats-url", url, "--grpc-addr", "127.0.0.1:0")
			u := s.newUser(t)
			g := grpcDial(t, s, u)
			// CreateDepositRequest{currency: "US\xff", amount: 1}, as bytes:
			// proto.Marshal would refuse to write it.
			wire := []byte("\x0a\x03US\xff\x10\x01")
			err := g.conn.Invoke(g.call(newKey()), paymentsv1.Payments_CreateDeposit_FullMethodName, &wire, new([]byte), grpc.ForceCodec(rawCodec{}))
			require.Equal(t, codes.Internal, status.Code(err), "%v", err)
			nc := newNATSCommander(t, url, u)
			body := "{\"currency\":\"US\xff\",\"amount\":1}"
			r := u.post(t, "/v1/deposits", newKey(), body)
			require.Equal(t, http.StatusBadRequest, r.status, "over HTTP: %s", r)
			require.Equal(t, "body-invalid", r.problemType(t))
			m := nc.send(t, "deposits", newKey(), body)
			require.Equal(t, http.StatusBadRequest, m.status, "over NATS: %s", m)
			require.Contains(t, string(m.body), "body-invalid")
			require.Equal(t, int64(0), u.storedKeys(t), "nothing stored")

			// A raw byte that is not UTF-8 in the query: Go's server takes
			// it, and the key's record would keep it as text.
			conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
			require.NoError(t, err)
			defer conn.Close()
			_, err = fmt.Fprintf(conn, "POST /v1/deposits?note=\xff HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
				"Idempotency-Key: %s\r\nContent-Type: application/json\r\nContent-Length: 32\r\nConnection: close\r\n\r\n"+
				`{"currency":"USD","amount":1000}`, u.apiKey, newKey())
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a raw byte in the query: %s", b)
			require.Contains(t, string(b), "target-invalid")
			require.Equal(t, int64(0), u.storedKeys(t), "nothing stored")
			require.Empty(t, u.balances(t), "nothing moved")
		})
	}
}

// TestEmptyJSONBody sends an empty body that says it is JSON: it is
// malformed JSON like any other, 400 body-invalid and nothing stored, so
// the client's corrected request may use the same key; over HTTP and NATS
// (whose commands are JSON).
func TestEmptyJSONBody(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			url := startNATS(t)
			s := startServer(t, newDB(t, store), "--nats-url", url)
			u := s.newUser(t)
			key := newKey()
			r := do(t, s, u, http.MethodPost, "/v1/deposits", "", "Idempotency-Key", key, "Content-Type", "application/json")
			require.Equal(t, http.StatusBadRequest, r.status, "over HTTP: %s", r)
			require.Equal(t, "body-invalid", r.problemType(t))
			m := newNATSCommander(t, url, u).send(t, "deposits", newKey(), "")
			require.Equal(t, http.StatusBadRequest, m.status, "over NATS: %s", m)
			require.Contains(t, string(m.body), "body-invalid")
			require.Equal(t, int64(0), u.storedKeys(t), "nothing stored")
			r = u.post(t, "/v1/deposits", key, `{"currency":"USD","amount":100}`)
			require.Equal(t, http.StatusCreated, r.status, "the corrected request, same key: %s", r)
		})
	}
}
