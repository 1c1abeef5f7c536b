package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idem-dev/idem/cmd/internal/paymentsv1"
	"github.com/idem-dev/idem/idemgrpc"
)

// grpcMessages returns a gRPC load of the memory run: clients clients of
// one user, each on a connection of its own, sending calls CreateDeposit
// calls of size bytes (a currency of that length) with fresh keys at once,
// while another user's deposit must be answered over gRPC. Every call must
// be answered; size past the message limit is ResourceExhausted.
func grpcMessages(clients, calls, size int) func(ctx context.Context, addr string, users []user) error {
	return func(ctx context.Context, addr string, users []user) error {
		big := &paymentsv1.CreateDepositRequest{Currency: strings.Repeat("U", size), Amount: 1}
		var wg, started sync.WaitGroup
		errs := make(chan error, clients)
		started.Add(clients)
		for c := range clients {
			wg.Go(func() {
				conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					started.Done()
					errs <- err
					return
				}
				defer conn.Close()
				client := paymentsv1.NewPaymentsClient(conn)
				started.Done()
				for i := range calls {
					_, err := client.CreateDeposit(grpcCall(ctx, users[1], fmt.Sprintf("grpc-%d-%d-%d", size, c, i)), big)
					switch status.Code(err) {
					case codes.ResourceExhausted, codes.Unavailable: // refused: past a bound
					case codes.InvalidArgument: // admitted, and answered 400: an invalid currency
					default:
						errs <- fmt.Errorf("client %d: %v", c, err)
						return
					}
				}
			})
		}
		started.Wait()
		herr := honestGRPC(ctx, addr, users[0])
		wg.Wait()
		close(errs)
		return errors.Join(herr, <-errs)
	}
}

func grpcCall(ctx context.Context, u user, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+u.apiKey, idemgrpc.MetadataKey, key)
}

// honestGRPC makes one small deposit over gRPC during a load, retrying
// while a bound refuses it, for at most 30 s.
func honestGRPC(ctx context.Context, addr string, u user) error {
	amount := honestAmounts.Add(1)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := paymentsv1.NewPaymentsClient(conn)
	key := fmt.Sprintf("honest-grpc-%d", time.Now().UnixNano())
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := client.CreateDeposit(grpcCall(ctx, u, key), &paymentsv1.CreateDepositRequest{Currency: "USD", Amount: amount})
		switch c := status.Code(err); {
		case c == codes.OK:
			return nil
		case c != codes.ResourceExhausted && c != codes.Unavailable:
			return fmt.Errorf("honest gRPC deposit: %v", err)
		case time.Now().After(deadline):
			return fmt.Errorf("honest gRPC deposit not answered within 30s: %v", err)
		}
		time.Sleep(time.Second) // the bounds' RetryInfo
	}
}
