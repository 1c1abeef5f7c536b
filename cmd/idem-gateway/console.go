package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/console"
	"github.com/idem-dev/idem/store"
)

// newConsole returns the operator console when --console-token-file is
// set, else nil: it shows the keys whose upstream outcome is unknown and
// resolves them as keys resolve does, audited. mw returns the gateway's
// middleware, set once the console exists (it reports its events to it).
func newConsole(o options, s store.Store, mw func() *idem.Middleware) (*console.Console, error) {
	if o.consoleToken == "" {
		return nil, nil
	}
	if o.metricsAddr == "" {
		return nil, usageError("--console-token-file needs --metrics-addr: the console is served on the admin listener only")
	}
	c, err := console.New(console.Config{
		Name: "idem-gateway", Store: s, TokenFile: o.consoleToken, OutcomeUnknownFunc: outcomeUnknown,
		ReplayCacheFunc: func() idem.ReplayCacheStats { return mw().ReplayCache() },
	})
	if err != nil {
		return nil, usageError("--console-token-file: " + err.Error())
	}
	return c, nil
}

// serveAdmin serves the admin listener (--metrics-addr), never the
// proxy's: the console at /console/, until ctx ends.
func serveAdmin(ctx context.Context, addr string, con *console.Console, stderr io.Writer) error {
	if addr == "" || con == nil {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (--metrics-addr): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", http.StripPrefix("/console", con))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "idem-gateway: operator console on http://%s/console/\n", l.Addr())
	go func() { _ = con.Run(ctx) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(stderr, "idem-gateway: admin listener:", err)
		}
	}()
	return nil
}
