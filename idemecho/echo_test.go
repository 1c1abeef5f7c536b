package idemecho_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/adaptertest"
	"github.com/idem-dev/idem/idemecho"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"
)

// mount serves the suite's route with echo's idioms: recovery first, an
// authentication middleware that sets the user in echo's context, the
// adapter, and a handler that answers errors by returning them.
func mount(t *testing.T, mw *idem.Middleware, answer func(*http.Request) adaptertest.Answer) http.Handler {
	e := echo.New()
	e.Use(middleware.Recover())
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			if u := c.Request().Header.Get("X-User"); u != "" {
				c.Set("user", u)
			}
			return next(c)
		}
	})
	idemp := idemecho.RequireWithConfig(mw, idemecho.Config{ScopeFunc: func(c *echo.Context) string {
		u, _ := c.Get("user").(string)
		return u
	}})
	e.POST("/v1/payments/:id", func(c *echo.Context) error {
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
	}, idemp)
	return e
}

var adapter = adaptertest.Adapter{Mount: mount, Route: "POST /v1/payments/:id"}

// The adapter on the in-memory reference store: the suite tests what the
// framework does to the response, which no store changes (each store passes
// storetest on its own database).
func TestEcho(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, func(*testing.T) store.Store { return memstore.New() }, adapter)
}
