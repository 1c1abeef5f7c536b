package main_test

import (
	"context"
	"net/http"
	"regexp"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idem-dev/idem/cmd/internal/paymentsv1"
	"github.com/idem-dev/idem/internal/require"
)

var grpcListening = regexp.MustCompile(`msg="grpc listening" addr=(\S+)`)

// rawCodec hands the client a response's bytes as they came on the wire,
// and sends a request given as bytes as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return proto.Marshal(v.(proto.Message))
}
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func TestGRPC(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, newDB(t, store), "--grpc-addr", "127.0.0.1:0")
			m := grpcListening.FindStringSubmatch(s.stderr.String())
			require.NotNil(t, m, "no grpc listening line:\n%s", s.stderr.String())
			conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			client := paymentsv1.NewPaymentsClient(conn)
			u := s.newUser(t)
			call := func(key string) context.Context {
				ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+u.apiKey)
				if key != "" {
					ctx = metadata.AppendToOutgoingContext(ctx, "idempotency-key", key)
				}
				return ctx
			}

			// A retry gets the first response byte for byte, marked replayed.
			key := newKey()
			req := &paymentsv1.CreateDepositRequest{Currency: "USD", Amount: 10000}
			var first, again []byte
			var h1, h2 metadata.MD
			require.NoError(t, conn.Invoke(call(key), "/payments.v1.Payments/CreateDeposit", req, &first, grpc.ForceCodec(rawCodec{}), grpc.Header(&h1)))
			require.NoError(t, conn.Invoke(call(key), "/payments.v1.Payments/CreateDeposit", req, &again, grpc.ForceCodec(rawCodec{}), grpc.Header(&h2)))
			require.Equal(t, first, again, "byte for byte")
			require.Empty(t, h1.Get("idempotent-replayed"))
			require.Equal(t, []string{"true"}, h2.Get("idempotent-replayed"))
			d, err := client.CreateDeposit(call(key), req)
			require.NoError(t, err)
			require.Equal(t, int64(10000), d.GetAmount())
			require.NotEmpty(t, d.GetId())

			// The same key with another request: FailedPrecondition.
			_, err = client.CreateDeposit(call(key), &paymentsv1.CreateDepositRequest{Currency: "USD", Amount: 1})
			require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
			require.Equal(t, "key-reused", grpcReason(t, err)["reason"])
			// No key, no API key, an invalid request.
			_, err = client.CreateDeposit(call(""), req)
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			require.Equal(t, "key-missing", grpcReason(t, err)["reason"])
			_, err = client.CreateDeposit(metadata.AppendToOutgoingContext(context.Background(), "idempotency-key", newKey()), req)
			require.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
			require.Equal(t, "unauthorized", grpcReason(t, err)["reason"])
			_, err = client.CreateDeposit(call(newKey()), &paymentsv1.CreateDepositRequest{Currency: "USD", Amount: -5})
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			require.Equal(t, map[string]string{"reason": "invalid-request", "domain": "github.com/idem-dev/idem", "httpStatus": "400", "shouldRetry": "false"}, grpcReason(t, err))

			// A business refusal is final: stored and replayed with its code.
			key = newKey()
			big := &paymentsv1.CreateTransactionRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 1_000_000}
			_, err1 := client.CreateTransaction(call(key), big)
			var h metadata.MD
			_, err2 := client.CreateTransaction(call(key), big, grpc.Header(&h))
			require.Equal(t, codes.FailedPrecondition, status.Code(err1), "%v", err1)
			require.Equal(t, "insufficient-funds", grpcReason(t, err1)["reason"], "told apart from key-reused")
			require.Equal(t, status.Convert(err1).Message(), status.Convert(err2).Message())
			require.Equal(t, []string{"true"}, h.Get("idempotent-replayed"))

			tr, err := client.CreateTransaction(call(newKey()), &paymentsv1.CreateTransactionRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 1000})
			require.NoError(t, err)
			require.Equal(t, int64(920), tr.GetConvertedAmount())
			require.Equal(t, "0.92", tr.GetRate())
			require.Equal(t, map[string]int64{"USD": 9000, "EUR": 920}, u.balances(t), "each key moved money once")
			require.Equal(t, http.StatusOK, u.get(t, "/v1/deposits/"+d.GetId()).status)
		})
	}
}
