// Package idemecho makes echo (v5) routes idempotent with the idem
// middleware:
//
//	mw, err := idem.New(pgstore.New(pool), idem.Config{})
//	e := echo.New()
//	e.Use(middleware.Recover(), authenticate)
//	e.POST("/v1/payments", createPayment, idemecho.Require(mw))
//
// It runs the rest of echo's chain inside the core's net/http middleware
// (idem.Middleware.Require), writing to the response the middleware holds
// back until the key's completion has committed. An error the handler
// returns is rendered there by the echo instance's HTTPErrorHandler, so
// `return echo.NewHTTPError(http.StatusPaymentRequired, "card declined")`
// is stored and replayed as the 402 the client got. Middleware that renders
// responses belongs inside (registered after) this one, recovery outside
// it: a panic passes through after the key is freed.
//
// Events and metrics carry echo's route pattern with the method, as
// "POST /v1/payments/:id".
package idemecho

import (
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/idem-dev/idem"
)

// Config configures RequireWithConfig and OptionalWithConfig. Its zero value is
// valid.
type Config struct {
	// ScopeFunc says whose request it is, its scope, from echo's context
	// (what an authentication middleware set with c.Set, say); an empty
	// scope answers 401. Default none: the Middleware's Config.ScopeFunc
	// decides, by default from idem.WithScope on the request's context.
	ScopeFunc func(c *echo.Context) string
}

// Require makes the routes it is registered on idempotent: a request
// without a key gets 400.
func Require(mw *idem.Middleware) echo.MiddlewareFunc { return RequireWithConfig(mw, Config{}) }

// RequireWithConfig is Require with options.
func RequireWithConfig(mw *idem.Middleware, opts Config) echo.MiddlewareFunc {
	return middleware(mw.Require, opts)
}

// Optional makes requests that carry a key idempotent and passes the
// others straight through.
func Optional(mw *idem.Middleware) echo.MiddlewareFunc { return OptionalWithConfig(mw, Config{}) }

// OptionalWithConfig is Optional with options.
func OptionalWithConfig(mw *idem.Middleware, opts Config) echo.MiddlewareFunc {
	return middleware(mw.Optional, opts)
}

func middleware(wrap func(http.Handler) http.Handler, opts Config) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			req, res := c.Request(), c.Response()
			// Recovery and middleware outside this one see echo's own
			// request and response again, a panic included.
			defer func() { c.SetRequest(req); c.SetResponse(res) }()
			ctx := req.Context()
			if opts.ScopeFunc != nil {
				ctx = idem.WithScope(ctx, opts.ScopeFunc(c))
			}
			r := req.WithContext(ctx)
			r.Pattern = c.Path() // the route label, as chi sets it
			wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c.SetRequest(r)
				c.SetResponse(echo.NewResponse(w, c.Logger()))
				if err := next(c); err != nil {
					c.Echo().HTTPErrorHandler(c, err)
				}
			})).ServeHTTP(res, r)
			return nil
		}
	}
}
