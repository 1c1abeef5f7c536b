package main_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idem-dev/idem/cmd/internal/paymentsv1"
	"github.com/idem-dev/idem/internal/require"
)

// grpcUser is a user of a server's gRPC door.
type grpcUser struct {
	*user
	client paymentsv1.PaymentsClient
	conn   *grpc.ClientConn
}

// grpcDial connects to a server started with --grpc-addr, as u, with
// opts besides plaintext.
func grpcDial(t *testing.T, s *server, u *user, opts ...grpc.DialOption) *grpcUser {
	t.Helper()
	m := grpcListening.FindStringSubmatch(s.stderr.String())
	require.NotNil(t, m, "no grpc listening line:\n%s", s.stderr.String())
	conn, err := grpc.NewClient(m[1], append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &grpcUser{user: u, client: paymentsv1.NewPaymentsClient(conn), conn: conn}
}

// call is a context with u's API key and, when not "", an idempotency key.
func (u *grpcUser) call(key string) context.Context {
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+u.apiKey)
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "idempotency-key", key)
	}
	return ctx
}

// TestGRPCFinalRefusalReplays sends one deposit under two keys within a
// minute over gRPC: the second key's 409 duplicate-deposit is final, so it
// is stored, and its retry once the minute has turned replays the refusal
// instead of crediting the deposit a second time.
func TestGRPCFinalRefusalReplays(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			s := startServer(t, newDB(t, store), "--grpc-addr", "127.0.0.1:0")
			u := grpcDial(t, s, s.newUser(t))
			// Both keys must fall in one UTC minute.
			if now := time.Now(); now.Second() >= 50 {
				time.Sleep(now.Truncate(time.Minute).Add(time.Minute + 100*time.Millisecond).Sub(now))
			}
			req := &paymentsv1.CreateDepositRequest{Currency: "USD", Amount: 4242}
			_, err := u.client.CreateDeposit(u.call(newKey()), req)
			require.NoError(t, err)
			key := newKey()
			_, first := u.client.CreateDeposit(u.call(key), req)
			minute := time.Now().Truncate(time.Minute)
			require.NotNil(t, first)

			waitFor(t, func() bool { return time.Now().Truncate(time.Minute).After(minute) }, "the minute never turned")
			var h metadata.MD
			_, again := u.client.CreateDeposit(u.call(key), req, grpc.Header(&h))
			require.Equal(t, map[string]int64{"USD": 4242}, u.balances(t), "credited once")
			require.Equal(t, status.Convert(first).Proto(), status.Convert(again).Proto(), "the refusal replays: %v", again)
			require.Equal(t, []string{"true"}, h.Get("idempotent-replayed"))
			require.Equal(t, codes.AlreadyExists, status.Code(first), "a final refusal, not a retriable one: %v", first)
			require.Equal(t, "duplicate-deposit", grpcReason(t, first)["reason"])
			require.Equal(t, "409", grpcReason(t, first)["httpStatus"])
		})
	}
}

// grpcReason is err's google.rpc.ErrorInfo: its reason and domain (under
// those names) and its metadata.
func grpcReason(t *testing.T, err error) map[string]string {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			out := map[string]string{"reason": info.GetReason(), "domain": info.GetDomain()}
			for k, v := range info.GetMetadata() {
				out[k] = v
			}
			return out
		}
	}
	t.Fatalf("no ErrorInfo in %v", err)
	return nil
}
