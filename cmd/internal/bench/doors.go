package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idem-dev/idem/cmd/internal/paymentsv1"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/idemgrpc"
)

// The doors other than a conversion over HTTP: one paymentsd serves
// deposits over HTTP, over gRPC and as commands from NATS JetStream, and
// payouts through bankd, so that each door's figures stand beside the
// others' from the same process. Every key these variants send is counted
// in the ledger (and, for payouts, at the bank) after each segment.

// doorVariants starts bankd, a NATS server and paymentsd with every door
// on db, seeds each door's replay keys, and returns the variants.
func (r *runner) doorVariants(ctx context.Context, db *database) ([]*variant, error) {
	bank, err := r.startBank(ctx)
	if err != nil {
		return nil, err
	}
	broker, err := r.startNATS(ctx)
	if err != nil {
		return nil, err
	}
	secret := filepath.Join(r.work, "bank-key-secret")
	var b [32]byte
	_, _ = rand.Read(b[:])
	if err := os.WriteFile(secret, []byte(hex.EncodeToString(b[:])), 0o600); err != nil {
		return nil, err
	}
	grpcAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	srv, err := r.startPaymentsd(ctx, "paymentsd-doors", "atomic-deferred", db, "--bank-url", bank.base, "--bank-key-secret-file", secret,
		"--nats-url", broker.nats, "--queue-workers", strconv.Itoa(r.cfg.QueueWorkers), "--grpc-addr", grpcAddr)
	if err != nil {
		return nil, err
	}
	srv.grpc = grpcAddr
	var vs []*variant
	for _, d := range []struct {
		name, replay string
		v            variant
	}{
		{"deposit", "replay", variant{op: opDeposit, mode: "atomic-deferred"}},
		{"grpc deposit", "replay", variant{op: opDeposit, door: doorGRPC, mode: "atomic-deferred"}},
		{"queue deposit", "duplicate", variant{op: opDeposit, door: doorQueue, mode: "atomic-deferred", peer: broker}},
		// Payouts hold their keys leased whatever the mode.
		{"payout", "replay", variant{op: opPayout, mode: "leased", peer: bank}},
	} {
		v := d.v
		v.srv, v.db, v.checked = srv, db, true
		seeds, err := seed(ctx, &v, r.wl, r.cfg.ReplayKeys, r.cfg.Concurrency)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.name, err)
		}
		fresh, replay := v, v
		fresh.name, fresh.kind = d.name+"-fresh", kindFresh
		replay.name, replay.kind = d.name+"-"+d.replay, kindReplay
		replay.replay = func(rnd *mrand.Rand) request { return seeds[rnd.IntN(len(seeds))] }
		vs = append(vs, &fresh, &replay)
	}
	return vs, nil
}

// doorRatios set each door against HTTP, and replays against fresh
// requests, for deposits and payouts: reported, with no target.
func (rep *Report) doorRatios() {
	for _, door := range []string{"grpc", "queue"} {
		rep.ratio(door+"/HTTP, deposit fresh", door+" deposit-fresh", "deposit-fresh", "", 0)
	}
	rep.ratio("grpc/HTTP, deposit replay", "grpc deposit-replay", "deposit-replay", "", 0)
	rep.ratio("replay/fresh, deposit over HTTP", "deposit-replay", "deposit-fresh", "", 0)
	rep.ratio("replay/fresh, deposit over gRPC", "grpc deposit-replay", "grpc deposit-fresh", "", 0)
	rep.ratio("duplicate/fresh, deposit commands from the queue", "queue deposit-duplicate", "queue deposit-fresh", "", 0)
	rep.ratio("payout fresh/deposit fresh (HTTP; the bank call's cost)", "payout-fresh", "deposit-fresh", "", 0)
	rep.ratio("replay/fresh, payout", "payout-replay", "payout-fresh", "", 0)
}

// startBank starts bankd, built from the repository, with no faults.
func (r *runner) startBank(ctx context.Context) (*server, error) {
	r.cfg.Logf("building bankd")
	bin, err := buildCommand(ctx, r.work, "bankd")
	if err != nil {
		return nil, err
	}
	// bankd has no health check; a look-up of a key answers once it serves.
	s, err := startServerAt(ctx, "bankd", r.work, r.cfg.ServerProcs, nil, "/v1/transfers?idempotency_key=health", func(addr string) []string {
		return []string{bin, "--addr", addr, "--db", filepath.Join(r.work, "bank.db"), "--seed", "1"}
	})
	if err == nil {
		r.servers = append(r.servers, s)
	}
	return s, err
}

