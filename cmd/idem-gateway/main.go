// Command idem-gateway puts the idem contract in front of any HTTP service,
// in any language: a reverse proxy that claims each unsafe request's
// Idempotency-Key, forwards the first request, stores its final answer and
// replays it to every retry.
//
//	idem-gateway --listen 127.0.0.1:8081 --upstream http://127.0.0.1:9000 \
//	    [--db PATH|postgres://…] [--routes 'POST /v1/*,PATCH /v1/*'] [--scope-header Authorization] \
//	    [--upstream-timeout 30s] [--upstream-dedups] [--config FILE]
//	idem-gateway keys list|show|resolve [--db …|--config FILE] …
//
// The keys commands show the keys whose upstream outcome is unknown and
// resolve them. See docs/gateway.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/cmd/internal/version"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/sqlitestore"
	"github.com/idem-dev/idem/store"
)

func main() {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.String("idem-gateway"))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a bad command line or configuration: exit 2.
type usageError string

func (e usageError) Error() string { return string(e) }

// run runs the server until ctx ends, or a keys command; it returns the
// exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var err error
	if len(args) > 0 && args[0] == "keys" {
		err = keysCmd(ctx, args[1:], stdout, stderr)
	} else {
		err = serve(ctx, args, stderr)
	}
	var ue usageError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "idem-gateway:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "idem-gateway:", err)
		return 1
	}
}

// options are the server's settings: flags, or a configuration file.
type options struct {
	listen, upstream, db, routes, scopeHeader string
	timeout, lockTimeout                      time.Duration
	dedups                                    bool
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8081", "address to listen on")
	fs.StringVar(&o.upstream, "upstream", "", "the service's base URL (required)")
	dbFlag(fs, &o.db)
	fs.StringVar(&o.routes, "routes", "POST /*,PATCH /*,PUT /*,DELETE /*", "the guarded routes: comma-separated 'METHOD /path', a trailing * matches any rest")
	fs.StringVar(&o.scopeHeader, "scope-header", "Authorization", "the header whose value's SHA-256 scopes the keys; a request without it is refused (401)")
	fs.DurationVar(&o.timeout, "upstream-timeout", 30*time.Second, "how long the upstream may take to send its response headers")
	fs.BoolVar(&o.dedups, "upstream-dedups", false, "the upstream deduplicates on the forwarded Idempotency-Key, so a request whose outcome is unknown may be sent again")
	fs.DurationVar(&o.lockTimeout, "lock-timeout", 0, "the lease of a request in flight (default the library's, 30s)")
}

func dbFlag(fs *flag.FlagSet, db *string) {
	fs.StringVar(db, "db", "idem-gateway.db", "the key store: a SQLite file path, or a postgres:// URL")
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("idem-gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	o.register(fs)
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	up, err := url.Parse(o.upstream)
	if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
		return usageError(fmt.Sprintf("--upstream %q: want an http(s) URL", o.upstream))
	}
	rs, err := parseRoutes(o.routes)
	if err != nil {
		return usageError("--routes: " + err.Error())
	}
	if o.scopeHeader == "" || o.timeout <= 0 {
		return usageError("--scope-header must be set and --upstream-timeout positive")
	}
	store, closeStore, err := openStore(ctx, o.db, stderr)
	if err != nil {
		return err
	}
	defer closeStore()
	mw, err := idem.New(store, idem.Config{Mode: idem.ModeLeased, LeaseDuration: o.lockTimeout})
	if err != nil {
		return usageError(err.Error())
	}
	g := &gateway{upstream: up, routes: rs, scopeHeader: o.scopeHeader, timeout: o.timeout, dedups: o.dedups}
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: g.handler(mw), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "idem-gateway: listening on http://%s (upstream %s)\n", l.Addr(), up.Redacted())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), o.timeout+5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// openStore opens the key store at db, migrated, and writes a warning to
// stderr when PostgreSQL could lose a committed key (pgstore.CheckDurability).
func openStore(ctx context.Context, db string, stderr io.Writer) (store.Store, func(), error) {
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		pool, err := pgxpool.New(ctx, db)
		if err != nil {
			return nil, nil, usageError(fmt.Sprintf("--db: %v", err))
		}
		if _, err := pgstore.Migrate(ctx, pool); err != nil {
			pool.Close()
			return nil, nil, fmt.Errorf("migrate the key store: %w", err)
		}
		if d, err := pgstore.CheckDurability(ctx, pool); err != nil {
			fmt.Fprintf(stderr, "idem-gateway: WARN durability not checked: %v\n", err)
		} else if w := d.Warning(); w != "" {
			fmt.Fprintf(stderr, "idem-gateway: WARN %s\n", w)
		}
		return pgstore.New(pool), pool.Close, nil
	}
	sdb, err := sqlitestore.Open(db)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", db, err)
	}
	if _, err := sqlitestore.Migrate(ctx, sdb); err != nil {
		_ = sdb.Close()
		return nil, nil, fmt.Errorf("migrate the key store: %w", err)
	}
	return sqlitestore.New(sdb), func() { _ = sdb.Close() }, nil
}
