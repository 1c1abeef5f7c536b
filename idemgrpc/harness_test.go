package idemgrpc_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/adaptertest"
	"github.com/idem-dev/idem/idemgrpc"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"
)

// The methods of grpc-go's interop TestService the tests call.
const (
	unaryCall     = "/grpc.testing.TestService/UnaryCall"
	emptyCall     = "/grpc.testing.TestService/EmptyCall"
	cacheableCall = "/grpc.testing.TestService/CacheableUnaryCall" // no key needed
)

// backend is a store and a way to take it down.
type backend struct {
	store store.Store
	down  func() // every store operation fails from then on
}

// newBackend returns the in-memory reference store behind a switch that
// takes it down: the interceptor's answers do not depend on the store
// (each store passes storetest on its own database).
func newBackend(*testing.T) backend {
	st := adaptertest.NewDownStore(memstore.New())
	return backend{store: st, down: st.Down}
}

// service is the TestService under test: UnaryCall, EmptyCall and
// CacheableUnaryCall count their runs and answer with unary.
type service struct {
	testpb.UnimplementedTestServiceServer
	runs  atomic.Int32
	unary unaryFunc
}

// unaryFunc answers UnaryCall.
type unaryFunc func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error)

func (s *service) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.runs.Add(1)
	return s.unary(ctx, req)
}

func (s *service) CacheableUnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return s.UnaryCall(ctx, req)
}

func (s *service) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	s.runs.Add(1)
	return &testpb.Empty{}, nil
}

// echo answers with the request's payload and the key the handler sees,
// or with the request's response_status when it has one.
func echo(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if s := req.GetResponseStatus(); s != nil {
		return nil, status.Error(codes.Code(s.GetCode()), s.GetMessage())
	}
	return &testpb.SimpleResponse{Payload: req.GetPayload(), Username: idem.KeyFromContext(ctx)}, nil
}

// server is a gRPC server on loopback with, outermost first: an
// interceptor that records the code of every call, panic recovery (what
// grpc-go leaves to its users), authentication from the x-user metadata,
// and the idem interceptor.
type server struct {
	svc    *service
	conn   *grpc.ClientConn
	client testpb.TestServiceClient

	mu    sync.Mutex   // guards codes
	codes []codes.Code // the code each call ended with, as the server sent it
}

func newServer(t *testing.T, st store.Store, cfg idem.Config, unary unaryFunc) *server {
	t.Helper()
	mw, err := idem.New(st, cfg)
	require.NoError(t, err)
	if unary == nil {
		unary = echo
	}
	s := &server{svc: &service{unary: unary}}
	record := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		s.mu.Lock()
		s.codes = append(s.codes, status.Code(err))
		s.mu.Unlock()
		return resp, err
	}
	recoverPanic := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				resp, err = nil, status.Errorf(codes.Internal, "panic: %v", p)
			}
		}()
		return h(ctx, req)
	}
	auth := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if u := md.Get("x-user"); len(u) == 1 {
			ctx = idem.WithScope(ctx, u[0])
		}
		return h(ctx, req)
	}
	interceptor := idemgrpc.UnaryServerInterceptor(mw, idemgrpc.Config{
		MethodFunc: func(fullMethod string) bool { return fullMethod != cacheableCall },
	})
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(record, recoverPanic, auth, interceptor))
	testpb.RegisterTestServiceServer(srv, s.svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		require.NoError(t, <-served)
	})
	s.conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.conn.Close() })
	s.client = testpb.NewTestServiceClient(s.conn)
	return s
}

// lastCode is the code the server ended its latest call with.
func (s *server) lastCode(t *testing.T) codes.Code {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NotEmpty(t, s.codes, "no call has ended")
	return s.codes[len(s.codes)-1]
}

// callCtx is the outgoing context of user's call with key (none when "").
func callCtx(ctx context.Context, user, key string) context.Context {
	var kv []string
	if user != "" {
		kv = append(kv, "x-user", user)
	}
	if key != "" {
		kv = append(kv, idemgrpc.MetadataKey, key)
	}
	return metadata.NewOutgoingContext(ctx, metadata.Pairs(kv...))
}

// reply is what the client got from one call.
type reply struct {
	resp   *testpb.SimpleResponse
	err    error
	header metadata.MD
}

// replayed reports whether the call was answered with the stored reply;
// the first call has no such header at all.
func (r reply) replayed(t *testing.T) bool {
	t.Helper()
	v := r.header.Get(idemgrpc.MetadataReplayed)
	if len(v) > 0 {
		require.Equal(t, []string{"true"}, v)
	}
	return len(v) > 0
}

// unary calls UnaryCall as user with key.
// leave makes a call of user under key and, once entered says the
// handler runs, leaves it as a client that goes away: the client's own
// answer is Canceled.
func (s *server) leave(t *testing.T, user, key string, entered <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(callCtx(context.Background(), user, key))
	done := make(chan error, 1)
	go func() {
		_, err := s.client.UnaryCall(ctx, payload("pay"))
		done <- err
	}()
	<-entered
	cancel()
	require.Equal(t, codes.Canceled, status.Code(<-done))
}

func (s *server) unary(t *testing.T, user, key string, req *testpb.SimpleRequest) reply {
	t.Helper()
	var r reply
	r.resp, r.err = s.client.UnaryCall(callCtx(context.Background(), user, key), req, grpc.Header(&r.header))
	return r
}

// rawCodec hands the client a response's bytes as they came on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// raw calls method as user with key and returns the response's wire bytes.
func (s *server) raw(t *testing.T, method, user, key string, req proto.Message) ([]byte, metadata.MD) {
	t.Helper()
	var (
		out    []byte
		header metadata.MD
	)
	err := s.conn.Invoke(callCtx(context.Background(), user, key), method, req, &out, grpc.ForceCodec(rawCodec{}), grpc.Header(&header))
	require.NoError(t, err)
	return out, header
}

// payload is a request whose payload body is body.
func payload(body string) *testpb.SimpleRequest {
	return &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte(body)}}
}

// failWith is a request whose handler answers with code and msg.
func failWith(code codes.Code, msg string) *testpb.SimpleRequest {
	return &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(code), Message: msg}}
}
