package main_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/idem-dev/idem/cmd/internal/paymentsv1"
	"github.com/idem-dev/idem/internal/require"
)

// TestGRPCUnauthenticatedHoldsNothing opens, with no API key, 6
// connections of 90 reflection streams each, more than --body-memory-mb
// holds at 64 KiB a stream: none holds a byte of it (reflection is off by
// default, and needs a key when on), so an honest HTTP deposit is
// answered.
func TestGRPCUnauthenticatedHoldsNothing(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "sqlite"), "--grpc-addr", "127.0.0.1:0") // every other flag its default
	u := s.newUser(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 6 {
		conn := grpcConn(t, s)
		for range 90 {
			_, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
				reflectionv1.ServerReflection_ServerReflectionInfo_FullMethodName)
			require.NoError(t, err)
		}
		// The server reads a connection's calls in order: once this one
		// is answered, it has admitted or refused the 90 before it.
		_, err := paymentsv1.NewPaymentsClient(conn).GetRates(ctx, &paymentsv1.GetRatesRequest{})
		require.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
	}
	r := u.post(t, "/v1/deposits", newKey(), `{"currency":"USD","amount":1}`)
	require.Equal(t, http.StatusCreated, r.status, "an honest deposit during the streams: %s", r)
}

// TestGRPCReflection: reflection is served with --grpc-reflection only,
// and, as every call, to a caller with an API key.
func TestGRPCReflection(t *testing.T) {
	t.Parallel()
	list := func(t *testing.T, conn *grpc.ClientConn, apiKey string) ([]string, error) {
		t.Helper()
		ctx := context.Background()
		if apiKey != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+apiKey)
		}
		st, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		require.NoError(t, err)
		// A server that ends the stream at once (no such service, no key)
		// can do so before the request is sent: Send then says io.EOF, and
		// Recv has the status.
		err = st.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}})
		if !errors.Is(err, io.EOF) {
			require.NoError(t, err)
		}
		resp, err := st.Recv()
		if err != nil {
			return nil, err
		}
		var names []string
		for _, svc := range resp.GetListServicesResponse().GetService() {
			names = append(names, svc.GetName())
		}
		return names, st.CloseSend()
	}
	t.Run("OffByDefault", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, newDB(t, "sqlite"), "--grpc-addr", "127.0.0.1:0")
		_, err := list(t, grpcConn(t, s), s.newUser(t).apiKey)
		require.Equal(t, codes.Unimplemented, status.Code(err), "%v", err)
	})
	t.Run("OnWithKey", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, newDB(t, "sqlite"), "--grpc-addr", "127.0.0.1:0", "--grpc-reflection")
		conn := grpcConn(t, s)
		_, err := list(t, conn, "")
		require.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
		require.Equal(t, "unauthorized", grpcReason(t, err)["reason"])
		names, err := list(t, conn, s.newUser(t).apiKey)
		require.NoError(t, err)
		require.Contains(t, names, paymentsv1.Payments_ServiceDesc.ServiceName)
	})
}
