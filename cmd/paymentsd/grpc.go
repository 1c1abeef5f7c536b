package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

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
// HTTP API's member names), decoding a 2xx answer into out and any other
// into a status with the code of its HTTP status.
func (s *paymentsServer) run(ctx context.Context, op api.Operation, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return status.Errorf(codes.Internal, "encode the request: %v", err)
	}
	r := s.ops.Run(ctx, op, idem.ScopeFromContext(ctx), body)
	if r.StatusCode/100 == 2 {
		if err := json.Unmarshal(r.Body, out); err != nil {
			return status.Errorf(codes.Internal, "decode the answer: %v", err)
		}
		return nil
	}
	var p api.Problem
	_ = json.Unmarshal(r.Body, &p) // a problem body; the code alone says enough otherwise
	return status.Error(idemgrpc.Code(r.StatusCode), p.Detail)
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
			return nil, status.Error(codes.Unauthenticated, "send your API key as authorization: Bearer <api key>")
		case err != nil:
			logger.ErrorContext(ctx, "authenticate", "err", err)
			return nil, status.Error(codes.Unavailable, "the database is unavailable; retry later")
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
