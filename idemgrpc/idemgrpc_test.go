package idemgrpc_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemgrpc"
	"github.com/idem-dev/idem/internal/require"
)

// TestInterceptor drives the interceptor with a real client over loopback
// on each store, in both modes.
func TestInterceptor(t *testing.T) {
	t.Parallel()
	for _, mode := range []idem.Mode{idem.ModeLeased, idem.ModeAtomic} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			run(t, idem.Config{Mode: mode})
		})
	}
}

func run(t *testing.T, cfg idem.Config) {
	newServer := func(t *testing.T, unary unaryFunc) (*server, backend) {
		b := newBackend(t)
		return newServer(t, b.store, cfg, unary), b
	}

	t.Run("RetryReplaysByteForByte", func(t *testing.T) {
		t.Parallel()
		s, _ := newServer(t, nil)
		key := uuid.NewString()
		first, h1 := s.raw(t, unaryCall, "alice", key, payload("pay 100"))
		again, h2 := s.raw(t, unaryCall, "alice", key, payload("pay 100"))
		require.Empty(t, h1.Get(idemgrpc.MetadataReplayed), "the first call is not a replay")
		require.Equal(t, []string{"true"}, h2.Get(idemgrpc.MetadataReplayed))
		require.Equal(t, first, again, "byte for byte")
		var resp testpb.SimpleResponse
		require.NoError(t, proto.Unmarshal(again, &resp))
		require.Equal(t, "pay 100", string(resp.GetPayload().GetBody()))
		require.Equal(t, key, resp.GetUsername(), "the handler saw the key")
		r := s.unary(t, "alice", key, payload("pay 100"))
		require.NoError(t, r.err)
		require.True(t, r.replayed(t))
		require.True(t, proto.Equal(&resp, r.resp), "a typed client decodes the replay")
		require.Equal(t, int32(1), s.svc.runs.Load())
	})

	t.Run("FingerprintIsDeterministic", func(t *testing.T) {
		t.Parallel()
		s, _ := newServer(t, nil)
		// Maps serialize in Go's random iteration order unless
		// deterministically: each retry must still match the first.
		report := &testpb.TestOrcaReport{RequestCost: map[string]float64{}, Utilization: map[string]float64{}}
		for i := range 32 {
			report.RequestCost[fmt.Sprintf("cost-%d", i)] = float64(i)
			report.Utilization[fmt.Sprintf("util-%d", i)] = float64(i) / 64
		}
		req := &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("maps")}, OrcaPerQueryReport: report}
		key := uuid.NewString()
		require.NoError(t, s.unary(t, "alice", key, req).err)
		for range 5 {
			r := s.unary(t, "alice", key, req)
			require.NoError(t, r.err)
			require.True(t, r.replayed(t))
		}
		require.Equal(t, int32(1), s.svc.runs.Load())
	})

	t.Run("KeyReusedWithAnotherRequest", func(t *testing.T) {
		t.Parallel()
		s, _ := newServer(t, nil)
		key := uuid.NewString()
		require.NoError(t, s.unary(t, "alice", key, payload("pay 100")).err)
		r := s.unary(t, "alice", key, payload("pay 200"))
		require.Equal(t, codes.FailedPrecondition, status.Code(r.err), "%v", r.err)
		requireReason(t, r.err, idem.ProblemKeyReused, "422")
		require.False(t, r.replayed(t))
		// The same key and the same request bytes (none) on another
		// method: the fingerprint covers the full method.
		key = uuid.NewString()
		require.NoError(t, s.unary(t, "alice", key, &testpb.SimpleRequest{}).err)
		_, err := s.client.EmptyCall(callCtx(context.Background(), "alice", key), &testpb.Empty{})
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
		require.Equal(t, codes.FailedPrecondition, s.lastCode(t))
		require.Equal(t, int32(2), s.svc.runs.Load())
	})

	t.Run("KeyMissingOrInvalid", func(t *testing.T) {
		t.Parallel()
		s, _ := newServer(t, nil)
		r := s.unary(t, "alice", "", payload("pay"))
		require.Equal(t, codes.InvalidArgument, status.Code(r.err), "%v", r.err)
		requireReason(t, r.err, idem.ProblemKeyMissing, "400")
		require.Contains(t, status.Convert(r.err).Message(), idemgrpc.MetadataKey+" metadata", "the key is named as gRPC carries it")
		r = s.unary(t, "alice", strings.Repeat("k", 256), payload("pay"))
		require.Equal(t, codes.InvalidArgument, status.Code(r.err), "a key past 255 characters: %v", r.err)
		requireReason(t, r.err, idem.ProblemKeyInvalid, "400")
		ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs("x-user", "alice", idemgrpc.MetadataKey, "k1", idemgrpc.MetadataKey, "k2"))
		_, err := s.client.UnaryCall(ctx, payload("pay"))
		require.Equal(t, codes.InvalidArgument, status.Code(err), "two keys: %v", err)
		require.Zero(t, s.svc.runs.Load())
		// A method MethodFunc leaves out needs no key.
		for range 2 {
			_, err := s.client.CacheableUnaryCall(callCtx(context.Background(), "alice", ""), payload("read"))
			require.NoError(t, err)
		}
		require.Equal(t, int32(2), s.svc.runs.Load())
	})

	t.Run("NoUserStoresNothing", func(t *testing.T) {
		t.Parallel()
		s, _ := newServer(t, nil)
		key := uuid.NewString()
		r := s.unary(t, "", key, payload("pay"))
		require.Equal(t, codes.Unauthenticated, status.Code(r.err), "%v", r.err)
		requireReason(t, r.err, idem.ProblemScopeMissing, "401")
		require.Zero(t, s.svc.runs.Load())
		r = s.unary(t, "alice", key, payload("pay"))
		require.NoError(t, r.err)
		require.False(t, r.replayed(t), "nothing was stored for the key")
		// Keys are scoped by user: bob's same key is bob's own.
		r = s.unary(t, "bob", key, payload("another"))
		require.NoError(t, r.err)
		require.False(t, r.replayed(t))
		require.Equal(t, int32(2), s.svc.runs.Load())
	})

	t.Run("StoredErrorKeepsItsDetails", func(t *testing.T) {
		t.Parallel()
		s, _ := newServer(t, func(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			st, err := status.New(codes.FailedPrecondition, "card declined").WithDetails(&testpb.Payload{Body: []byte("insufficient funds")})
			if err != nil {
				return nil, err
			}
			return nil, st.Err()
		})
		key := uuid.NewString()
		first := s.unary(t, "alice", key, payload("pay"))
		again := s.unary(t, "alice", key, payload("pay"))
		require.Equal(t, codes.FailedPrecondition, status.Code(first.err), "%v", first.err)
		require.False(t, first.replayed(t))
		require.True(t, again.replayed(t))
		require.True(t, proto.Equal(status.Convert(first.err).Proto(), status.Convert(again.err).Proto()), "%v != %v", first.err, again.err)
		require.Len(t, status.Convert(again.err).Details(), 1)
		require.Equal(t, int32(1), s.svc.runs.Load())
	})

	t.Run("PanicFreesTheKey", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		s, _ := newServer(t, func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			if calls.Add(1) == 1 {
				panic("handler bug")
			}
			return echo(ctx, req)
		})
		key := uuid.NewString()
		r := s.unary(t, "alice", key, payload("pay"))
		require.Equal(t, codes.Internal, status.Code(r.err), "%v", r.err)
		require.Contains(t, status.Convert(r.err).Message(), "handler bug", "the panic reached the recovery interceptor")
		r = s.unary(t, "alice", key, payload("pay"))
		require.NoError(t, r.err, "the retry runs")
		require.False(t, r.replayed(t))
		require.Equal(t, int32(2), s.svc.runs.Load())
	})

	t.Run("StoreUnavailable", func(t *testing.T) {
		t.Parallel()
		s, b := newServer(t, nil)
		b.down()
		r := s.unary(t, "alice", uuid.NewString(), payload("pay"))
		require.Equal(t, codes.Unavailable, status.Code(r.err), "%v", r.err)
		requireReason(t, r.err, idem.ProblemStoreUnavailable, "503")
		requireRetryAfter(t, r.err)
		require.Zero(t, s.svc.runs.Load(), "the handler does not run without its key")
	})

	if cfg.Mode == idem.ModeLeased {
		t.Run("InFlightIsAborted", func(t *testing.T) {
			t.Parallel()
			entered, release := make(chan struct{}), make(chan struct{})
			s, _ := newServer(t, func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
				close(entered)
				<-release
				return echo(ctx, req)
			})
			key := uuid.NewString()
			done := make(chan reply, 1)
			go func() { done <- s.unary(t, "alice", key, payload("pay")) }()
			<-entered
			r := s.unary(t, "alice", key, payload("pay"))
			require.Equal(t, codes.Aborted, status.Code(r.err), "%v", r.err)
			requireReason(t, r.err, idem.ProblemInFlight, "409")
			requireRetryAfter(t, r.err)
			close(release)
			require.NoError(t, (<-done).err)
			r = s.unary(t, "alice", key, payload("pay"))
			require.NoError(t, r.err)
			require.True(t, r.replayed(t))
			require.Equal(t, int32(1), s.svc.runs.Load())
		})

		t.Run("CallOutlivesItsClient", func(t *testing.T) {
			t.Parallel()
			entered, release := make(chan struct{}), make(chan struct{})
			s, _ := newServer(t, func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
				close(entered)
				<-release
				return echo(ctx, req)
			})
			key := uuid.NewString()
			s.leave(t, "alice", key, entered)
			close(release)
			// The detached handler's answer is stored: once it is, the
			// retry replays it.
			var r reply
			require.Eventually(t, func() bool {
				r = s.unary(t, "alice", key, payload("pay"))
				return status.Code(r.err) != codes.Aborted
			}, time.Minute, 10*time.Millisecond)
			require.NoError(t, r.err)
			require.True(t, r.replayed(t))
			require.Equal(t, int32(1), s.svc.runs.Load())
		})
	}

	if cfg.Mode == idem.ModeAtomic {
		t.Run("CanceledBeforeCommitIsRolledBack", func(t *testing.T) {
			t.Parallel()
			entered := make(chan struct{})
			var calls atomic.Int32
			s, _ := newServer(t, func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
				if calls.Add(1) == 1 {
					close(entered)
					<-ctx.Done() // the client left
				}
				return echo(ctx, req)
			})
			key := uuid.NewString()
			s.leave(t, "alice", key, entered)
			require.Eventually(t, func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return len(s.codes) == 1
			}, time.Minute, 10*time.Millisecond, "the server never ended the call")
			require.Equal(t, codes.Canceled, s.lastCode(t), "the interceptor's own answer")
			r := s.unary(t, "alice", key, payload("pay"))
			require.NoError(t, r.err, "nothing was stored: the retry runs")
			require.False(t, r.replayed(t))
			require.Equal(t, int32(2), s.svc.runs.Load())
		})
	}
}

