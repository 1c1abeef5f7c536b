package routers_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"
	echomw "github.com/labstack/echo/v4/middleware"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/adaptertest"
)

// idemEchoV4 puts idem on echo v4 routes, which module idemecho (echo v5)
// does not take: echo.WrapMiddleware runs the rest of the chain inside
// mw.Require; an error the handler returns is rendered there (c.Error), so
// the middleware stores what the client gets; echo's own request and
// response are put back for the recovery outside; the route label is
// echo's path. docs/integrations.md quotes it.
func idemEchoV4(wrap func(http.Handler) http.Handler) echo.MiddlewareFunc {
	wrapped := echo.WrapMiddleware(wrap)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		inner := wrapped(func(c echo.Context) error {
			if err := next(c); err != nil {
				c.Error(err)
			}
			return nil
		})
		return func(c echo.Context) error {
			req, res := c.Request(), c.Response()
			// The recovery outside answers on echo's own response.
			defer func() { c.SetRequest(req); c.SetResponse(res) }()
			r := req.WithContext(req.Context())
			r.Pattern = c.Path()
			c.SetRequest(r)
			return inner(c)
		}
	}
}

// mountEchoV4 serves the suite's route with echo v4's idioms: recovery
// first, authentication putting the user in the request's context, idem,
// and a handler that answers errors by returning them.
func mountEchoV4(t *testing.T, mw *idem.Middleware, answer func(*http.Request) adaptertest.Answer) http.Handler {
	e := echo.New()
	e.Use(echomw.Recover())
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if u := c.Request().Header.Get("X-User"); u != "" {
				c.SetRequest(c.Request().WithContext(idem.WithScope(c.Request().Context(), u)))
			}
			return next(c)
		}
	})
	e.POST("/v1/payments/:id", func(c echo.Context) error {
		a := answer(c.Request())
		switch {
		case a.Panic:
			panic("the ledger is on fire")
		case a.Error && a.Status == http.StatusInternalServerError:
			return errors.New(a.Body) // echo's error handler chooses the 500
		case a.Error:
			return echo.NewHTTPError(a.Status, a.Body)
		}
		if a.Location != "" {
			c.Response().Header().Set("Location", a.Location)
		}
		return c.Blob(a.Status, echo.MIMEApplicationJSON, []byte(a.Body))
	}, idemEchoV4(mw.Require))
	return e
}
