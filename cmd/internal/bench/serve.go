package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // for -pprof
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/api"
	"github.com/idem-dev/idem/payments/pgledger"
	"github.com/idem-dev/idem/pgstore"
)

// serverPoolConns is paymentsd's pool size (cmd/paymentsd's
// defaultPoolConns); every server of the benchmark uses it.
const serverPoolConns = 20

// passThrough stands in for the idem middleware in the bare server: the
// routes run their handlers directly, with no key, no claim and no ambient
// transaction (the ledger opens a transaction of its own). It exists only
// in this benchmark.
type passThrough struct{}

func (passThrough) Require(next http.Handler) http.Handler { return next }
func (passThrough) Config() idem.Config                    { return idem.Config{Header: idem.DefaultHeader} }

// Serve is the benchmark's own server, run by cmd/bench's hidden "serve"
// command in a process of its own:
//
//	bench serve -db URL -addr 127.0.0.1:PORT -wiring bare|atomic-deferred|atomic|leased [-pprof 127.0.0.1:PORT]
//	bench serve -wiring nats -addr 127.0.0.1:PORT -nats 127.0.0.1:PORT -store DIR
//
// bare is the payments API's handlers and PostgreSQL ledger without
// idempotency; the idem.Mode names are paymentsd's own wiring of them behind
// the idem middleware on pgstore (what cmd/paymentsd's serve builds, less
// logging), for profiling with -pprof; nats is a NATS server with
// JetStream (nats-server's Go module) listening on -nats, its messages in
// -store, its monitoring (GET /healthz) on -addr.
func Serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", "", "PostgreSQL URL")
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	wiring := fs.String("wiring", "bare", "bare, an idem.Mode (atomic-deferred, atomic, leased), or nats")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this address too")
	natsAddr := fs.String("nats", "", "the nats wiring's client address")
	storeDir := fs.String("store", "", "the nats wiring's JetStream directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *wiring == "nats" {
		return serveNATS(ctx, *addr, *natsAddr, *storeDir)
	}
	pool, err := newServerPool(ctx, *db)
	if err != nil {
		return err
	}
	defer pool.Close()
	h, err := paymentsHandler(pool, *wiring, stderr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if *pprofAddr != "" {
		pl, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return err
		}
		// http.DefaultServeMux carries net/http/pprof's handlers.
		go func() { _ = http.Serve(pl, http.DefaultServeMux) }()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// ServeMain runs Serve until SIGINT or SIGTERM and returns the exit code.
func ServeMain(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Serve(ctx, args, os.Stderr); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "bench serve:", err)
		return 1
	}
	return 0
}

func newServerPool(ctx context.Context, db string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(db)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = serverPoolConns
	return pgxpool.NewWithConfig(ctx, cfg)
}

// paymentsHandler is the payments API on pool, wired bare or in the
// idem.Mode named wiring.
func paymentsHandler(pool *pgxpool.Pool, wiring string, stderr io.Writer) (http.Handler, error) {
	svc, err := payments.New(pgledger.New(pool), payments.Config{})
	if err != nil {
		return nil, err
	}
	var mw api.Idempotency = passThrough{}
	if wiring != "bare" {
		mode, err := idem.ParseMode(wiring)
		if err != nil {
			return nil, err
		}
		// paymentsd's defaults: a replay cache of 64 MiB.
		if mw, err = idem.New(pgstore.New(pool), idem.Config{Mode: mode, ReplayCacheBytes: 64 << 20}); err != nil {
			return nil, err
		}
	}
	quiet := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return api.New(api.Config{Service: svc, Idempotency: mw, Logger: quiet})
}

// serveNATS runs a NATS server with JetStream, clients on clientAddr, its
// monitoring on monitorAddr, until ctx ends.
func serveNATS(ctx context.Context, monitorAddr, clientAddr, storeDir string) error {
	opts := &natsserver.Options{JetStream: true, StoreDir: storeDir, NoSigs: true, NoLog: true}
	for _, a := range []struct {
		addr string
		host *string
		port *int
	}{{clientAddr, &opts.Host, &opts.Port}, {monitorAddr, &opts.HTTPHost, &opts.HTTPPort}} {
		host, port, err := net.SplitHostPort(a.addr)
		if err != nil {
			return fmt.Errorf("nats: %w", err)
		}
		if *a.port, err = strconv.Atoi(port); err != nil {
			return fmt.Errorf("nats: %w", err)
		}
		*a.host = host
	}
	ns, err := natsserver.NewServer(opts)
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(time.Minute) {
		ns.Shutdown()
		return errors.New("nats: not ready in a minute")
	}
	<-ctx.Done()
	ns.Shutdown()
	ns.WaitForShutdown()
	return nil
}
