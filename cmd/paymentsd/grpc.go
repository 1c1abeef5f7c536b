package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/cmd/internal/paymentsv1"
	"github.com/idem-dev/idem/completer"
	"github.com/idem-dev/idem/idemgrpc"
	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/api"
	"github.com/idem-dev/idem/store"
)

// paymentsServer serves payments.v1.Payments (api/payments/v1) with the
// HTTP API's operations: a call's request is the HTTP request's JSON body
// (a read's, its path), its response the HTTP answer's, so validation,
// errors, scoping and money are the HTTP API's own.
type paymentsServer struct {
	paymentsv1.UnimplementedPaymentsServer
	ops *api.Operations
}

func (s *paymentsServer) CreateDeposit(ctx context.Context, req *paymentsv1.CreateDepositRequest) (*paymentsv1.Deposit, error) {
	out := &paymentsv1.Deposit{}
	return out, s.run(ctx, api.OpDeposit, req, out)
}

func (s *paymentsServer) CreateTransaction(ctx context.Context, req *paymentsv1.CreateTransactionRequest) (*paymentsv1.Transaction, error) {
	out := &paymentsv1.Transaction{}
	return out, s.run(ctx, api.OpTransaction, req, out)
}

// CreatePayout runs in leased mode (serveGRPC); a payout still pending
// answers OK with status pending, not stored, as the HTTP API's 202.
func (s *paymentsServer) CreatePayout(ctx context.Context, req *paymentsv1.CreatePayoutRequest) (*paymentsv1.Payout, error) {
	out := &paymentsv1.Payout{}
	return out, s.run(ctx, api.OpPayout, req, out)
}

func (s *paymentsServer) GetBalances(ctx context.Context, _ *paymentsv1.GetBalancesRequest) (*paymentsv1.Balances, error) {
	out := &paymentsv1.Balances{}
	return out, s.read(ctx, "/v1/balances", out)
}

func (s *paymentsServer) GetDeposit(ctx context.Context, req *paymentsv1.GetDepositRequest) (*paymentsv1.Deposit, error) {
	out := &paymentsv1.Deposit{}
	return out, s.read(ctx, "/v1/deposits/"+url.PathEscape(req.GetId()), out)
}

func (s *paymentsServer) GetTransaction(ctx context.Context, req *paymentsv1.GetTransactionRequest) (*paymentsv1.Transaction, error) {
	out := &paymentsv1.Transaction{}
	return out, s.read(ctx, "/v1/transactions/"+url.PathEscape(req.GetId()), out)
}

func (s *paymentsServer) GetPayout(ctx context.Context, req *paymentsv1.GetPayoutRequest) (*paymentsv1.Payout, error) {
	out := &paymentsv1.Payout{}
	return out, s.read(ctx, "/v1/payouts/"+url.PathEscape(req.GetId()), out)
}

func (s *paymentsServer) GetRates(ctx context.Context, _ *paymentsv1.GetRatesRequest) (*paymentsv1.Rates, error) {
	out := &paymentsv1.Rates{}
	return out, s.read(ctx, "/v1/rates", out)
}

// read answers GET path for the call's user, as answerOf does.
func (s *paymentsServer) read(ctx context.Context, path string, out any) error {
	return answerOf(s.ops.Read(ctx, idem.ScopeFromContext(ctx), path), out)
}

// run runs op with req as its JSON body (the generated structs carry the
// HTTP API's member names), answering as answerOf does.
func (s *paymentsServer) run(ctx context.Context, op api.Operation, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return problemError(http.StatusInternalServerError, api.ProblemInternal, fmt.Sprintf("encode the request: %v", err))
	}
	return answerOf(s.ops.Run(ctx, op, idem.ScopeFromContext(ctx), body), out)
}

