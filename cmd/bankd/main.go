// Command bankd is a simulated bank to pay through: transfers settle at
// once, are kept in a SQLite file, and are idempotent by their
// Idempotency-Key; on demand its link misbehaves (--faults). See
// docs/bankd.md.
//
// Usage:
//
//	bankd [serve] [--addr HOST:PORT] [--db PATH] [--faults SPEC] [--seed N] [--slow-delay D] [--shutdown-timeout D]
//	      [--log-level LEVEL] [--log-format text|json]
//	bankd version
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/idem-dev/idem/cmd/internal/bank"
	"github.com/idem-dev/idem/cmd/internal/cli"
	"github.com/idem-dev/idem/cmd/internal/dburl"
)

func main() {
	cli.Main("bankd", func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return run(ctx, args, stdout, stderr)
	})
}

type flags struct {
	addr            string
	db              string
	faults          bank.Faults
	seed            uint64
	seedSet         bool
	slowDelay       time.Duration
	shutdownTimeout time.Duration
	log             cli.Log
}

const synopsis = `bankd [serve] [flags]

A simulated bank: transfers settle at once, are kept in a SQLite file, and are idempotent
by their Idempotency-Key; --faults makes its link misbehave. See docs/bankd.md.

Commands:
  bankd [serve] [flags]   run the bank (the default command)
  bankd version           print the version and the commit it was built from
  bankd help              show this help`

func parseFlags(args []string, stdout io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8090", "listen on HOST:PORT (port 0: a free port, printed)")
	fs.StringVar(&f.db, "db", "bankd.db", "the SQLite file that keeps the transfers (a path, or sqlite:PATH)")
	spec := fs.String("faults", "", "fault probabilities per transfer request, e.g.\n"+
		"'error-before=0.05,error-after=0.05,slow-after=0.05,reset-after=0.05,hang=0.01' (default none)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the fault draws (default random, printed)")
	fs.DurationVar(&f.slowDelay, "slow-delay", bank.DefaultSlowDelay, "how late a slow-after fault answers")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long SIGTERM waits for in-flight requests")
	f.log.Register(fs)
	switch {
	case len(args) > 0 && args[0] == "help":
		args = []string{"--help"}
	case len(args) > 0 && args[0] == "serve":
		args = args[1:] // the one command, as paymentsd and idem-gateway name theirs
	}
	if err := cli.ParseFlags(fs, args, stdout, "bankd", synopsis); err != nil {
		return f, err
	}
	switch {
	case f.slowDelay <= 0:
		return f, cli.Usagef("--slow-delay must be positive, got %v", f.slowDelay)
	case f.shutdownTimeout <= 0:
		return f, cli.Usagef("--shutdown-timeout must be positive, got %v", f.shutdownTimeout)
	}
	db, err := dburl.Parse(f.db, "--db")
	if err != nil {
		return f, err
	}
	if db.Kind != dburl.SQLite {
		return f, cli.Usagef("--db %s: bankd keeps its transfers in a SQLite file; give a file path", db)
	}
	f.db = db.DSN
	if f.faults, err = bank.ParseFaults(*spec); err != nil {
		return f, cli.Usagef("--faults: %w", err)
	}
	fs.Visit(func(fl *flag.Flag) { f.seedSet = f.seedSet || fl.Name == "seed" })
	return f, nil
}

// run serves the bank until ctx ends (SIGINT, SIGTERM), then drains.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	if !f.seedSet {
		f.seed = rand.Uint64()
	}
	logger, err := f.log.Logger(stderr, "bankd")
	if err != nil {
		return err
	}

	store, err := bank.OpenStore(ctx, f.db)
	if err != nil {
		return err
	}
	defer store.Close()
	h := bank.NewHandler(store, bank.Config{Faults: f.faults, Seed: f.seed, SlowDelay: f.slowDelay, Logger: logger})

	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.addr, err)
	}
	defer ln.Close() // Serve closes it too; this covers the returns before Serve
	if f.faults != (bank.Faults{}) {
		fmt.Fprintf(stderr, "bankd: faults %s, seed %d\n", f.faults, f.seed)
	}
	fmt.Fprintf(stderr, "bankd: listening on http://%s\n", ln.Addr())

	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// Requests held by a fault let go as soon as the shutdown starts.
	srv.RegisterOnShutdown(h.Stop)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: in-flight requests did not finish within %v", f.shutdownTimeout)
	}
	return nil
}
