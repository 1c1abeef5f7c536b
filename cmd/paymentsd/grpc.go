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
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/proto"

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

// grpcAuth sets the call's user from the API key in its authorization
// metadata, as the HTTP API's authentication does: an unknown key never
// reaches the key table.
func grpcAuth(ops *api.Operations, logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		user, err := ops.Authenticate(ctx, md.Get("authorization"))
		switch {
		case errors.Is(err, payments.ErrUnauthorized):
			return nil, problemError(http.StatusUnauthorized, api.ProblemUnauthorized, "Send your API key as authorization: Bearer <api key>.")
		case err != nil:
			logger.ErrorContext(ctx, "authenticate", "err", err)
			return nil, problemError(http.StatusServiceUnavailable, api.ProblemUnavailable, "The database is unavailable; retry later.")
		}
		return handler(idem.WithScope(ctx, user), req)
	}
}

// grpcBounds admits a call that moves money within the bounds the HTTP
// door's requests count against too (the user's requests in flight, the
// bodies' memory, at the size of its message); past them, the call is
// refused as an HTTP request would be (ResourceExhausted too-many-requests,
// Unavailable overloaded, with RetryInfo), and nothing is stored.
func grpcBounds(b *api.Bounds, movesMoney func(fullMethod string) bool) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		m, ok := req.(proto.Message)
		if !ok || !movesMoney(info.FullMethod) {
			return handler(ctx, req)
		}
		done, refusal := b.Admit(idem.ScopeFromContext(ctx), int64(proto.Size(m)))
		if refusal != nil {
			return nil, answerOf(*refusal, nil)
		}
		defer done()
		return handler(ctx, req)
	}
}

// grpcOptions are the server's transport bounds, the HTTP listener's own:
// a message as large as an HTTP body may be (the middleware's limit); a
// connection that has not sent its preface within the body timeout, or
// has had no call for the idle timeout, is closed; a client may not ping
// more often than every 10 s.
func grpcOptions(f serveFlags, mw *idem.Middleware) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(api.MaxBody(mw.Config()))),
		grpc.ConnectionTimeout(f.bodyTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: f.idleTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second}),
	}
}

// serveGRPC serves payments.v1.Payments, with reflection, on f.grpcAddr
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
	movesMoney := func(m string) bool { return strings.HasPrefix(m, "/payments.v1.Payments/Create") }
	srv := grpc.NewServer(append(grpcOptions(f, mw),
		grpc.ChainUnaryInterceptor(grpcAuth(ops, cfg.Logger), grpcBounds(cfg.Bounds, movesMoney), keyed, payouts))...)
	paymentsv1.RegisterPaymentsServer(srv, &paymentsServer{ops: ops})
	reflection.Register(srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil {
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
