package idemgin_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemgin"
	"github.com/idem-dev/idem/memstore"
)

// A gin route behind the middleware: the retry gets the first response
// back, marked Idempotent-Replayed, and the handler runs once; the same
// key with another body is refused. The example runs on memstore, the
// in-memory store; in production it is pgstore.New(pool) or
// sqlitestore.New(db).
func Example() {
	mw, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	authenticate := func(c *gin.Context) { c.Set("user", "user-42") }
	renderErrors := func(c *gin.Context) {
		c.Next()
		if err := c.Errors.Last(); err != nil && !c.Writer.Written() {
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
		}
	}

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery(), authenticate)
	runs := 0
	idemp := idemgin.RequireWithConfig(mw, idemgin.Config{ScopeFunc: func(c *gin.Context) string { return c.GetString("user") }})
	r.POST("/v1/payments", idemp, renderErrors, func(c *gin.Context) {
		runs++
		c.JSON(http.StatusCreated, gin.H{"payment": runs})
	})

	for _, body := range []string{`{"amount":1000}`, `{"amount":1000}`, `{"amount":2000}`} {
		req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "order-7")
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		answer := rec.Body.String()
		if rec.Code >= 400 {
			answer = rec.Header().Get("Content-Type")
		}
		fmt.Println(rec.Code, answer, "replayed:", rec.Header().Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("handler runs:", runs)
	// Output:
	// 201 {"payment":1} replayed: false
	// 201 {"payment":1} replayed: true
	// 422 application/problem+json replayed: false
	// handler runs: 1
}
