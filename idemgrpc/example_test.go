package idemgrpc_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemgrpc"
	"github.com/idem-dev/idem/memstore"
)

// payments is a gRPC service that knows nothing of idempotency: grpc-go's
// interop TestService stands in for your generated one.
type payments struct {
	testpb.UnimplementedTestServiceServer
	made atomic.Int64 // the payments made
}

// UnaryCall makes a payment of the amount in minor units the request's
// payload holds.
func (p *payments) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	amount, err := strconv.ParseInt(string(req.GetPayload().GetBody()), 10, 64)
	if err != nil || amount <= 0 {
		return nil, status.Error(codes.InvalidArgument, "amount: a positive number of minor units") // final: stored
	}
	id := p.made.Add(1)
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: fmt.Appendf(nil, "payment %d", id)}}, nil
}

// authenticate says whose call it is: every key is scoped by its user. A
// real one checks a credential; this one trusts the metadata.
func authenticate(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	user, ok := strings.CutPrefix(strings.Join(md.Get("authorization"), ""), "Bearer ")
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "no credentials")
	}
	return handler(idem.WithScope(ctx, user), req)
}

// A gRPC server with the idem interceptor: the call is retried with the
// same key and gets the first response, marked idempotent-replayed, and
// the payment is made once; the same key with another request is refused.
// The example runs on memstore, the in-memory store; in production it is
// pgstore.New(pool) or sqlitestore.New(db), and in ModeAtomic the
// handler's writes join the key's transaction through pgstore.DB or
// sqlitestore.DB.
func Example() {
	ctx := context.Background()
	mw, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(authenticate, idemgrpc.UnaryServerInterceptor(mw, idemgrpc.Config{})))
	svc := &payments{}
	testpb.RegisterTestServiceServer(srv, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := testpb.NewTestServiceClient(conn)
	call := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer alice", idemgrpc.MetadataKey, "order-42")
	for _, amount := range []string{"100", "100", "250"} {
		var header metadata.MD
		resp, err := client.UnaryCall(call, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte(amount)}}, grpc.Header(&header))
		if err != nil {
			fmt.Println(status.Code(err))
			continue
		}
		fmt.Println(string(resp.GetPayload().GetBody()), "replayed:", header.Get(idemgrpc.MetadataReplayed))
	}
	fmt.Println("payments made:", svc.made.Load())
	// Output:
	// payment 1 replayed: []
	// payment 1 replayed: [true]
	// FailedPrecondition
	// payments made: 1
}
