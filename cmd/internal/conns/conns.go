// Package conns bounds what the connections of paymentsd's and
// idem-gateway's HTTP listeners may hold before a request on them is
// authenticated: the time and the bytes of a header block, the connections
// open at once, in all and from one source IP, and the idle keep-alive ones. The handlers' bounds (body
// deadline, body memory, requests per user) apply only once a request's
// headers have arrived; these hold while they arrive.
package conns

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// Defaults of Limits shared by both servers; MaxHeaderBytes is each
// server's own.
const (
	DefaultHeaderTimeout = 10 * time.Second
	DefaultMaxConns      = 2048
	DefaultMaxIdleConns  = 1000
	DefaultIdleTimeout   = time.Minute
)

// Limits are an HTTP listener's bounds, each a flag (Register).
type Limits struct {
	// HeaderTimeout is how long a request's line and header block may take
	// to arrive, from its first byte; past it the connection is closed.
	HeaderTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and header block; net/http
	// answers a larger one 431 and closes the connection.
	MaxHeaderBytes int
	// MaxConns bounds the connections open at once; past it the listener
	// accepts no more until one closes, and new ones wait in the kernel's
	// backlog, in the order they came.
	MaxConns int
	// MaxConnsPerSource bounds the connections open at once from one source
	// IP; past it a new one is closed at once. 0, the default, turns it off:
	// behind a load balancer every connection has the balancer's address.
	MaxConnsPerSource int
	// MaxIdleConns bounds the idle keep-alive connections: one going idle
	// past it is closed.
	MaxIdleConns int
	// IdleTimeout is how long an idle keep-alive connection stays open.
	IdleTimeout time.Duration
}

// Register adds the flags of l, with the defaults it holds, to fs.
func (l *Limits) Register(fs *flag.FlagSet) {
	fs.DurationVar(&l.HeaderTimeout, "header-timeout", l.HeaderTimeout, "how long a request's line and headers may take to arrive; a slower connection is closed")
	fs.IntVar(&l.MaxHeaderBytes, "max-header-bytes", l.MaxHeaderBytes, "the largest request line and headers; larger: 431 and the connection closed")
	fs.IntVar(&l.MaxConns, "max-conns", l.MaxConns, "connections open at once on --addr; past it, new connections wait to be accepted until one closes")
	fs.IntVar(&l.MaxConnsPerSource, "max-conns-per-source", l.MaxConnsPerSource, "connections open at once from one source IP; past it a new one is closed at once; 0: no bound\n(behind a load balancer every connection comes from its address: bound clients there)")
	fs.IntVar(&l.MaxIdleConns, "max-idle-conns", l.MaxIdleConns, "how many idle keep-alive connections to keep open; one more going idle is closed")
	fs.DurationVar(&l.IdleTimeout, "idle-timeout", l.IdleTimeout, "how long an idle keep-alive connection stays open")
}

// Check reports the first bound that is not positive (MaxConnsPerSource:
// negative), naming its flag.
func (l Limits) Check() error {
	if l.MaxConnsPerSource < 0 {
		return fmt.Errorf("--max-conns-per-source must not be negative, got %d", l.MaxConnsPerSource)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"header-timeout", l.HeaderTimeout}, {"idle-timeout", l.IdleTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("--%s must be positive, got %v", d.name, d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"max-header-bytes", l.MaxHeaderBytes}, {"max-conns", l.MaxConns}, {"max-idle-conns", l.MaxIdleConns}} {
		if n.v <= 0 {
			return fmt.Errorf("--%s must be positive, got %d", n.name, n.v)
		}
	}
	return nil
}

// Server is an http.Server serving h within l; errorLog is its ErrorLog.
func (l Limits) Server(h http.Handler, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.HeaderTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		IdleTimeout:       l.IdleTimeout,
		ConnState:         newIdleBound(l.MaxIdleConns).connState,
		ErrorLog:          errorLog,
	}
}

// Listener is ln accepting at most l.MaxConns connections open at once,
// and at most l.MaxConnsPerSource of them from one source IP.
func (l Limits) Listener(ln net.Listener) net.Listener {
	return l.ListenerOf(ln, l.MaxConns)
}

// ListenerOf is Listener with maxConns in place of l.MaxConns, for a
// listener with a bound of its own (paymentsd's --grpc-max-conns). The
// per-source bound is inside the global one: a connection closed for its
// source takes no place.
func (l Limits) ListenerOf(ln net.Listener, maxConns int) net.Listener {
	if l.MaxConnsPerSource > 0 {
		ln = &sourceListener{Listener: ln, max: l.MaxConnsPerSource, open: map[string]int{}}
	}
	return netutil.LimitListener(ln, maxConns)
}