// answerOf decodes a 2xx answer into out, and turns any other into the
// error of its problem (idemgrpc.ResponseError): its HTTP status decides
// whether the interceptor stores it, its type names the reason.
func answerOf(r idem.Response, out any) error {
	if r.StatusCode/100 == 2 {
		if err := json.Unmarshal(r.Body, out); err != nil {
			return problemError(http.StatusInternalServerError, api.ProblemInternal, fmt.Sprintf("decode the answer: %v", err))
		}
		return nil
	}
	var p api.Problem
	if err := json.Unmarshal(r.Body, &p); err != nil || p.Type == "" {
		p.Type = api.TypeURI(api.ProblemInternal) // never: every answer but 2xx is a problem
	}
	return idemgrpc.ResponseError(r, strings.TrimPrefix(p.Type, api.TypeURI("")), p.Detail)
}

// problemError is the error of a problem paymentsd's gRPC door answers
// with itself.
func problemError(status int, t api.ProblemType, detail string) error {
	return idemgrpc.ResponseError(idem.Response{StatusCode: status}, string(t), detail)
}

// Defaults of the gRPC door's transport bounds (docs/grpc.md).
const (
	defaultGRPCMaxConns   = 256
	defaultGRPCMaxStreams = 100
	// defaultGRPCMaxMessage fits the API's largest request, a
	// CreatePayoutRequest of a few hundred bytes, with room for fields to come.
	defaultGRPCMaxMessage = 16 << 10
	// grpcWindow is each stream's and connection's flow-control window,
	// grpc-go's smallest, kept static: what a stream may have buffered
	// beyond the message it is reading.
	grpcWindow = 64 << 10
)

// grpcAuthTimeout bounds the tap's database read: grpc-go runs the tap
// under the connection's lock, so a stalled read stalls the connection.
const grpcAuthTimeout = 2 * time.Second

// grpcServices are the services the gRPC door serves: payments.v1.Payments
// and, with --grpc-reflection, server reflection.
func grpcServices(withReflection bool) []string {
	services := []string{paymentsv1.Payments_ServiceDesc.ServiceName}
	if withReflection {
		services = append(services, reflectionv1.ServerReflection_ServiceDesc.ServiceName,
			reflectionv1alpha.ServerReflection_ServiceDesc.ServiceName)
	}
	return services
}

// streamKey is the context key of the stream's context without the
// message deadline grpcTap sets (grpcDetach).
type streamKey struct{}

// grpcTap admits a call when its headers arrive, before grpc-go reads its
// message, as the HTTP door admits a request before reading its body: a
// call of a method outside services is Unimplemented; any other, of the
// payments service or of reflection, is authenticated from its
// authorization metadata (Unauthenticated, nothing read), counted against
// its user's --requests-per-scope and reserves what its stream may buffer
// (reserve bytes) of --body-memory-mb, until it ends. No call holds
// anything before it is authenticated. Its message must arrive within
// timeout (--body-timeout), else the call ends DeadlineExceeded and its
// buffers are freed.
//
// grpc-go runs the tap on the connection's reader, under its lock: the
// authentication's one database read is one at a time per connection,
// within grpcAuthTimeout, and the connections are bounded (--grpc-max-conns).
func grpcTap(ops *api.Operations, b *api.Bounds, services []string, reserve int64, timeout time.Duration, logger *slog.Logger) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		service, _, _ := strings.Cut(strings.TrimPrefix(info.FullMethodName, "/"), "/")
		if !slices.Contains(services, service) {
			return nil, status.Errorf(codes.Unimplemented, "unknown service %s", service)
		}
		actx, cancel := context.WithTimeout(ctx, grpcAuthTimeout)
		user, err := ops.Authenticate(actx, info.Header.Get("authorization"))
		cancel()
		switch {
		case errors.Is(err, payments.ErrUnauthorized):
			return nil, problemError(http.StatusUnauthorized, api.ProblemUnauthorized, "Send your API key as authorization: Bearer <api key>.")
		case err != nil:
			logger.ErrorContext(ctx, "authenticate", "err", err)
			return nil, problemError(http.StatusServiceUnavailable, api.ProblemUnavailable, "The database is unavailable; retry later.")
		}
		done, refusal := b.Admit(user, reserve)
		if refusal != nil {
			return nil, answerOf(*refusal, nil)
		}
		ctx = idem.WithScope(ctx, user)
		// The stream's context ends with the call, whichever way it ends.
		mctx, cancel := context.WithTimeout(ctx, timeout)
		context.AfterFunc(ctx, func() { cancel(); done() })
		return context.WithValue(mctx, streamKey{}, ctx), nil
	}
}

