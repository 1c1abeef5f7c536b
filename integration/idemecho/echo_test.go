package idemecho_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/adaptertest"
	"github.com/idem-dev/idem/idemecho"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/sqlitestore"
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
	idemp := idemecho.RequireWithOpts(mw, idemecho.Config{ScopeFunc: func(c *echo.Context) string {
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

func TestEchoPostgreSQL(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, func(t *testing.T) store.Store {
		pool := pgtest.Pool(t, 8)
		_, err := pgstore.Migrate(context.Background(), pool)
		require.NoError(t, err)
		return pgstore.New(pool)
	}, adapter)
}

func TestEchoSQLite(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, func(t *testing.T) store.Store {
		db, err := sqlitestore.Open(t.TempDir() + "/idem.db")
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		_, err = sqlitestore.Migrate(context.Background(), db)
		require.NoError(t, err)
		return sqlitestore.New(db)
	}, adapter)
}
