// Command bankd is a simulated bank to pay through: transfers settle at
// once, are kept in a SQLite file, and are idempotent by their
// Idempotency-Key; on demand its link misbehaves (--faults). See
// docs/bankd.md.
//
// Usage:
//
//	bankd [--addr HOST:PORT] [--db PATH] [--faults SPEC] [--seed N] [--slow-delay D] [--shutdown-timeout D]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/idem-dev/idem/cmd/internal/bank"
	"github.com/idem-dev/idem/cmd/internal/version"
)

// usageError is a bad command line: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }

// errHelp: -h was asked for and the usage printed; exit 0.
var errHelp = errors.New("help shown")

func main() {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.String("bankd"))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stderr)
	if err == nil || errors.Is(err, errHelp) {
		return
	}
	code := 1
	if errors.As(err, new(usageError)) {
		code = 2
	}
	// One line, whatever the error says.
	fmt.Fprintln(os.Stderr, "bankd: "+strings.Join(strings.Fields(err.Error()), " "))
	os.Exit(code)
}

type flags struct {
	addr            string
	db              string
	faults          bank.Faults
	seed            uint64
	seedSet         bool
	slowDelay       time.Duration
	shutdownTimeout time.Duration
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("bankd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8090", "listen on HOST:PORT (port 0: a free port, printed)")
	fs.StringVar(&f.db, "db", "bankd.db", "the SQLite file that keeps the transfers")
	spec := fs.String("faults", "", "fault probabilities per transfer request, e.g.\n"+
		"'error-before=0.05,error-after=0.05,slow-after=0.05,reset-after=0.05,hang=0.01' (default none)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the fault draws (default random, printed)")
	fs.DurationVar(&f.slowDelay, "slow-delay", bank.DefaultSlowDelay, "how late a slow-after fault answers")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long SIGTERM waits for in-flight requests")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stderr, "Usage: bankd [flags]\n\nFlags:\n")
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		return f, errHelp
	case err != nil:
		return f, usageError{fmt.Errorf("%w (run 'bankd -h' for usage)", err)}
	case fs.NArg() > 0:
		return f, usageError{fmt.Errorf("unexpected argument %q (run 'bankd -h' for usage)", fs.Arg(0))}
	case f.slowDelay <= 0:
		return f, usageError{fmt.Errorf("--slow-delay must be positive, got %v", f.slowDelay)}
	case f.shutdownTimeout <= 0:
		return f, usageError{fmt.Errorf("--shutdown-timeout must be positive, got %v", f.shutdownTimeout)}
	}
	if f.faults, err = bank.ParseFaults(*spec); err != nil {
		return f, usageError{fmt.Errorf("--faults: %w", err)}
	}
	fs.Visit(func(fl *flag.Flag) { f.seedSet = f.seedSet || fl.Name == "seed" })
	return f, nil
}

// run serves the bank until ctx ends (SIGINT, SIGTERM), then drains.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if !f.seedSet {
		f.seed = rand.Uint64()
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

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
