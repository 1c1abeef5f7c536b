package idemgrpc_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemgrpc"
	"github.com/idem-dev/idem/sqlitestore"
)

// payments is a gRPC service that knows nothing of idempotency: grpc-go's
// interop TestService stands in for your generated one.
type payments struct {
	testpb.UnimplementedTestServiceServer
	db sqlitestore.DBTX
}

// UnaryCall makes a payment of the amount in minor units the request's
// payload holds.
func (p *payments) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	amount, err := strconv.ParseInt(string(req.GetPayload().GetBody()), 10, 64)
	if err != nil || amount <= 0 {
		return nil, status.Error(codes.InvalidArgument, "amount: a positive number of minor units") // final: stored
	}
	// The insert joins the call's transaction: it commits with the key's
	// completion, or not at all.
	var id int64
	err = sqlitestore.DB(ctx, p.db).QueryRowContext(ctx, `INSERT INTO payments (amount) VALUES (?) RETURNING id`, amount).Scan(&id)
	if err != nil {
		return nil, status.Error(codes.Unavailable, "try again") // not stored: the retry runs
	}
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

// A gRPC server with the idem interceptor, on an SQLite file: the call is
// retried with the same key and gets the first response, marked
// idempotent-replayed; the same key with another request is refused.
// pgstore.New(pool) can stand in for the SQLite store.
func Example() {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqlitestore.Open(filepath.Join(dir, "payments.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlitestore.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE payments (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	mw, err := idem.New(sqlitestore.New(db), idem.Config{Mode: idem.ModeAtomic})
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(authenticate, idemgrpc.UnaryServerInterceptor(mw, idemgrpc.Config{})))
	testpb.RegisterTestServiceServer(srv, &payments{db: db})
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
	// Output:
	// payment 1 replayed: []
	// payment 1 replayed: [true]
	// FailedPrecondition
}