// startNATS starts a NATS server with JetStream in a process of its own
// (Serve's nats wiring), on a free port; its monitoring port answers the
// health check.
func (r *runner) startNATS(ctx context.Context) (*server, error) {
	client, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s, err := startServer(ctx, "nats-server", r.work, r.cfg.ServerProcs, r.cfg.SelfEnv, func(addr string) []string {
		return append(slices.Clone(r.cfg.Self), "-wiring", "nats", "-addr", addr, "-nats", client, "-store", filepath.Join(r.work, "jetstream"))
	})
	if err != nil {
		return nil, err
	}
	s.nats = "nats://" + client
	r.servers = append(r.servers, s)
	return s, nil
}

// grpcSender sends deposits to payments.v1.Payments, its clients sharing
// one HTTP/2 connection as the clients of a gRPC channel do.
type grpcSender struct {
	conn *grpc.ClientConn
	c    paymentsv1.PaymentsClient
}

func newGRPCSender(srv *server) (sender, error) {
	conn, err := grpc.NewClient(srv.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("grpc %s: %w", srv.grpc, err)
	}
	return grpcSender{conn: conn, c: paymentsv1.NewPaymentsClient(conn)}, nil
}

func (s grpcSender) send(ctx context.Context, rq request) outcome {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+rq.user.apiKey, idemgrpc.MetadataKey, rq.key)
	var header metadata.MD
	_, err := s.c.CreateDeposit(ctx, &paymentsv1.CreateDepositRequest{Currency: "USD", Amount: rq.amount}, grpc.Header(&header))
	st, ok := status.FromError(err)
	if !ok {
		return outcome{err: err}
	}
	return outcome{status: idemgrpc.HTTPStatus(st.Code()), code: st.Code().String(),
		replayed: slices.Contains(header.Get(idemgrpc.MetadataReplayed), "true")}
}

func (s grpcSender) close() { _ = s.conn.Close() }

// queueAnswerTimeout bounds the wait for a command's answer.
const queueAnswerTimeout = 30 * time.Second

// queueSender publishes commands to JetStream, as paymentsd's docs/queues.md
// describes them, and waits for each one's answer on a reply subject of
// its own.
type queueSender struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	inbox string
	next  atomic.Int64
	mu    sync.Mutex // guards waiting
	// waiting holds, by reply subject, where the answer of each command
	// in flight goes.
	waiting map[string]chan *nats.Msg
}

func newQueueSender(broker *server) (sender, error) {
	nc, err := nats.Connect(broker.nats, nats.Name("bench"))
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", broker.nats, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	s := &queueSender{nc: nc, js: js, inbox: "payments.results." + nats.NewInbox(), waiting: map[string]chan *nats.Msg{}}
	if _, err := nc.Subscribe(s.inbox+".*", func(m *nats.Msg) {
		if ch := s.take(m.Subject); ch != nil {
			ch <- m
		}
	}); err != nil {
		nc.Close()
		return nil, err
	}
	return s, nil
}

// take removes and returns the channel waiting for reply's answer.
func (s *queueSender) take(reply string) chan *nats.Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.waiting[reply]
	delete(s.waiting, reply)
	return ch
}

func (s *queueSender) send(ctx context.Context, rq request) outcome {
	reply := s.inbox + "." + strconv.FormatInt(s.next.Add(1), 10)
	ch := make(chan *nats.Msg, 1)
	s.mu.Lock()
	s.waiting[reply] = ch
	s.mu.Unlock()
	defer s.take(reply)
	msg := &nats.Msg{Subject: "payments.commands." + strings.TrimPrefix(opPaths[rq.op], "/v1/"), Data: rq.body, Header: nats.Header{
		"Idempotency-Key": {rq.key}, "Authorization": {"Bearer " + rq.user.apiKey}, "Reply-To": {reply},
	}}
	if _, err := s.js.PublishMsg(ctx, msg); err != nil {
		return outcome{err: err}
	}
	timer := time.NewTimer(queueAnswerTimeout)
	defer timer.Stop()
	select {
	case m := <-ch:
		st, err := strconv.Atoi(m.Header.Get(consumer.HeaderStatus))
		return outcome{status: st, replayed: m.Header.Get(consumer.HeaderReplayed) == "true", err: err}
	case <-timer.C:
		return outcome{err: errors.New("no answer to the command")}
	case <-ctx.Done():
		return outcome{err: ctx.Err()}
	}
}

func (s *queueSender) close() { s.nc.Close() }
