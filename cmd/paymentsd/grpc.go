package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/cmd/internal/paymentsv1"
	"github.com/idem-dev/idem/idemgrpc"
	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/api"
)

// paymentsServer serves payments.v1.Payments (api/payments/v1) with the
// HTTP API's operations: a call's request is the HTTP request's JSON body,
// its response the HTTP answer's, so validation, errors and money are the
// HTTP API's own.
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
// error of its problem (idemgrpc.ReplyError): its HTTP status decides
// whether the interceptor stores it, its type names the reason.
func answerOf(r idem.Reply, out any) error {
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
	return idemgrpc.ReplyError(r, strings.TrimPrefix(p.Type, api.TypeURI("")), p.Detail)
}

// problemError is the error of a problem paymentsd's gRPC door answers
// with itself.
func problemError(status int, t api.ProblemType, detail string) error {
	return idemgrpc.ReplyError(idem.Reply{StatusCode: status}, string(t), detail)
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

// serveGRPC serves payments.v1.Payments, with reflection, on addr until
// ctx ends; wait returns once the calls in flight have finished.
func serveGRPC(ctx context.Context, addr string, mw *idem.Middleware, cfg api.Config, logger *slog.Logger) (wait func(), err error) {
	ops, err := api.NewOperations(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcAuth(ops, cfg.Logger), idemgrpc.UnaryServerInterceptor(mw, idemgrpc.Config{})))
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