// requireReason checks that err carries a google.rpc.ErrorInfo with reason
// and the HTTP status its storing was decided by.
func requireReason(t *testing.T, err error, reason idem.ProblemType, httpStatus string) {
	t.Helper()
	info := errorInfo(t, err)
	require.Equal(t, string(reason), info.GetReason(), "%v", err)
	require.Equal(t, idemgrpc.ErrorDomain, info.GetDomain())
	require.Equal(t, httpStatus, info.GetMetadata()[idemgrpc.InfoHTTPStatus], "%v", err)
	// The retry advice, as HTTP's Idempotent-Should-Retry gives it: the
	// middleware's 409s in flight ask for a retry, and other answers by
	// their status (docs/problems.md).
	code, _ := strconv.Atoi(httpStatus)
	shouldRetry := reason == idem.ProblemInFlight || reason == idem.ProblemLeaseLost || idem.ShouldRetry(code)
	require.Equal(t, strconv.FormatBool(shouldRetry), info.GetMetadata()[idemgrpc.InfoShouldRetry], "%v", err)
}

// requireRetryAfter checks that err says when to retry, in its ErrorInfo
// and in a google.rpc.RetryInfo.
func requireRetryAfter(t *testing.T, err error) {
	t.Helper()
	require.Equal(t, "1", errorInfo(t, err).GetMetadata()[idemgrpc.InfoRetryAfter], "%v", err)
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			require.Equal(t, time.Second, ri.GetRetryDelay().AsDuration())
			return
		}
	}
	t.Fatalf("no RetryInfo in %v", err)
}

func errorInfo(t *testing.T, err error) *errdetails.ErrorInfo {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	t.Fatalf("no ErrorInfo in %v", err)
	return nil
}
