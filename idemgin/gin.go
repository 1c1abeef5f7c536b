// Package idemgin makes gin routes idempotent with the idem middleware:
//
//	mw, err := idem.New(pgstore.New(pool), idem.Config{})
//	r := gin.New()
//	r.Use(gin.Recovery(), authenticate)
//	r.POST("/v1/payments", idemgin.Require(mw), renderErrors, createPayment)
//
// where renderErrors is the application's error-rendering middleware, for
// example:
//
//	func renderErrors(c *gin.Context) {
//		c.Next()
//		if err := c.Errors.Last(); err != nil && !c.Writer.Written() {
//			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
//		}
//	}
//
// It runs the rest of gin's chain inside the core's net/http middleware
// (idem.Middleware.Require), with c.Writer writing to the response the
// middleware holds back until the key's completion has committed: what
// c.JSON, c.AbortWithStatusJSON or an error-rendering middleware after this
// one writes from c.Errors is what is stored and replayed. Middleware that
// renders responses belongs after this one, recovery before it: a panic
// passes through after the key is freed. An idempotent response cannot
// be hijacked or streamed.
//
// Events and metrics carry gin's route pattern with the method, as
// "POST /v1/payments/:id".
//
// gin runs a chain once, so in atomic mode with ModeAtomicDeferred a request
// the middleware must run a second time (its deferred claim lost to a
// record it may re-acquire) is answered 503 and released, for the client
// to retry.
package idemgin

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idem-dev/idem"
)

// Config configures RequireWithConfig and OptionalWithConfig. Its zero value is
// valid.
type Config struct {
	// ScopeFunc says whose request it is, its scope, from gin's context
	// (what an authentication middleware set with c.Set, say); an empty
	// scope answers 401. Default none: the Middleware's Config.ScopeFunc
	// decides, by default from idem.WithScope on the request's context.
	ScopeFunc func(c *gin.Context) string
}

// Require makes the routes it is used on idempotent: a request without a
// key gets 400.
func Require(mw *idem.Middleware) gin.HandlerFunc { return RequireWithConfig(mw, Config{}) }

// RequireWithConfig is Require with options.
func RequireWithConfig(mw *idem.Middleware, opts Config) gin.HandlerFunc {
	return middleware(mw.Require, opts)
}

// Optional makes requests that carry a key idempotent and passes the
// others straight through.
func Optional(mw *idem.Middleware) gin.HandlerFunc { return OptionalWithConfig(mw, Config{}) }

// OptionalWithConfig is Optional with options.
func OptionalWithConfig(mw *idem.Middleware, opts Config) gin.HandlerFunc {
	return middleware(mw.Optional, opts)
}

func middleware(wrap func(http.Handler) http.Handler, opts Config) gin.HandlerFunc {
	return func(c *gin.Context) {
		req, out := c.Request, c.Writer
		// Recovery and middleware before this one see gin's own request
		// and writer again, a panic included.
		defer func() { c.Request, c.Writer = req, out }()
		ctx := req.Context()
		if opts.ScopeFunc != nil {
			ctx = idem.WithScope(ctx, opts.ScopeFunc(c))
		}
		r := req.WithContext(ctx)
		r.Pattern = c.FullPath() // the route label, as chi sets it
		ran := false
		wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ran {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			ran = true
			cw := &writer{ResponseWriter: w, outer: out, size: -1, status: http.StatusOK}
			c.Request, c.Writer = r, cw
			c.Next()
			cw.WriteHeaderNow() // as gin does after the chain: c.Status alone is an answer
		})).ServeHTTP(out, r)
		c.Abort() // the chain ran inside, or must not run at all
	}
}

// writer is gin's view of the held-back response: gin.ResponseWriter's
// bookkeeping (a status settable until the first write, the size) over it.
type writer struct {
	http.ResponseWriter
	outer  gin.ResponseWriter // for CloseNotify
	size   int                // -1 until the header is written
	status int
}

var _ gin.ResponseWriter = (*writer)(nil)

func (w *writer) WriteHeader(code int) {
	if code > 0 && !w.Written() {
		w.status = code
	}
}

func (w *writer) WriteHeaderNow() {
	if !w.Written() {
		w.size = 0
		w.ResponseWriter.WriteHeader(w.status)
	}
}

func (w *writer) Write(b []byte) (int, error) {
	w.WriteHeaderNow()
	n, err := w.ResponseWriter.Write(b)
	w.size += n
	return n, err
}

func (w *writer) WriteString(s string) (int, error) {
	w.WriteHeaderNow()
	n, err := io.WriteString(w.ResponseWriter, s)
	w.size += n
	return n, err
}

func (w *writer) Status() int   { return w.status }
func (w *writer) Size() int     { return w.size }
func (w *writer) Written() bool { return w.size != -1 }

// Flush writes the header; nothing reaches the client before the commit.
func (w *writer) Flush() { w.WriteHeaderNow() }

// Hijack fails: the connection cannot be handed over while the response
// is held back.
func (w *writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, errors.New("idemgin: an idempotent response cannot be hijacked")
}

// CloseNotify is the connection's: gin.ResponseWriter still requires it.
func (w *writer) CloseNotify() <-chan bool { return w.outer.CloseNotify() }

func (w *writer) Pusher() http.Pusher { return nil }

// Unwrap lets http.ResponseController reach the held-back response.
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
