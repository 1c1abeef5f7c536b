package idemgin_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/adaptertest"
	"github.com/idem-dev/idem/idemgin"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"
)

func init() { gin.SetMode(gin.ReleaseMode) }

// mount serves the suite's route with gin's idioms: recovery first, an
// authentication middleware that sets the user in gin's context, the
// adapter, an error-rendering middleware that answers c.Errors, and a
// handler that answers errors with c.AbortWithStatusJSON or c.Error.
func mount(t *testing.T, mw *idem.Middleware, answer func(*http.Request) adaptertest.Answer) http.Handler {
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, _ any) {
		c.AbortWithStatus(http.StatusInternalServerError)
	}))
	r.Use(func(c *gin.Context) {
		if u := c.GetHeader("X-User"); u != "" {
			c.Set("user", u)
		}
	})
	renderErrors := func(c *gin.Context) {
		c.Next()
		if err := c.Errors.Last(); err != nil && !c.Writer.Written() {
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
		}
	}
	idemp := idemgin.RequireWithConfig(mw, idemgin.Config{ScopeFunc: func(c *gin.Context) string { return c.GetString("user") }})
	r.POST("/v1/payments/:id", idemp, renderErrors, func(c *gin.Context) {
		a := answer(c.Request)
		switch {
		case a.Panic:
			panic("the ledger is on fire")
		case a.Error && a.Status == http.StatusInternalServerError:
			_ = c.Error(errors.New(a.Body)) // the error middleware answers
		case a.Error:
			c.AbortWithStatusJSON(a.Status, gin.H{"message": a.Body})
		default:
			if a.Location != "" {
				c.Header("Location", a.Location)
			}
			c.Data(a.Status, "application/json", []byte(a.Body))
		}
	})
	return r
}

var adapter = adaptertest.Adapter{Mount: mount, Route: "POST /v1/payments/:id"}

// The adapter on the in-memory reference store: the suite tests what the
// framework does to the response, which no store changes (each store passes
// storetest on its own database).
func TestGin(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, func(*testing.T) store.Store { return memstore.New() }, adapter)
}
