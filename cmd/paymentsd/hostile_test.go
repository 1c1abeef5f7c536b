package main_test

// Inputs of a hostile or careless client, at every door of one paymentsd
// (docs/hostile.md lists them).

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idem-dev/idem/cmd/internal/paymentsv1"
	"github.com/idem-dev/idem/internal/require"
)

// maxRefusal bounds the answer to an invalid request, and what is stored
// of it, whatever the request's size.
const maxRefusal = 4 << 10

// TestHugeInvalidInput sends deposits whose invalid parts are hundreds of
// kilobytes: each is refused with a bounded 400 that is stored and
// replayed, never a 500 that claims an effect, over HTTP, NATS and gRPC.
func TestHugeInvalidInput(t *testing.T) {
	t.Parallel()
	var members strings.Builder
	for i := 0; members.Len() < 400<<10; i++ {
		fmt.Fprintf(&members, `,"m%d":0`, i)
	}
	bodies := map[string]string{
		"Currency600KB":       `{"currency":"` + strings.Repeat("A", 600<<10) + `","amount":1}`,
		"UnknownMembers400KB": `{"currency":"USD","amount":1` + members.String() + `}`,
		"MemberName400KB":     `{"currency":"USD","amount":1,"` + strings.Repeat("n", 400<<10) + `":0}`,
	}
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			url := startNATS(t)
			s := startServer(t, newDB(t, store), "--grpc-addr", "127.0.0.1:0", "--nats-url", url)
			u := s.newUser(t)
			nc := newNATSCommander(t, url, u)
			stored := func(key string) int64 {
				return s.sqlInt(t, fmt.Sprintf(`SELECT length(response_body) FROM idempotency_keys WHERE idempotency_key = '%s'`, key))
			}
			for name, body := range bodies {
				key := newKey()
				r := u.post(t, "/v1/deposits", key, body)
				require.Equal(t, http.StatusBadRequest, r.status, "%s over HTTP: %.300s", name, r)
				require.Equal(t, "invalid-request", r.problemType(t))
				require.Less(t, len(r.body), maxRefusal, "%s over HTTP: %.300s", name, r)
				require.Less(t, stored(key), int64(maxRefusal))
				require.True(t, u.post(t, "/v1/deposits", key, body).replayed())

				key = newKey()
				m := nc.send(t, "deposits", key, body)
				require.Equal(t, http.StatusBadRequest, m.status, "%s over NATS: %.300s", name, m)
				require.Less(t, len(m.body), maxRefusal, "%s over NATS: %.300s", name, m)
				require.Less(t, stored(key), int64(maxRefusal))
			}
			require.Empty(t, u.balances(t), "nothing moved")

			m := grpcListening.FindStringSubmatch(s.stderr.String())
			require.NotNil(t, m, "no grpc listening line:\n%s", s.stderr.String())
			conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			key := newKey()
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+u.apiKey, "idempotency-key", key)
			// The largest currency --grpc-max-message-bytes lets reach the service.
			_, err = paymentsv1.NewPaymentsClient(conn).CreateDeposit(ctx, &paymentsv1.CreateDepositRequest{Currency: strings.Repeat("A", 16<<10-64), Amount: 1})
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%.300v", err)
			require.Less(t, len(status.Convert(err).Message()), maxRefusal)
			require.Less(t, stored(key), int64(maxRefusal))
		})
	}
}