// grpcDetach runs the call's handler without the message deadline grpcTap
// set, which bounds the message's arrival, not the call: the handler's
// context ends when the stream's does, and has the client's deadline, if
// it sent one (grpc-timeout), as its own.
func grpcDetach(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	stream, ok := ctx.Value(streamKey{}).(context.Context)
	if !ok {
		return handler(ctx, req)
	}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if d, ok := stream.Deadline(); ok {
		hctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d)
	}
	defer cancel()
	defer context.AfterFunc(stream, cancel)()
	return handler(hctx, req)
}

// grpcOptions are the server's transport bounds (docs/grpc.md): the
// message and metadata sizes, the calls per connection, static windows (a
// dynamic one grows to 16 MiB a stream), a connection's handshake within
// --header-timeout, idle connections closed after --idle-timeout, a
// client pinging more often than every 10 s cut off; and the tap.
func grpcOptions(f serveFlags, tapHandle tap.ServerInHandle) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(f.grpcMaxMessage),
		grpc.MaxHeaderListSize(uint32(f.conns.MaxHeaderBytes)),
		grpc.MaxConcurrentStreams(uint32(f.grpcMaxStreams)),
		grpc.StaticStreamWindowSize(grpcWindow),
		grpc.StaticConnWindowSize(grpcWindow),
		grpc.ConnectionTimeout(f.conns.HeaderTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: f.conns.IdleTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second}),
		grpc.InTapHandle(tapHandle),
	}
}

// serveGRPC serves payments.v1.Payments, with reflection if asked, on f.grpcAddr
// until ctx ends, bounded by cfg.Bounds; wait returns once the calls in
// flight have finished.
func serveGRPC(ctx context.Context, f serveFlags, mw *idem.Middleware, cfg api.Config, logger *slog.Logger) (wait func(), err error) {
	addr := f.grpcAddr
	ops, err := api.NewOperations(cfg)
	if err != nil {
		return nil, err
	}
	leased, err := mw.WithMode(idem.ModeLeased)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	// The Create methods need a key; a payout calls the bank outside the
	// database, so it holds its key with a lease (as POST /v1/payouts).
	keyed := idemgrpc.UnaryServerInterceptor(mw, idemgrpc.Config{MethodFunc: func(m string) bool {
		return m == paymentsv1.Payments_CreateDeposit_FullMethodName || m == paymentsv1.Payments_CreateTransaction_FullMethodName
	}})
	isPayout := func(m string) bool { return m == paymentsv1.Payments_CreatePayout_FullMethodName }
	payouts := idemgrpc.UnaryServerInterceptor(leased, idemgrpc.Config{MethodFunc: isPayout})
	tapHandle := grpcTap(ops, cfg.Bounds, grpcServices(f.grpcReflection), int64(max(f.grpcMaxMessage, grpcWindow)), f.bodyTimeout, cfg.Logger)
	srv := grpc.NewServer(append(grpcOptions(f, tapHandle), grpc.ChainUnaryInterceptor(grpcDetach, keyed, payouts))...)
	paymentsv1.RegisterPaymentsServer(srv, &paymentsServer{ops: ops})
	if f.grpcReflection {
		reflection.Register(srv)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(f.conns.ListenerOf(ln, f.grpcMaxConns)); err != nil {
			cfg.Logger.Error("grpc server stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	logger.Info("grpc listening", "addr", ln.Addr().String())
	return func() { <-done }, nil
}

// grpcPayoutResume makes resume, the completer's, finish a payout begun
// over gRPC with the answer gRPC stores (a Payout message or a status),
// so that the call's retry replays it as its own.
func grpcPayoutResume(resume completer.Resume) completer.Resume {
	return func(ctx context.Context, u store.Unfinished) idem.Response {
		r := resume(ctx, u)
		if u.Fingerprint.Path != paymentsv1.Payments_CreatePayout_FullMethodName {
			return r
		}
		out := &paymentsv1.Payout{}
		if err := answerOf(r, out); err != nil {
			return idemgrpc.Response(nil, err)
		}
		return idemgrpc.Response(out, nil)
	}
}
